-- derive.sql: the facts every audit shares, recounted from the raw event tables (ev_*).
-- Needs table params(t0, t1, pt1, window_us): the audit period [t0, t1) in microseconds;
-- point events (preemptions, starts) count when t0 <= time < pt1 (pt1 = t1 + 1 when the
-- period ends at the log's last event, so that event is inside).
--
-- Pairing rule (per workload, in log order): a WorkloadStarted opens a run; the next
-- WorkloadPreempted or WorkloadCompleted closes it. A start while a run is open, an end
-- earlier than its start, a start after the workload completed, or a run that begins
-- before an earlier run of the same workload ended is an anomaly and left out of figures.

-- ISO 8601 UTC text of integer microseconds, as audit.json prints times.
CREATE OR REPLACE TEMP MACRO iso(us) AS
    CASE WHEN us % 1000000 = 0 THEN strftime(make_timestamp(us), '%Y-%m-%dT%H:%M:%SZ')
         ELSE strftime(make_timestamp(us), '%Y-%m-%dT%H:%M:%S.%fZ') END;

-- Workloads: the first submission of each id wins; later ones are anomalies.
CREATE OR REPLACE TEMP TABLE workloads AS
SELECT workload_id, budget, "user", gpus, min_runtime_s, resumable, priority, kind,
       coalesce(restart_s, 0) AS restart_s, "time" AS submit_us, seq, event_id
FROM ev_submitted
SEMI JOIN (SELECT min(seq) AS seq FROM ev_submitted GROUP BY workload_id) USING (seq);

-- Lifecycle events of known workloads in log order, each with its neighbours (one window pass).
CREATE OR REPLACE TEMP TABLE life AS
WITH ev AS (
    SELECT seq, event_id, workload_id, "time", 'start' AS kind, gpus, allocated, protected_until, attempt,
           NULL::VARCHAR AS reason, NULL::VARCHAR AS preempted_by, NULL::VARCHAR AS outcome
    FROM ev_started
    UNION ALL
    SELECT seq, event_id, workload_id, "time", 'preempt', NULL, NULL, NULL, NULL, reason, preempted_by, NULL
    FROM ev_preempted
    UNION ALL
    SELECT seq, event_id, workload_id, "time", 'complete', NULL, NULL, NULL, NULL, NULL, NULL, outcome
    FROM ev_completed
)
SELECT ev.*, lag(kind) OVER w AS prev_kind, lead(kind) OVER w AS next_kind, lead(seq) OVER w AS next_seq,
       lead(event_id) OVER w AS next_event_id, lead("time") OVER w AS next_us, lead(reason) OVER w AS next_reason,
       lead(preempted_by) OVER w AS next_by, lead(outcome) OVER w AS next_outcome
FROM ev SEMI JOIN workloads USING (workload_id)
WINDOW w AS (PARTITION BY workload_id ORDER BY seq);

-- A start opens a run unless a run is already open (the row before it is a start); the first
-- end event after an opening start closes it. An end with no run open is "loose".
CREATE OR REPLACE TEMP TABLE cand_runs AS
WITH openers AS (
    SELECT * FROM life WHERE kind = 'start' AND prev_kind IS DISTINCT FROM 'start'
), closers AS (
    SELECT workload_id, seq, event_id, "time", kind, reason, preempted_by, outcome
    FROM life WHERE kind <> 'start' AND prev_kind = 'start'
), late_closed AS (  -- rare: starts came in between; find the first end after the opener
    SELECT o.seq AS start_seq, arg_min(c.seq, c.seq) AS end_seq, arg_min(c.event_id, c.seq) AS end_event_id,
           arg_min(c."time", c.seq) AS end_us, arg_min(c.kind, c.seq) AS end_kind,
           arg_min(c.reason, c.seq) AS reason, arg_min(c.preempted_by, c.seq) AS preempted_by,
           arg_min(c.outcome, c.seq) AS outcome
    FROM openers o JOIN closers c ON c.workload_id = o.workload_id AND c.seq > o.seq
    WHERE o.next_kind = 'start'
    GROUP BY o.seq
)
SELECT o.workload_id, o.seq AS start_seq, o.event_id AS start_event_id, o."time" AS start_us, o.gpus,
       o.allocated, o.protected_until, o.attempt,
       o.next_seq AS end_seq, o.next_event_id AS end_event_id, o.next_us AS end_us, o.next_kind AS end_kind,
       o.next_reason AS reason, o.next_by AS preempted_by, o.next_outcome AS outcome
FROM openers o WHERE o.next_kind IS DISTINCT FROM 'start'
UNION ALL
SELECT o.workload_id, o.seq, o.event_id, o."time", o.gpus, o.allocated, o.protected_until, o.attempt,
       l.end_seq, l.end_event_id, l.end_us, l.end_kind, l.reason, l.preempted_by, l.outcome
FROM openers o LEFT JOIN late_closed l ON l.start_seq = o.seq
WHERE o.next_kind = 'start';

-- End events with no run open: a completion there ends a waiting workload (fine);
-- a preemption there is an anomaly.
CREATE OR REPLACE TEMP TABLE loose_ends AS
SELECT * FROM life WHERE kind <> 'start' AND prev_kind IS DISTINCT FROM 'start';

-- The completion that ends each workload: the first in log order not paired with a later start.
CREATE OR REPLACE TEMP TABLE terminal AS
SELECT workload_id, arg_min(end_us, end_seq) AS end_us, min(end_seq) AS end_seq
FROM (
    SELECT workload_id, end_us, end_seq FROM cand_runs WHERE end_kind = 'complete' AND end_us >= start_us
    UNION ALL
    SELECT workload_id, "time", seq FROM loose_ends WHERE kind = 'complete'
)
GROUP BY workload_id;

CREATE OR REPLACE TEMP TABLE ordered_runs AS
SELECT c.*,
       CASE
           WHEN c.end_us < c.start_us THEN 'completion_before_start'
           WHEN t.end_seq < c.start_seq THEN 'completion_before_start'
       END AS problem,
       t.end_us AS terminal_us
FROM cand_runs c LEFT JOIN terminal t USING (workload_id);

-- Runs kept after the order checks; a run that begins before an earlier kept run ended overlaps it.
CREATE OR REPLACE TEMP TABLE runs_checked AS
SELECT *,
       max(end_us) OVER (PARTITION BY workload_id ORDER BY start_seq
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_end_us
FROM ordered_runs WHERE problem IS NULL;

-- Valid runs, with the workload's budget and the end used for accounting (open runs end at t1).
-- (Hosts stay in ev_started; join on start_seq = seq when needed.)
CREATE OR REPLACE TEMP TABLE runs AS
SELECT r.workload_id, w.budget, w.kind, w.min_runtime_s, w.restart_s,
       r.start_seq, r.start_event_id, r.start_us, r.end_seq, r.end_event_id, r.end_us, r.end_kind,
       r.gpus, r.allocated, r.protected_until, r.attempt, r.reason, r.preempted_by, r.outcome,
       row_number() OVER (PARTITION BY r.workload_id ORDER BY r.start_seq) AS run_no,
       lead(r.start_us) OVER (PARTITION BY r.workload_id ORDER BY r.start_seq) AS next_start_us,
       greatest(r.start_us, p.t0) AS lo_us,
       least(coalesce(r.end_us, p.t1), p.t1) AS hi_us
FROM runs_checked r JOIN workloads w USING (workload_id), params p
WHERE r.earlier_end_us IS NULL OR r.start_us >= r.earlier_end_us;

-- Preemptions that ended a valid run, with the work they threw away (GPU-microseconds).
CREATE OR REPLACE TEMP TABLE preemptions AS
SELECT r.workload_id, r.budget, r.allocated, r.gpus, r.reason, r.preempted_by, r.end_event_id AS event_id,
       r.start_us, r.end_us AS preempt_us, r.next_start_us, r.restart_s,
       greatest(0, r.end_us - greatest(r.start_us, coalesce(c.last_ckpt_us, r.start_us))) AS lost_us,
       CASE WHEN r.next_start_us IS NULL THEN 0 ELSE r.restart_s * 1000000 END AS restart_us
FROM runs r
LEFT JOIN (
    SELECT r2.workload_id, r2.start_seq, max(k."time") AS last_ckpt_us
    FROM runs r2 JOIN ev_checkpoint k
      ON k.workload_id = r2.workload_id AND k.seq > r2.start_seq AND k.seq < r2.end_seq
    WHERE r2.end_kind = 'preempt'
    GROUP BY ALL
) c USING (workload_id, start_seq)
WHERE r.end_kind = 'preempt';

-- Every submitted workload with its first start, end, and preemption count.
CREATE OR REPLACE TEMP TABLE workload_facts AS
SELECT w.*, f.first_start_us, t.end_us, coalesce(p.n, 0) AS preemptions
FROM workloads w
LEFT JOIN (SELECT workload_id, min(start_us) AS first_start_us FROM runs GROUP BY ALL) f USING (workload_id)
LEFT JOIN terminal t USING (workload_id)
LEFT JOIN (SELECT workload_id, count(*) AS n FROM preemptions GROUP BY ALL) p USING (workload_id);

-- Budget tree. A node exists from its first definition; its parent is the one that definition names.
CREATE OR REPLACE TEMP TABLE nodes AS
SELECT path, arg_min(parent, seq) AS parent, min("time") AS defined_us, min(seq) AS defined_seq
FROM ev_node GROUP BY path;

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

-- Ancestors of each node (itself included) by parent links; `complete` is false when a link is missing.
CREATE OR REPLACE TEMP TABLE ancestry AS
WITH RECURSIVE up(path, anc, depth, next_parent) AS (
    SELECT path, path, 0, parent FROM nodes
    UNION ALL
    SELECT up.path, n.path, up.depth + 1, n.parent
    FROM up JOIN nodes n ON n.path = up.next_parent
    WHERE up.depth < 64
)
SELECT up.path, up.anc, up.depth FROM up;

CREATE OR REPLACE TEMP TABLE broken_paths AS
SELECT DISTINCT u.path
FROM (SELECT path, arg_max(anc, depth) AS top FROM ancestry GROUP BY path) u
JOIN nodes n ON n.path = u.top
WHERE n.parent IS NOT NULL;

-- Teams: leaves of the tree, plus any defined node that funds workloads directly.
CREATE OR REPLACE TEMP TABLE teams AS
SELECT path AS budget FROM nodes n
WHERE NOT EXISTS (SELECT 1 FROM nodes c WHERE c.parent = n.path)
   OR EXISTS (SELECT 1 FROM workloads w WHERE w.budget = n.path);

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

-- Each node's normalised share among its siblings in each segment, then a team's fraction of
-- the cluster: the product of normalised shares from the root down (0 if any link is missing).
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
CROSS JOIN teams t
JOIN ancestry a ON a.path = t.budget
LEFT JOIN segment_norm sn ON sn.s = g.s AND sn.path = a.anc
GROUP BY g.s, t.budget;

-- Hour grid of the period: each whole UTC hour with the part of it inside [t0, t1).
CREATE OR REPLACE TEMP TABLE hours AS
SELECT hour_us, min(s) AS lo_us, max(e) AS hi_us FROM segments GROUP BY hour_us;

-- Team allocation per hour: its fraction of the available GPU-microseconds.
CREATE OR REPLACE TEMP TABLE team_hour_share AS
SELECT f.budget, g.hour_us, sum(f.fraction * a.avail_gpus * a.len_us) AS share_gpu_us
FROM team_fraction f JOIN segments g USING (s) JOIN segment_avail a USING (s)
GROUP BY ALL;

-- Run pieces cut at hour boundaries (clipped to the period).
CREATE OR REPLACE TEMP TABLE run_hours AS
WITH pieces AS (
    SELECT workload_id, budget, allocated, gpus, lo_us, hi_us,
           unnest(range((lo_us // 3600000000) * 3600000000, hi_us, 3600000000)) AS hour_us
    FROM runs WHERE hi_us > lo_us
)
SELECT workload_id, budget, allocated, gpus, hour_us,
       gpus * (least(hi_us, hour_us + 3600000000) - greatest(lo_us, hour_us)) AS gpu_us
FROM pieces;
