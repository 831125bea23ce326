-- derive.sql: the period's facts every audit shares, from the projection's compact tables
-- (intervals.sql: workloads, run_iv, preempt_iv, workload_iv, budgets, teams) and the raw ev_* tables.
-- Needs table params(t0, t1, pt1, window_us): the audit period [t0, t1) in microseconds;
-- point events (preemptions, starts) count when t0 <= time < pt1 (pt1 = t1 + 1 when the
-- period ends at the log's last event, so that event is inside).

-- ISO 8601 UTC text of integer microseconds, as audit.json prints times.
CREATE OR REPLACE TEMP MACRO iso(us) AS
    CASE WHEN us % 1000000 = 0 THEN strftime(make_timestamp(us), '%Y-%m-%dT%H:%M:%SZ')
         ELSE strftime(make_timestamp(us), '%Y-%m-%dT%H:%M:%S.%fZ') END;

-- Valid runs clipped to the period (open runs end at t1): the compact view the audits read.
CREATE OR REPLACE TEMP VIEW run_c AS
SELECT r.wid, r.bid, r.gpus, r.allocated, r.start_seq, r.start_us, r.end_us, r.protect_us,
       greatest(r.start_us, p.t0) AS lo_us, least(coalesce(r.end_us, p.t1), p.t1) AS hi_us
FROM run_iv r, params p;

-- Readable views of the same facts (text ids and every field), for explain and the workload list.
CREATE OR REPLACE TEMP VIEW runs AS
SELECT w.workload_id, w.budget, w.kind, w.min_runtime_s, w.restart_s,
       r.start_seq, s.event_id AS start_event_id, r.start_us, r.end_seq, e.event_id AS end_event_id, r.end_us,
       CASE r.end_k WHEN 1 THEN 'preempt' WHEN 2 THEN 'complete' END AS end_kind,
       r.gpus, r.allocated, s.protected_until, s.attempt, e.reason, e.preempted_by, e.outcome,
       r.run_no, r.next_start_us,
       greatest(r.start_us, p.t0) AS lo_us, least(coalesce(r.end_us, p.t1), p.t1) AS hi_us
FROM run_iv r JOIN workloads w USING (wid) JOIN ev_started s ON s.seq = r.start_seq
LEFT JOIN (
    SELECT seq, event_id, reason, preempted_by, NULL::VARCHAR AS outcome FROM ev_preempted
    UNION ALL SELECT seq, event_id, NULL, NULL, outcome FROM ev_completed
) e ON e.seq = r.end_seq, params p;

CREATE OR REPLACE TEMP VIEW preemptions AS
SELECT w.workload_id, w.budget, x.allocated, x.gpus, e.reason, e.preempted_by, e.event_id,
       x.start_us, x.preempt_us, x.next_start_us, x.restart_s, x.lost_us, x.restart_us
FROM preempt_iv x JOIN workloads w USING (wid) JOIN ev_preempted e ON e.seq = x.end_seq;

CREATE OR REPLACE TEMP VIEW workload_facts AS
SELECT w.*, f.first_start_us, f.end_us, f.preemptions FROM workloads w JOIN workload_iv f USING (wid);

-- Share versions: definitions and allocation changes of a defined node, from their time on.
CREATE OR REPLACE TEMP TABLE share_versions AS
SELECT path, "time" AS from_us, arg_max(share, seq) AS share
FROM (
    SELECT path, "time", seq, share FROM ev_node
    UNION ALL
    SELECT a.path, a."time", a.seq, a.share FROM ev_allocation a JOIN nodes n USING (path)
    WHERE a."time" >= n.defined_us
)
GROUP BY path, "time";

-- Timeline segments: the period cut at every whole UTC hour and every capacity, health or share change.
CREATE OR REPLACE TEMP TABLE segments AS
WITH breaks AS (
    SELECT t0 AS b FROM params
    UNION SELECT t1 FROM params
    UNION SELECT unnest(range((t0 // 3600000000 + 1) * 3600000000, t1, 3600000000)) FROM params
    UNION SELECT "time" FROM ev_capacity
    UNION SELECT "time" FROM ev_health
    UNION SELECT from_us FROM share_versions
), cut AS (
    SELECT b AS s, lead(b) OVER (ORDER BY b) AS e
    FROM breaks, params WHERE b >= t0 AND b <= t1
)
SELECT s, e, e - s AS len_us, (s // 3600000000) * 3600000000 AS hour_us FROM cut WHERE e IS NOT NULL AND e > s;

-- Capacity versions (last event wins at equal times) and the hosts each version has.
CREATE OR REPLACE TEMP TABLE capacity_versions AS
SELECT "time" AS from_us, arg_max(gpus, seq) AS gpus, arg_max(gpus_per_node, seq) AS gpn,
       arg_max(cluster, seq) AS cluster
FROM ev_capacity GROUP BY "time";

CREATE OR REPLACE TEMP TABLE segment_capacity AS
SELECT g.s, coalesce(c.gpus, 0) AS gpus, c.gpn, c.cluster
FROM segments g ASOF LEFT JOIN capacity_versions c ON c.from_us <= g.s;

CREATE OR REPLACE TEMP TABLE health_versions AS
SELECT host, "time" AS from_us, arg_max(state, seq) AS state FROM ev_health GROUP BY host, "time";

-- Hosts down (unhealthy or failed) in each segment, with their GPU count: down spells per host,
-- cut to the capacity versions under which the host exists (hosts are <cluster>-n000, -n001, ...).
CREATE OR REPLACE TEMP TABLE segment_down_hosts AS
WITH spells AS (
    SELECT host, from_us, coalesce(lead(from_us) OVER (PARTITION BY host ORDER BY from_us), 9223372036854775807) AS to_us,
           state
    FROM health_versions
), down AS (
    SELECT * FROM spells WHERE state IN ('unhealthy', 'failed')
), versions AS (
    SELECT *, coalesce(lead(from_us) OVER (ORDER BY from_us), 9223372036854775807) AS to_us FROM capacity_versions
), idx AS (
    SELECT v.*, unnest(range(0, (v.gpus + v.gpn - 1) // v.gpn)) AS i
    FROM versions v WHERE v.gpus > 0 AND EXISTS (SELECT 1 FROM down)
), hosts AS (
    SELECT from_us, to_us, printf('%s-n%03d', cluster, i) AS host, least(gpn, gpus - i * gpn) AS host_gpus FROM idx
), pieces AS (
    SELECT d.host, h.host_gpus, greatest(d.from_us, h.from_us) AS lo, least(d.to_us, h.to_us) AS hi
    FROM down d JOIN hosts h ON h.host = d.host
    WHERE d.from_us < h.to_us AND h.from_us < d.to_us
)
SELECT g.s, p.host, p.host_gpus
FROM segments g JOIN pieces p ON g.s >= p.lo AND g.s < p.hi;

CREATE OR REPLACE TEMP TABLE segment_avail AS
SELECT g.s, g.e, g.len_us, g.hour_us, sc.gpus AS cap_gpus, coalesce(d.down_gpus, 0) AS down_gpus,
       sc.gpus - coalesce(d.down_gpus, 0) AS avail_gpus
FROM segments g
JOIN segment_capacity sc USING (s)
LEFT JOIN (SELECT s, sum(host_gpus) AS down_gpus FROM segment_down_hosts GROUP BY s) d USING (s);

-- Each node's normalised share among its siblings in each segment, then every node's fraction of
-- the cluster: the product of normalised shares from the root down (0 if any link is missing).
-- (Named for the teams, whose rows the audits mostly read; owed_levels.sql reads the other nodes'.)
CREATE OR REPLACE TEMP TABLE segment_norm AS
WITH live AS (
    SELECT g.s, n.path, n.parent, v.share
    FROM segments g JOIN nodes n ON n.defined_us <= g.s
    ASOF JOIN share_versions v ON v.path = n.path AND v.from_us <= g.s
)
SELECT s, path,
       CASE WHEN sum(share) OVER (PARTITION BY s, parent) > 0
            THEN share / sum(share) OVER (PARTITION BY s, parent) ELSE 0 END AS norm
FROM live;

CREATE OR REPLACE TEMP TABLE team_fraction AS
SELECT g.s, t.budget,
       CASE WHEN t.budget IN (SELECT path FROM broken_paths) THEN 0.0
            WHEN count(sn.path) < count(*) THEN 0.0
            ELSE product(coalesce(sn.norm, 0)) END AS fraction
FROM segments g
CROSS JOIN (SELECT path AS budget FROM nodes) t
JOIN ancestry a ON a.path = t.budget
LEFT JOIN segment_norm sn ON sn.s = g.s AND sn.path = a.anc
GROUP BY g.s, t.budget;

-- Hour grid of the period: each whole UTC hour with the part of it inside [t0, t1).
CREATE OR REPLACE TEMP TABLE hours AS
SELECT hour_us, min(s) AS lo_us, max(e) AS hi_us FROM segments GROUP BY hour_us;

-- Node (team) allocation per hour: its fraction of the available GPU-microseconds.
CREATE OR REPLACE TEMP TABLE team_hour_share AS
SELECT f.budget, g.hour_us, sum(f.fraction * a.avail_gpus * a.len_us) AS share_gpu_us
FROM team_fraction f JOIN segments g USING (s) JOIN segment_avail a USING (s)
GROUP BY ALL;

-- GPU-microseconds per budget path, tier and hour, of (src 0) the valid runs and (src 1) the demand of
-- allocated workloads (min_runtime_s > 0) from submission (or t0) to completion (or t1), waiting or
-- running. An interval from hour ha to hour hb adds its partial first and last hours directly and its
-- whole hours in between as a step (+gpus from hour ha + 1, -gpus from hour hb), summed up hour by
-- hour afterwards: linear in intervals, whatever their length. Intervals that lie inside the
-- period's first and last hours are taken pre-summed by (key, ha, hb) from the load (hour_iv_sums);
-- those the period cuts, and open ones, are clipped one by one.
CREATE OR REPLACE TEMP TABLE hour_split AS
WITH b AS (
    SELECT t0, t1, t0 // 3600000000 AS h0, (t1 - 1) // 3600000000 AS h1 FROM params
), clipped AS (
    SELECT i.key, i.gpus, greatest(i.lo_us, b.t0) AS lo_us, least(coalesce(i.hi_us, b.t1), b.t1) AS hi_us
    FROM hour_iv i, b
    WHERE (i.hi_us IS NULL OR i.hi_us <= i.lo_us OR i.ha <= b.h0 OR i.hb >= b.h1)
      AND i.lo_us < b.t1 AND (i.hi_us IS NULL OR i.hi_us > b.t0)
), groups AS (
    SELECT s.key, s.ha, s.hb, s.g, s.gin, s.gout FROM hour_iv_sums s, b WHERE s.ha > b.h0 AND s.hb < b.h1
    UNION ALL
    SELECT key, lo_us // 3600000000 AS ha, (hi_us - 1) // 3600000000 AS hb, gpus,
           gpus * (lo_us - (lo_us // 3600000000) * 3600000000),
           gpus * (hi_us - ((hi_us - 1) // 3600000000) * 3600000000)
    FROM clipped WHERE hi_us > lo_us
), parts AS (  -- by first hour: the first (or only) piece, and the step up from the next hour on
    SELECT key, ha AS h, sum(CASE WHEN hb = ha THEN gout - gin ELSE 3600000000 * g - gin END) AS direct,
           coalesce(sum(g) FILTER (WHERE hb > ha + 1), 0)::BIGINT AS up, 0::BIGINT AS down
    FROM groups GROUP BY ALL
    UNION ALL  -- by last hour: the last piece, and the step down from it
    SELECT key, hb, sum(gout), 0, coalesce(sum(g) FILTER (WHERE hb > ha + 1), 0)::BIGINT
    FROM groups WHERE hb > ha GROUP BY ALL
), agg AS (
    SELECT key, h, sum(direct) AS direct, sum(up)::BIGINT AS up, sum(down)::BIGINT AS down FROM parts GROUP BY ALL
), grid AS (
    SELECT k.key, h.hour_us // 3600000000 AS h, coalesce(a.direct, 0) AS direct,
           coalesce(a.up, 0) AS up, coalesce(a.down, 0) AS down
    FROM (SELECT DISTINCT key FROM agg) k CROSS JOIN hours h
    LEFT JOIN agg a ON a.key = k.key AND a.h = h.hour_us // 3600000000
), summed AS (  -- whole hours: steps up count from the next hour, steps down from their own hour
    SELECT key, h,
           direct + 3600000000 * (sum(up - down) OVER (PARTITION BY key ORDER BY h
                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - up) AS gpu_us
    FROM grid
)
SELECT (s.key % 4) // 2 AS src, b.path AS budget, s.key % 2 = 1 AS allocated, s.h * 3600000000 AS hour_us, s.gpu_us
FROM summed s JOIN budgets b ON b.bid = s.key // 4 WHERE s.gpu_us > 0;

-- Run GPU-microseconds per budget, tier and hour (clipped to the period).
CREATE OR REPLACE TEMP TABLE run_hours AS
SELECT budget, allocated, hour_us, gpu_us FROM hour_split WHERE src = 0;
