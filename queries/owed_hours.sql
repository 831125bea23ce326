-- owed_hours.sql: did each team get the GPU-hours it was owed?
-- Per team (a leaf of the budget tree) and whole UTC hour (partial hours pro rata):
--   owed      = min(team share of the available GPU-hours [product of normalised shares down the
--               tree; hosts marked unhealthy or failed left out], demand = GPU-hours requested by its
--               allocated workloads (min_runtime_s > 0) while waiting or running);
--               a team that also has child nodes is owed, up to its demand, what of its share the
--               teams below it are not owed;
--   delivered = allocated GPU-hours it ran;  received = min(delivered, owed).
-- Summed over hours per team; ratio = received / owed (null when nothing was owed).
-- owed_levels.sql sums these rows up the tree to every level and picks the level reported.

-- Demand per team and hour: hour_split (derive.sql) spreads each allocated workload's GPUs from
-- submission (or the period's start) to completion (or the period's end) over the hours.
CREATE OR REPLACE TEMP TABLE team_hour_demand AS
SELECT budget, hour_us, sum(gpu_us) AS demand_gpu_us FROM hour_split WHERE src = 1 GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE team_hour_delivered AS
SELECT budget, hour_us, sum(gpu_us) AS delivered_gpu_us FROM run_hours WHERE allocated GROUP BY ALL;

-- Each team's hours: its share of the available GPU-microseconds (team_hour_share, derive.sql), its demand
-- and what it ran.
CREATE OR REPLACE TEMP TABLE team_hour_base AS
SELECT t.budget, h.hour_us,
       coalesce(s.share_gpu_us, 0) AS share_gpu_us,
       coalesce(d.demand_gpu_us, 0) AS demand_gpu_us,
       coalesce(v.delivered_gpu_us, 0) AS delivered_gpu_us
FROM teams t CROSS JOIN hours h
LEFT JOIN team_hour_share s ON s.budget = t.budget AND s.hour_us = h.hour_us
LEFT JOIN team_hour_demand d ON d.budget = t.budget AND d.hour_us = h.hour_us
LEFT JOIN team_hour_delivered v ON v.budget = t.budget AND v.hour_us = h.hour_us;

-- A node that funds workloads directly and has child nodes (a Slurm account whose Share=parent users
-- charge it, beside users with shares of their own) is a team whose share is also its children's:
-- they split all of it among themselves. Its own work is owed what of its share the teams below it
-- are not owed that hour, up to its demand, so the node's subtree is never owed more than its share.
CREATE OR REPLACE TEMP TABLE mixed_teams AS
SELECT budget FROM teams t WHERE EXISTS (SELECT 1 FROM nodes c WHERE c.parent = t.budget);

-- For each such node: the teams strictly below it that have no children (owed min(share, demand))
-- and the nodes like it below it (their owed depends on their own subtree), itself included with
-- weight 0 so that every node finds a row in the iteration below.
CREATE OR REPLACE TEMP TABLE mixed_below AS
SELECT a.anc AS above, a.path AS budget, 1.0 AS w
FROM ancestry a JOIN mixed_teams m ON m.budget = a.path WHERE a.anc IN (SELECT budget FROM mixed_teams) AND a.depth > 0
UNION ALL SELECT budget, budget, 0.0 FROM mixed_teams;

CREATE OR REPLACE TEMP TABLE mixed_base AS
SELECT m.budget, b.hour_us, b.share_gpu_us, b.demand_gpu_us,
       coalesce(l.leaf_owed_gpu_us, 0) AS leaf_owed_gpu_us
FROM mixed_teams m JOIN team_hour_base b USING (budget)
LEFT JOIN (
    SELECT a.anc AS budget, b.hour_us, sum(least(b.share_gpu_us, b.demand_gpu_us)) AS leaf_owed_gpu_us
    FROM ancestry a JOIN team_hour_base b ON b.budget = a.path
    WHERE a.depth > 0 AND a.anc IN (SELECT budget FROM mixed_teams) AND a.path NOT IN (SELECT budget FROM mixed_teams)
    GROUP BY ALL
) l ON l.budget = m.budget AND l.hour_us = b.hour_us;

-- Their owed hours, deepest first: round k gets exact every node with fewer than k such nodes below it
-- on any path, so as many rounds as the longest chain of them suffice.
CREATE OR REPLACE TEMP TABLE mixed_owed AS
WITH RECURSIVE it(k, budget, hour_us, left_gpu_us, owed_gpu_us) AS (
    SELECT 0, budget, hour_us, 0.0::DOUBLE, 0.0::DOUBLE FROM mixed_base
    UNION ALL
    SELECT a.k + 1, a.budget, a.hour_us,
           greatest(0.0, any_value(d.share_gpu_us) - any_value(d.leaf_owed_gpu_us) - sum(mb.w * b.owed_gpu_us)),
           least(any_value(d.demand_gpu_us)::DOUBLE,
                 greatest(0.0, any_value(d.share_gpu_us) - any_value(d.leaf_owed_gpu_us) - sum(mb.w * b.owed_gpu_us)))
    FROM it a
    JOIN mixed_base d ON d.budget = a.budget AND d.hour_us = a.hour_us
    JOIN mixed_below mb ON mb.above = a.budget
    JOIN it b ON b.budget = mb.budget AND b.hour_us = a.hour_us
    WHERE a.k < (SELECT max(n) FROM (SELECT count(*) AS n FROM mixed_below GROUP BY budget))
    GROUP BY a.k, a.budget, a.hour_us
)
SELECT budget, hour_us, arg_max(left_gpu_us, k) AS left_gpu_us, arg_max(owed_gpu_us, k) AS owed_gpu_us
FROM it WHERE k > 0 GROUP BY ALL;

-- Per team and hour; a node with children reports as its share what the teams below it left of it.
-- These are the deepest level's rows; owed_levels.sql sums them up the tree and picks the level reported.
CREATE OR REPLACE TEMP TABLE owed_leaf_hours AS
SELECT b.budget, b.hour_us,
       coalesce(m.left_gpu_us, b.share_gpu_us) AS share_gpu_us,
       b.demand_gpu_us, b.delivered_gpu_us,
       coalesce(m.owed_gpu_us, least(b.share_gpu_us, b.demand_gpu_us)) AS owed_gpu_us,
       least(b.delivered_gpu_us, coalesce(m.owed_gpu_us, least(b.share_gpu_us, b.demand_gpu_us))) AS received_gpu_us
FROM team_hour_base b LEFT JOIN mixed_owed m USING (budget, hour_us);
