-- wait_by_size.sql: how long did jobs of each size wait?
-- Queue wait = first start - submit; for requeued work, restart - preemption (counted apart).
-- A wait counts when the start that ends it falls in the period. Size buckets by requested
-- GPUs: 1, 2-8, 9-64, 65-256, 257+; debug = minimum runtime <= 15 min (900 s), as defined, which
-- includes unallocated work (minimum runtime 0); debug_allocated = minimum runtime 1 s to 15 min,
-- the protected debug runs alone (free fill waiting in its backlog would otherwise dominate).
-- Percentiles interpolate linearly between ranks (quantile_cont).

CREATE OR REPLACE TEMP TABLE size_buckets AS
SELECT * FROM (VALUES (1, '1', 1, 1), (2, '2-8', 2, 8), (3, '9-64', 9, 64), (4, '65-256', 65, 256),
                      (5, '257+', 257, 9223372036854775807)) v(ord, size, lo, hi);

-- One pass of quantiles per group: the 41 CDF points (every 2.5%) and p99; p50 and p90 are among them.
CREATE OR REPLACE TEMP TABLE wait_stats AS
WITH waits AS MATERIALIZED (
    SELECT 'first' AS wait_kind, f.gpus, f.min_runtime_s, (f.first_start_us - f.submit_us) / 1e6 AS wait_s
    FROM workload_iv f, params p
    WHERE f.first_start_us >= p.t0 AND f.first_start_us < p.pt1
    UNION ALL
    SELECT 'requeue', f.gpus, f.min_runtime_s, (x.next_start_us - x.preempt_us) / 1e6
    FROM preempt_iv x JOIN workload_iv f USING (wid), params p
    WHERE x.next_start_us >= p.t0 AND x.next_start_us < p.pt1
), sized AS (
    SELECT wait_kind, CASE WHEN gpus <= 1 THEN 1 WHEN gpus <= 8 THEN 2 WHEN gpus <= 64 THEN 3
                           WHEN gpus <= 256 THEN 4 ELSE 5 END AS ord, min_runtime_s, wait_s
    FROM waits
), keyed AS (
    SELECT wait_kind, ord, 'all' AS tier, wait_s FROM sized
    UNION ALL
    SELECT wait_kind, ord, 'allocated', wait_s FROM sized WHERE min_runtime_s > 0
    UNION ALL
    SELECT wait_kind, 6, 'all', wait_s FROM waits WHERE min_runtime_s <= 900
    UNION ALL
    SELECT wait_kind, 7, 'all', wait_s FROM waits WHERE min_runtime_s > 0 AND min_runtime_s <= 900
), stats AS (
    SELECT wait_kind, ord, tier, count(wait_s) AS jobs, avg(wait_s) AS mean_s, max(wait_s) AS max_s,
           quantile_cont(wait_s, [x / 40 FOR x IN range(0, 41)] || [0.99]) AS q
    FROM keyed GROUP BY ALL
), grid AS (
    SELECT k.wait_kind, b.ord, b.size, b.tier
    FROM (VALUES ('first'), ('requeue')) k(wait_kind),
         (SELECT ord, size, 'all' AS tier FROM size_buckets UNION ALL SELECT ord, size, 'allocated' FROM size_buckets
          UNION ALL SELECT 6, 'debug', 'all' UNION ALL SELECT 7, 'debug_allocated', 'all') b
)
SELECT g.wait_kind, g.ord, g.size, g.tier, coalesce(s.jobs, 0) AS jobs, s.mean_s,
       s.q[21] AS p50_s, s.q[37] AS p90_s, s.q[42] AS p99_s, s.max_s, s.q[1:41] AS cdf_s
FROM grid g LEFT JOIN stats s USING (wait_kind, ord, tier)
ORDER BY g.wait_kind, g.tier, g.ord;
