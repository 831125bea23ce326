-- fairness.sql: how did each team's usage compare with its allocation, hour by hour?
-- usage = allocated GPU-hours the team ran in the hour; allocation = its share of the available
-- GPU-hours in the hour (as in owed_hours.sql). hour_ratio = usage / allocation in that hour;
-- window_ratio = the same over the lookback window ending with that hour (params.window_us).

CREATE OR REPLACE TEMP TABLE fairness_hourly AS
WITH grid AS (
    SELECT t.budget, h.hour_us, coalesce(v.delivered_gpu_us, 0) AS usage_gpu_us,
           coalesce(s.share_gpu_us, 0) AS allocation_gpu_us
    FROM teams t CROSS JOIN hours h
    LEFT JOIN team_hour_share s ON s.budget = t.budget AND s.hour_us = h.hour_us
    LEFT JOIN (SELECT budget, hour_us, sum(gpu_us) AS delivered_gpu_us FROM run_hours WHERE allocated GROUP BY ALL) v
           ON v.budget = t.budget AND v.hour_us = h.hour_us
), cum AS (
    SELECT *, sum(usage_gpu_us) OVER w AS cum_usage, sum(allocation_gpu_us) OVER w AS cum_alloc
    FROM grid WINDOW w AS (PARTITION BY budget ORDER BY hour_us ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT c.budget, c.hour_us, c.usage_gpu_us / 3.6e9 AS usage_gpu_hours,
       c.allocation_gpu_us / 3.6e9 AS allocation_gpu_hours,
       CASE WHEN c.allocation_gpu_us > 0 THEN c.usage_gpu_us / c.allocation_gpu_us END AS hour_ratio,
       CASE WHEN c.cum_alloc - coalesce(o.cum_alloc, 0) > 0
            THEN (c.cum_usage - coalesce(o.cum_usage, 0)) / (c.cum_alloc - coalesce(o.cum_alloc, 0)) END
           AS window_ratio
FROM cum c CROSS JOIN params p
LEFT JOIN cum o ON o.budget = c.budget AND o.hour_us = c.hour_us - p.window_us
ORDER BY c.budget, c.hour_us;
