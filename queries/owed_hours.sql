-- owed_hours.sql: did each team get the GPU-hours it was owed?
-- Per team (a leaf of the budget tree) and whole UTC hour (partial hours pro rata):
--   owed      = min(team share of the available GPU-hours [product of normalised shares down the
--               tree; hosts marked unhealthy or failed left out], demand = GPU-hours requested by its
--               allocated workloads (min_runtime_s > 0) while waiting or running);
--   delivered = allocated GPU-hours it ran;  received = min(delivered, owed).
-- Summed over hours per team; ratio = received / owed (null when nothing was owed).

-- Demand per team and hour: hour_split (derive.sql) spreads each allocated workload's GPUs from
-- submission (or the period's start) to completion (or the period's end) over the hours.
CREATE OR REPLACE TEMP TABLE team_hour_demand AS
SELECT budget, hour_us, sum(gpu_us) AS demand_gpu_us FROM hour_split WHERE src = 1 GROUP BY ALL;

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
WITH per_team AS (
    SELECT budget, sum(owed_gpu_us) AS owed, sum(delivered_gpu_us) AS delivered, sum(received_gpu_us) AS received,
           sum(demand_gpu_us) AS demand, sum(share_gpu_us) AS share
    FROM owed_team_hours GROUP BY budget
)
SELECT t.budget,
       coalesce(p.owed, 0) / 3.6e9 AS owed_gpu_hours,
       coalesce(p.delivered, 0) / 3.6e9 AS delivered_gpu_hours,
       coalesce(p.received, 0) / 3.6e9 AS received_gpu_hours,
       coalesce(p.demand, 0) / 3.6e9 AS demand_gpu_hours,
       coalesce(p.share, 0) / 3.6e9 AS share_gpu_hours,
       CASE WHEN p.owed > 0 THEN p.received / p.owed END AS ratio
FROM teams t LEFT JOIN per_team p USING (budget)
ORDER BY t.budget;
