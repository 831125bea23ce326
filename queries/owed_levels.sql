-- owed_levels.sql: owed hours at every level of the budget tree, and the level the audit reports.
-- Needs owed_hours.sql (team_hour_base: per team and hour, share, demand, delivered; mixed_teams) and table
-- level_pick(pick): NULL for the team level, else a level's name or depth as text.
--
-- Levels are depths of the tree (0 = the top nodes). At depth d a level's nodes are the nodes at depth d
-- (each standing for its whole subtree) and every team above depth d (a leaf, or a node charged directly
-- beside its children, standing for its own work only), so each level splits the teams' work exactly
-- once. A node's hour at a level: share = its fraction of the available GPU-time (the product of the
-- normalised shares down the tree, which is the sum of its leaves' shares), demand and delivered = the
-- sums over its teams; then owed = min(share, demand) and received = min(delivered, owed), as for a team.
-- The deepest level is the teams' own view, which the audit reported before trees named their levels.

-- Each defined node's depth: steps up to the top of its tree.
CREATE OR REPLACE TEMP TABLE node_depth AS
SELECT path, max(depth)::INTEGER AS depth FROM ancestry GROUP BY path;

-- The levels, named by the nodes' `level` (the last definition at a depth that names one) and the team
-- level by their `team_level` (the last that names one); without a name the team level is the deepest.
CREATE OR REPLACE TEMP TABLE tree_levels AS
WITH depths AS (
    SELECT unnest(range(0, coalesce((SELECT max(depth) FROM node_depth) + 1, 0)))::INTEGER AS depth
), named AS (
    SELECT d.depth, arg_max(e.level, e.seq) AS name
    FROM ev_node e JOIN node_depth d USING (path) WHERE e.level IS NOT NULL GROUP BY d.depth
), team AS (
    SELECT arg_max(team_level, seq) AS name FROM ev_node WHERE team_level IS NOT NULL
), team_depth AS (
    SELECT coalesce(min(n.depth) FILTER (WHERE n.name = t.name), (SELECT max(depth) FROM depths)) AS depth
    FROM named n RIGHT JOIN team t ON true
)
SELECT d.depth, n.name, d.depth = coalesce((SELECT depth FROM team_depth), (SELECT max(depth) FROM depths)) AS team
FROM depths d LEFT JOIN named n USING (depth)
ORDER BY d.depth;

-- The level reported in owed_teams (and the headline): the one picked by name or depth, else the team level.
CREATE OR REPLACE TEMP TABLE level_chosen AS
SELECT (SELECT depth FROM tree_levels l, level_pick p
        WHERE (p.pick IS NULL AND l.team) OR l.name = p.pick
           OR (regexp_full_match(p.pick, '[0-9]{1,9}') AND l.depth = p.pick::INTEGER)
        ORDER BY l.name = p.pick DESC NULLS LAST LIMIT 1) AS depth;

-- Which node of each level every team's work counts to (own: a team above the level, its own work).
CREATE OR REPLACE TEMP TABLE level_members AS
SELECT l.depth, CASE WHEN nd.depth >= l.depth THEN a.anc ELSE t.budget END AS budget, t.budget AS team,
       nd.depth < l.depth AS own
FROM teams t JOIN node_depth nd ON nd.path = t.budget CROSS JOIN tree_levels l
LEFT JOIN ancestry a ON a.path = t.budget AND a.depth = nd.depth - l.depth;

-- Each level's nodes; mixed: a node charged directly beside its children, standing for its own work.
CREATE OR REPLACE TEMP TABLE level_groups AS
SELECT DISTINCT depth, budget, own, own AND budget IN (SELECT budget FROM mixed_teams) AS mixed FROM level_members;

-- Each level's nodes hour by hour: the node's share (team_hour_share, derive.sql: the product of the
-- normalised shares down the tree, every node's), and the demand and delivered GPU-time of its teams.
CREATE OR REPLACE TEMP TABLE level_base AS
WITH sums AS (
    SELECT m.depth, m.budget, b.hour_us, sum(b.demand_gpu_us) AS demand_gpu_us,
           sum(b.delivered_gpu_us) AS delivered_gpu_us
    FROM level_members m JOIN team_hour_base b ON b.budget = m.team
    GROUP BY ALL
)
SELECT x.depth, x.budget, x.hour_us, coalesce(s.share_gpu_us, 0) AS share_gpu_us, x.demand_gpu_us, x.delivered_gpu_us
FROM sums x LEFT JOIN team_hour_share s ON s.budget = x.budget AND s.hour_us = x.hour_us;

-- A mixed node's own work is owed, up to its demand, what of its share the level's nodes below it are
-- not owed (so its subtree is never owed more than its share). Below it: plain nodes, owed min(share,
-- demand), and mixed nodes, whose owed depends on theirs; each mixed node is listed below itself with
-- weight 0 so that every one finds a row in the iteration.
CREATE OR REPLACE TEMP TABLE level_mixed_below AS
SELECT g.depth, a.anc AS above, g.budget, 1.0 AS w
FROM level_groups g
JOIN ancestry a ON a.path = g.budget AND a.depth > 0
JOIN level_groups m ON m.depth = g.depth AND m.budget = a.anc AND m.mixed
WHERE g.mixed
UNION ALL SELECT depth, budget, budget, 0.0 FROM level_groups WHERE mixed;

CREATE OR REPLACE TEMP TABLE level_mixed_base AS
SELECT b.depth, b.budget, b.hour_us, b.share_gpu_us, b.demand_gpu_us, coalesce(l.plain_owed_gpu_us, 0) AS plain_owed_gpu_us
FROM level_base b JOIN level_groups g USING (depth, budget)
LEFT JOIN (
    SELECT m.depth, m.budget, b.hour_us, sum(least(b.share_gpu_us, b.demand_gpu_us)) AS plain_owed_gpu_us
    FROM level_groups m
    JOIN ancestry a ON a.anc = m.budget AND a.depth > 0
    JOIN level_groups p ON p.depth = m.depth AND p.budget = a.path AND NOT p.mixed
    JOIN level_base b ON b.depth = p.depth AND b.budget = p.budget
    WHERE m.mixed
    GROUP BY ALL
) l USING (depth, budget, hour_us)
WHERE g.mixed;

-- Deepest first: round k gets exact every mixed node with fewer than k mixed nodes below it on any path,
-- so as many rounds as the longest chain of them suffice.
CREATE OR REPLACE TEMP TABLE level_mixed_owed AS
WITH RECURSIVE it(k, depth, budget, hour_us, left_gpu_us, owed_gpu_us) AS (
    SELECT 0, depth, budget, hour_us, 0.0::DOUBLE, 0.0::DOUBLE FROM level_mixed_base
    UNION ALL
    SELECT a.k + 1, a.depth, a.budget, a.hour_us,
           greatest(0.0, any_value(d.share_gpu_us) - any_value(d.plain_owed_gpu_us) - sum(mb.w * b.owed_gpu_us)),
           least(any_value(d.demand_gpu_us)::DOUBLE,
                 greatest(0.0, any_value(d.share_gpu_us) - any_value(d.plain_owed_gpu_us) - sum(mb.w * b.owed_gpu_us)))
    FROM it a
    JOIN level_mixed_base d ON d.depth = a.depth AND d.budget = a.budget AND d.hour_us = a.hour_us
    JOIN level_mixed_below mb ON mb.depth = a.depth AND mb.above = a.budget
    JOIN it b ON b.depth = a.depth AND b.budget = mb.budget AND b.hour_us = a.hour_us
    WHERE a.k < (SELECT max(n) FROM (SELECT count(*) AS n FROM level_mixed_below GROUP BY depth, above))
    GROUP BY a.k, a.depth, a.budget, a.hour_us
)
SELECT depth, budget, hour_us, arg_max(left_gpu_us, k) AS left_gpu_us, arg_max(owed_gpu_us, k) AS owed_gpu_us
FROM it WHERE k > 0 GROUP BY ALL;

-- Every level's nodes hour by hour: the one hourly table every per-level figure is summed from. A mixed
-- node reports as its share what the nodes below it left of it.
CREATE OR REPLACE TEMP TABLE level_hours AS
SELECT b.depth, b.budget, b.hour_us,
       coalesce(m.left_gpu_us, b.share_gpu_us) AS share_gpu_us, b.demand_gpu_us, b.delivered_gpu_us,
       coalesce(m.owed_gpu_us, least(b.share_gpu_us, b.demand_gpu_us)) AS owed_gpu_us,
       least(b.delivered_gpu_us, coalesce(m.owed_gpu_us, least(b.share_gpu_us, b.demand_gpu_us))) AS received_gpu_us
FROM level_base b LEFT JOIN level_mixed_owed m USING (depth, budget, hour_us);

-- Per level and node: the period's sums, and received when owed and delivered are summed over each UTC
-- day or week (from Monday 00:00 UTC; the epoch fell on a Thursday) before the smaller is taken.
CREATE OR REPLACE TEMP TABLE level_nodes AS
WITH per AS (
    SELECT depth, budget, sum(owed_gpu_us) AS owed, sum(delivered_gpu_us) AS delivered,
           sum(received_gpu_us) AS received, sum(demand_gpu_us) AS demand, sum(share_gpu_us) AS share
    FROM level_hours GROUP BY ALL
), day AS (
    SELECT depth, budget, sum(least(o, d)) AS received_day FROM (
        SELECT depth, budget, hour_us // 86400000000 AS b, sum(owed_gpu_us) AS o, sum(delivered_gpu_us) AS d
        FROM level_hours GROUP BY ALL) GROUP BY ALL
), week AS (
    SELECT depth, budget, sum(least(o, d)) AS received_week FROM (
        SELECT depth, budget, (hour_us + 259200000000) // 604800000000 AS b, sum(owed_gpu_us) AS o,
               sum(delivered_gpu_us) AS d
        FROM level_hours GROUP BY ALL) GROUP BY ALL
), groups AS (SELECT depth, budget FROM level_groups)
SELECT g.depth, g.budget,
       coalesce(p.owed, 0) / 3.6e9 AS owed_gpu_hours,
       coalesce(p.delivered, 0) / 3.6e9 AS delivered_gpu_hours,
       coalesce(p.received, 0) / 3.6e9 AS received_gpu_hours,
       coalesce(p.demand, 0) / 3.6e9 AS demand_gpu_hours,
       coalesce(p.share, 0) / 3.6e9 AS share_gpu_hours,
       CASE WHEN p.owed > 0 THEN p.received / p.owed END AS ratio,
       coalesce(dy.received_day, 0) / 3.6e9 AS received_day_gpu_hours,
       CASE WHEN p.owed > 0 THEN dy.received_day / p.owed END AS ratio_day,
       coalesce(wk.received_week, 0) / 3.6e9 AS received_week_gpu_hours,
       CASE WHEN p.owed > 0 THEN wk.received_week / p.owed END AS ratio_week
FROM groups g LEFT JOIN per p USING (depth, budget) LEFT JOIN day dy USING (depth, budget)
LEFT JOIN week wk USING (depth, budget)
ORDER BY g.depth, g.budget;

-- Where each level's shortfall went. In an hour, the GPU time the short nodes' shares did not get was
-- used in one of three ways: left idle (available GPUs nothing ran on), run as free fill (unallocated
-- work), or run by nodes of the level beyond their share (delivered - share, where positive). Of that
-- over-share, the part forced by runs wider than their node's share is told apart: a run of g GPUs in a
-- node whose share that hour is s GPUs (s = share GPU-time / the hour's length) forces (g - s) x its time
-- over the share even if it runs alone; a node's wide part is the sum of that over its runs, at most its
-- over-share. Each hour's shortfall (sum of owed - received) is split among idle, free fill, wide runs and
-- the rest of the over-share (above_share) in proportion to their GPU time that hour; an hour short with
-- none of them (logs whose runs exceed the capacity they state) counts as unexplained.
CREATE OR REPLACE TEMP TABLE team_run_widths AS
WITH r AS (
    SELECT bid, gpus, lo_us, hi_us FROM run_c WHERE allocated AND hi_us > lo_us
), x AS (
    SELECT bid, gpus, lo_us, hi_us, unnest(range(lo_us // 3600000000, (hi_us - 1) // 3600000000 + 1)) AS h FROM r
)
SELECT b.path AS team, x.h * 3600000000 AS hour_us, x.gpus,
       sum(least(x.hi_us, (x.h + 1) * 3600000000) - greatest(x.lo_us, x.h * 3600000000)) AS time_us
FROM x JOIN budgets b USING (bid)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE level_causes AS
WITH hour_len AS (
    SELECT hour_us, hi_us - lo_us AS len_us FROM hours
), wide AS (  -- per level node and hour: the over-share its runs wider than its share force
    SELECT m.depth, m.budget, w.hour_us,
           sum(greatest(0, w.gpus * w.time_us - lh.share_gpu_us / hl.len_us * w.time_us)) AS forced_us
    FROM level_members m
    JOIN team_run_widths w ON w.team = m.team
    JOIN level_hours lh ON lh.depth = m.depth AND lh.budget = m.budget AND lh.hour_us = w.hour_us
    JOIN hour_len hl ON hl.hour_us = w.hour_us
    WHERE hl.len_us > 0 AND w.gpus * hl.len_us > lh.share_gpu_us
    GROUP BY ALL
), node_hours AS (
    SELECT lh.depth, lh.hour_us, lh.owed_gpu_us - lh.received_gpu_us AS short_us,
           greatest(0, lh.delivered_gpu_us - lh.share_gpu_us) AS over_us,
           least(greatest(0, lh.delivered_gpu_us - lh.share_gpu_us), coalesce(w.forced_us, 0)) AS wide_us
    FROM level_hours lh LEFT JOIN wide w USING (depth, budget, hour_us)
), per_hour AS (
    SELECT depth, hour_us, sum(short_us) AS short_us, sum(over_us) AS over_us, sum(wide_us) AS wide_us
    FROM node_hours GROUP BY ALL
), cluster AS (  -- idle and free-fill GPU time each hour
    SELECT h.hour_us, greatest(0, coalesce(a.avail_us, 0) - coalesce(r.alloc_us, 0) - coalesce(r.fill_us, 0)) AS idle_us,
           coalesce(r.fill_us, 0) AS fill_us
    FROM hours h
    LEFT JOIN (SELECT hour_us, sum(avail_gpus * len_us) AS avail_us FROM segment_avail GROUP BY ALL) a USING (hour_us)
    LEFT JOIN (SELECT hour_us, sum(gpu_us) FILTER (WHERE allocated) AS alloc_us,
                      sum(gpu_us) FILTER (WHERE NOT allocated) AS fill_us
               FROM run_hours GROUP BY ALL) r USING (hour_us)
), split AS (
    SELECT p.depth, p.short_us, c.idle_us, c.fill_us, p.wide_us, p.over_us - p.wide_us AS above_us,
           c.idle_us + c.fill_us + p.over_us AS pool_us
    FROM per_hour p JOIN cluster c USING (hour_us) WHERE p.short_us > 0
)
SELECT depth,
       sum(CASE WHEN pool_us > 0 THEN short_us * wide_us / pool_us ELSE 0 END) / 3.6e9 AS wide_runs_gpu_hours,
       sum(CASE WHEN pool_us > 0 THEN short_us * idle_us / pool_us ELSE 0 END) / 3.6e9 AS idle_gpus_gpu_hours,
       sum(CASE WHEN pool_us > 0 THEN short_us * fill_us / pool_us ELSE 0 END) / 3.6e9 AS free_fill_gpu_hours,
       sum(CASE WHEN pool_us > 0 THEN short_us * above_us / pool_us ELSE 0 END) / 3.6e9 AS above_share_gpu_hours,
       sum(CASE WHEN pool_us > 0 THEN 0 ELSE short_us END) / 3.6e9 AS unexplained_gpu_hours
FROM split GROUP BY depth;

-- The level reported: its nodes hour by hour and in sum (every audit of owed hours below reads these).
CREATE OR REPLACE TEMP TABLE owed_team_hours AS
SELECT budget, hour_us, share_gpu_us, demand_gpu_us, delivered_gpu_us, owed_gpu_us, received_gpu_us
FROM level_hours WHERE depth = (SELECT depth FROM level_chosen);

CREATE OR REPLACE TEMP TABLE owed_teams AS
SELECT budget, owed_gpu_hours, delivered_gpu_hours, received_gpu_hours, demand_gpu_hours, share_gpu_hours, ratio,
       ratio_day, ratio_week
FROM level_nodes WHERE depth = (SELECT depth FROM level_chosen)
ORDER BY budget;

-- Where the shortfall (owed - received) fell, by the node's standing over the fairness window before
-- the hour: GPU-hours it ran in the window's whole hours before this one ÷ its share of them. Below 80 %:
-- a team under-served over the window and still short (others' protected work held the GPUs, or its
-- work did not fit); 80-100 %: about even over the window, short hour by hour; above 100 %: it had run
-- beyond its share (idle GPUs borrowed) and waited while the others caught up, as fair share intends.
-- Running sums per team, then the window is the difference of two of them (one lookup each side).
CREATE OR REPLACE TEMP TABLE owed_standing AS
WITH c AS (
    SELECT budget, hour_us, owed_gpu_us, received_gpu_us,
           sum(delivered_gpu_us) OVER w AS cum_delivered, sum(share_gpu_us) OVER w AS cum_share
    FROM owed_team_hours
    WINDOW w AS (PARTITION BY budget ORDER BY hour_us)
), s AS (
    SELECT c.budget, c.hour_us, c.owed_gpu_us, c.received_gpu_us,
           coalesce(p.cum_delivered, 0) - coalesce(q.cum_delivered, 0) AS used_us,
           coalesce(p.cum_share, 0) - coalesce(q.cum_share, 0) AS entitled_us
    FROM c
    LEFT JOIN c p ON p.budget = c.budget AND p.hour_us = c.hour_us - 3600000000
    LEFT JOIN c q ON q.budget = c.budget AND q.hour_us = c.hour_us - 3600000000 - (SELECT window_us FROM params)
    WHERE c.owed_gpu_us > 0
)
SELECT CASE WHEN entitled_us <= 0 THEN 'no_history'
            WHEN used_us < 0.8 * entitled_us THEN 'below_80'
            WHEN used_us <= entitled_us THEN '80_to_100'
            WHEN used_us <= 1.5 * entitled_us THEN '100_to_150'
            ELSE 'above_150' END AS standing,
       count(*) AS team_hours, sum(owed_gpu_us) / 3.6e9 AS owed_gpu_hours,
       sum(owed_gpu_us - received_gpu_us) / 3.6e9 AS short_gpu_hours
FROM s GROUP BY ALL;
