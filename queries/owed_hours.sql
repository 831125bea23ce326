-- owed_hours.sql: did each team get the GPU-hours it was owed?
-- Per team (a leaf of the budget tree) and whole UTC hour (partial hours pro rata):
--   owed      = min(team share of the available GPU-hours [product of normalised shares down the
--               tree; hosts marked unhealthy or failed left out], demand = GPU-hours requested by its
--               allocated workloads (min_runtime_s > 0) while waiting or running);
--   delivered = allocated GPU-hours it ran;  received = min(delivered, owed).
-- Summed over hours per team; ratio = received / owed (null when nothing was owed).

CREATE OR REPLACE TEMP TABLE team_hour_demand AS
WITH alive AS (
    SELECT w.budget, w.gpus, greatest(w.submit_us, p.t0) AS lo_us, least(coalesce(w.end_us, p.t1), p.t1) AS hi_us
    FROM workload_facts w, params p
    WHERE w.min_runtime_s > 0
), pieces AS (
    SELECT budget, gpus, lo_us, hi_us, unnest(range((lo_us // 3600000000) * 3600000000, hi_us, 3600000000)) AS hour_us
    FROM alive WHERE hi_us > lo_us
)
SELECT budget, hour_us, sum(gpus * (least(hi_us, hour_us + 3600000000) - greatest(lo_us, hour_us))) AS demand_gpu_us
FROM pieces GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE team_hour_delivered AS
SELECT budget, hour_us, sum(gpu_us) AS delivered_gpu_us FROM run_hours WHERE allocated GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE owed_team_hours AS
SELECT t.budget, h.hour_us,
       coalesce(s.share_gpu_us, 0) AS share_gpu_us,
       coalesce(d.demand_gpu_us, 0) AS demand_gpu_us,
       coalesce(v.delivered_gpu_us, 0) AS delivered_gpu_us,
       least(coalesce(s.share_gpu_us, 0), coalesce(d.demand_gpu_us, 0)) AS owed_gpu_us,
       least(coalesce(v.delivered_gpu_us, 0), least(coalesce(s.share_gpu_us, 0), coalesce(d.demand_gpu_us, 0)))
           AS received_gpu_us
FROM teams t CROSS JOIN hours h
LEFT JOIN team_hour_share s ON s.budget = t.budget AND s.hour_us = h.hour_us
LEFT JOIN team_hour_demand d ON d.budget = t.budget AND d.hour_us = h.hour_us
LEFT JOIN team_hour_delivered v ON v.budget = t.budget AND v.hour_us = h.hour_us;

CREATE OR REPLACE TEMP TABLE owed_teams AS
SELECT budget,
       sum(owed_gpu_us) / 3.6e9 AS owed_gpu_hours,
       sum(delivered_gpu_us) / 3.6e9 AS delivered_gpu_hours,
       sum(received_gpu_us) / 3.6e9 AS received_gpu_hours,
       sum(demand_gpu_us) / 3.6e9 AS demand_gpu_hours,
       sum(share_gpu_us) / 3.6e9 AS share_gpu_hours,
       CASE WHEN sum(owed_gpu_us) > 0 THEN sum(received_gpu_us) / sum(owed_gpu_us) END AS ratio
FROM owed_team_hours GROUP BY budget ORDER BY budget;
