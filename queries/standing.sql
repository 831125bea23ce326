-- standing.sql: each team's usage / allocation over the lookback window ending at $t (microseconds).
-- usage = allocated GPU-microseconds run in [t - window, t); allocation = the team's fraction of the
-- available GPU-microseconds in that window. Rank by usage / allocation, lowest (most under-served) first.
-- Where the window reaches back before the log begins, the first known capacity and shares are taken
-- to have held (with no usage), as the decision core does: a ratio then means the same in both.
-- Parameters: $t. Needs derive.sql.
WITH p AS (SELECT $t::BIGINT AS t, $t::BIGINT - window_us AS w0 FROM params),
usage AS (
    SELECT b.path AS budget, sum(r.gpus * (least(coalesce(r.end_us, p.t), p.t) - greatest(r.start_us, p.w0))) AS used
    FROM run_c r JOIN budgets b USING (bid), p
    WHERE r.allocated AND r.start_us < p.t AND coalesce(r.end_us, p.t) > p.w0
    GROUP BY b.path
),
alloc AS (
    SELECT f.budget, sum(f.fraction * a.avail_gpus
                         * (least(a.e, p.t) - CASE WHEN a.s = first.s THEN p.w0 ELSE greatest(a.s, p.w0) END))
           AS allocated
    FROM team_fraction f JOIN segment_avail a USING (s), p, (SELECT min(s) AS s FROM segment_avail) first
    WHERE a.s <= p.t AND a.e > p.w0  -- a segment the window has slid past counts nothing (not less than nothing)
    GROUP BY f.budget
)
SELECT t.budget, coalesce(u.used, 0) AS used_gpu_us, coalesce(a.allocated, 0) AS allocated_gpu_us,
       CASE WHEN coalesce(a.allocated, 0) > 0 THEN coalesce(u.used, 0) / a.allocated END AS ratio
FROM teams t LEFT JOIN usage u USING (budget) LEFT JOIN alloc a USING (budget)
ORDER BY budget
