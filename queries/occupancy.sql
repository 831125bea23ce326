-- occupancy.sql: how full was the cluster, and with what?
-- Occupancy share = occupied GPU-hours / capacity GPU-hours, split allocated / unallocated.
-- GPU-hours of hosts marked unhealthy or failed are reported apart as `down` and left out of
-- capacity; work still running on such a host while it is down is reported apart too
-- (occupied_on_down) and left out of the shares, so shares stay within [0, 1].
-- Per team and hour: GPU-hours run (allocated and unallocated) against its allocation.

CREATE OR REPLACE TEMP TABLE run_on_down AS
WITH down_hosts AS (SELECT list(DISTINCT host) AS hosts FROM segment_down_hosts),
candidates AS (
    SELECT r.*, d.nodes FROM run_c r JOIN run_down_hosts d USING (start_seq), down_hosts dh
    WHERE r.hi_us > r.lo_us AND list_has_any(d.nodes, dh.hosts)
), per_node AS (
    SELECT wid, allocated, lo_us, hi_us, gpus, len(nodes) AS n,
           unnest(nodes) AS host, unnest(range(1, len(nodes) + 1)) AS i
    FROM candidates
)
SELECT pn.allocated,
       sum((pn.gpus // pn.n + CASE WHEN pn.i <= pn.gpus % pn.n THEN 1 ELSE 0 END)
           * (least(pn.hi_us, g.e) - greatest(pn.lo_us, g.s))) AS gpu_us
FROM per_node pn
JOIN segment_down_hosts dh ON dh.host = pn.host
JOIN segments g ON g.s = dh.s
WHERE g.s < pn.hi_us AND g.e > pn.lo_us
GROUP BY pn.allocated;

CREATE OR REPLACE TEMP TABLE occupancy_totals AS
WITH cap AS (
    SELECT coalesce(sum(avail_gpus * len_us), 0) AS capacity_gpu_us,
           coalesce(sum(down_gpus * len_us), 0) AS down_gpu_us,
           coalesce(sum(cap_gpus * len_us), 0) AS installed_gpu_us
    FROM segment_avail
), occ AS (
    SELECT coalesce(sum(gpus * (hi_us - lo_us)) FILTER (WHERE allocated), 0) AS alloc_run_us,
           coalesce(sum(gpus * (hi_us - lo_us)) FILTER (WHERE NOT allocated), 0) AS unalloc_run_us
    FROM run_c WHERE hi_us > lo_us
), dn AS (
    SELECT coalesce(sum(gpu_us) FILTER (WHERE allocated), 0) AS alloc_down_us,
           coalesce(sum(gpu_us) FILTER (WHERE NOT allocated), 0) AS unalloc_down_us
    FROM run_on_down
)
SELECT cap.capacity_gpu_us / 3.6e9 AS capacity_gpu_hours,
       cap.down_gpu_us / 3.6e9 AS down_gpu_hours,
       cap.installed_gpu_us / 3.6e9 AS installed_gpu_hours,
       (occ.alloc_run_us - dn.alloc_down_us + occ.unalloc_run_us - dn.unalloc_down_us) / 3.6e9 AS occupied_gpu_hours,
       (occ.alloc_run_us - dn.alloc_down_us) / 3.6e9 AS allocated_gpu_hours,
       (occ.unalloc_run_us - dn.unalloc_down_us) / 3.6e9 AS unallocated_gpu_hours,
       (dn.alloc_down_us + dn.unalloc_down_us) / 3.6e9 AS occupied_on_down_gpu_hours,
       CASE WHEN cap.capacity_gpu_us > 0 THEN
           (occ.alloc_run_us - dn.alloc_down_us + occ.unalloc_run_us - dn.unalloc_down_us) / cap.capacity_gpu_us END
           AS occupied_share,
       CASE WHEN cap.capacity_gpu_us > 0 THEN (occ.alloc_run_us - dn.alloc_down_us) / cap.capacity_gpu_us END
           AS allocated_share,
       CASE WHEN cap.capacity_gpu_us > 0 THEN (occ.unalloc_run_us - dn.unalloc_down_us) / cap.capacity_gpu_us END
           AS unallocated_share
FROM cap, occ, dn;

CREATE OR REPLACE TEMP TABLE occupancy_hourly AS
WITH cap AS (
    SELECT hour_us, sum(avail_gpus * len_us) AS capacity_gpu_us, sum(down_gpus * len_us) AS down_gpu_us
    FROM segment_avail GROUP BY hour_us
), run AS (
    SELECT hour_us, sum(gpu_us) FILTER (WHERE allocated) AS alloc_us, sum(gpu_us) FILTER (WHERE NOT allocated) AS unalloc_us
    FROM run_hours GROUP BY hour_us
)
SELECT h.hour_us, coalesce(c.capacity_gpu_us, 0) / 3.6e9 AS capacity_gpu_hours,
       coalesce(c.down_gpu_us, 0) / 3.6e9 AS down_gpu_hours,
       coalesce(r.alloc_us, 0) / 3.6e9 AS allocated_gpu_hours,
       coalesce(r.unalloc_us, 0) / 3.6e9 AS unallocated_gpu_hours
FROM hours h LEFT JOIN cap c USING (hour_us) LEFT JOIN run r USING (hour_us)
ORDER BY h.hour_us;

CREATE OR REPLACE TEMP TABLE occupancy_team_hourly AS
WITH run AS (
    SELECT budget, hour_us, sum(gpu_us) FILTER (WHERE allocated) AS alloc_us,
           sum(gpu_us) FILTER (WHERE NOT allocated) AS unalloc_us
    FROM run_hours GROUP BY ALL
), keys AS (
    SELECT budget, hour_us FROM teams CROSS JOIN hours
    UNION SELECT budget, hour_us FROM run
)
SELECT k.budget, k.hour_us, coalesce(r.alloc_us, 0) / 3.6e9 AS allocated_gpu_hours,
       coalesce(r.unalloc_us, 0) / 3.6e9 AS unallocated_gpu_hours,
       coalesce(s.share_gpu_us, 0) / 3.6e9 AS allocation_gpu_hours
FROM keys k LEFT JOIN run r USING (budget, hour_us) LEFT JOIN team_hour_share s USING (budget, hour_us)
ORDER BY k.budget, k.hour_us;
