-- level_costs.sql: what the work of each node of the level reported paid, recounted at that level: its first
-- waits (p90) and the work preemption threw away, over the workloads of the teams it stands for (a node's p90
-- is not the sum nor the largest of its teams' p90s; its discarded GPU-hours are the sum of theirs).
-- Needs owed_levels.sql (level_members, level_groups, level_chosen) and discarded_work.sql (discarded_rows).
-- First waits as wait_by_team counts them: submission to first start, when that start falls in the period,
-- every workload of the node's teams (free fill included); preemptions and discarded work as
-- discarded_work.sql counts them (both tiers).
CREATE OR REPLACE TEMP TABLE level_costs AS
WITH members AS (
    SELECT * FROM level_members WHERE depth = (SELECT depth FROM level_chosen)
), waits AS (
    SELECT m.depth, m.budget, count(*) AS started,
           quantile_cont((f.first_start_us - f.submit_us) / 1e6, 0.9) AS wait_p90_s
    FROM workload_iv f JOIN budgets b USING (bid) JOIN members m ON m.team = b.path, params p
    WHERE f.first_start_us >= p.t0 AND f.first_start_us < p.pt1
    GROUP BY ALL
), lost AS (
    SELECT m.depth, m.budget, count(*) AS preemptions, sum(d.discarded_gpu_us) / 3.6e9 AS discarded_gpu_hours
    FROM discarded_rows d JOIN members m ON m.team = d.budget
    GROUP BY ALL
)
SELECT g.depth, g.budget, coalesce(w.started, 0) AS started, w.wait_p90_s, coalesce(l.preemptions, 0) AS preemptions,
       coalesce(l.discarded_gpu_hours, 0.0) AS discarded_gpu_hours
FROM level_groups g LEFT JOIN waits w USING (depth, budget) LEFT JOIN lost l USING (depth, budget)
WHERE g.depth = (SELECT depth FROM level_chosen)
ORDER BY g.budget;
