-- owed_hours.sql: did each team get the GPU-hours it was owed?
-- Per team (a leaf of the budget tree) and whole UTC hour (partial hours pro rata):
--   owed      = min(team share of the available GPU-hours [product of normalised shares down the
--               tree; hosts marked unhealthy or failed left out], demand = GPU-hours requested by its
--               allocated workloads (min_runtime_s > 0) while waiting or running);
--               a team that also has child nodes is owed, up to its demand, what of its share the
--               teams below it are not owed;
--   delivered = allocated GPU-hours it ran;  received = min(delivered, owed).
-- Summed over hours per team; ratio = received / owed (null when nothing was owed).
-- Here: each team's hourly share, demand and delivered GPU-time; owed_levels.sql sums them up the tree to
-- every level (the deepest is the teams' own), takes owed and received there, and picks the level reported.

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
-- are not owed that hour, up to its demand, so the node's subtree is never owed more than its share
-- (owed_levels.sql computes it, at every level of the tree).
CREATE OR REPLACE TEMP TABLE mixed_teams AS
SELECT budget FROM teams t WHERE EXISTS (SELECT 1 FROM nodes c WHERE c.parent = t.budget);
