-- intervals.sql: the projection's compact tables, built once at load from the raw event tables (ev_*).
-- Nothing here depends on the audit period, so every audit reuses them.
--
-- Keys are integers: a workload is keyed by `wid`, the log position (seq) of its first submission;
-- a budget path by `bid`, its row in `budgets`. Joins and window passes run on these, never on text.
--
-- Pairing rule (per workload, in log order): a WorkloadStarted opens a run; the next
-- WorkloadPreempted or WorkloadCompleted closes it. A start while a run is open, an end
-- earlier than its start, a start after the workload completed, or a run that begins
-- before an earlier run of the same workload ended is an anomaly and left out of figures.

-- Workloads: the first submission of each id wins; later ones are anomalies.
CREATE OR REPLACE TEMP TABLE workloads AS
SELECT seq AS wid, workload_id, budget, "user", gpus, min_runtime_s, resumable, priority, kind,
       coalesce(restart_s, 0) AS restart_s, "time" AS submit_us, seq, event_id
FROM ev_submitted
SEMI JOIN (SELECT min(seq) AS seq FROM ev_submitted GROUP BY workload_id) USING (seq);

-- Budget paths named anywhere (defined nodes, funded workloads, allocation changes), one integer each.
CREATE OR REPLACE TEMP TABLE budgets AS
SELECT (row_number() OVER (ORDER BY path) - 1)::INTEGER AS bid, path
FROM (SELECT path FROM ev_node UNION SELECT budget FROM workloads UNION SELECT path FROM ev_allocation);

CREATE OR REPLACE TEMP TABLE workload_keys AS
SELECT w.wid, w.workload_id, b.bid, w.gpus, w.min_runtime_s, w.restart_s, w.submit_us
FROM workloads w JOIN budgets b ON b.path = w.budget;

-- Lifecycle events of known workloads (k: 0 start, 1 preempt, 2 complete), each with its
-- neighbours in log order (one window pass over integer keys; other fields are joined by seq).
CREATE OR REPLACE TEMP TABLE life AS
WITH ev AS (
    SELECT seq, workload_id, "time", 0::UTINYINT AS k FROM ev_started
    UNION ALL SELECT seq, workload_id, "time", 1::UTINYINT FROM ev_preempted
    UNION ALL SELECT seq, workload_id, "time", 2::UTINYINT FROM ev_completed
), keyed AS (
    SELECT w.wid, ev.seq, ev."time", ev.k FROM ev JOIN workload_keys w USING (workload_id)
)
SELECT wid, seq, "time", k, lag(k) OVER w AS prev_k, lead(k) OVER w AS next_k, lead(seq) OVER w AS next_seq,
       lead("time") OVER w AS next_us
FROM keyed
WINDOW w AS (PARTITION BY wid ORDER BY seq);

-- A start opens a run unless a run is already open (the row before it is a start); the first
-- end event after an opening start closes it. An end with no run open is "loose".
CREATE OR REPLACE TEMP TABLE cand_runs AS
WITH openers AS (
    SELECT * FROM life WHERE k = 0 AND prev_k IS DISTINCT FROM 0
), late_closed AS (  -- rare: starts came in between; find the first end after the opener
    SELECT o.seq AS start_seq, min(c.seq) AS end_seq, arg_min(c."time", c.seq) AS end_us,
           arg_min(c.k, c.seq) AS end_k
    FROM openers o JOIN (SELECT * FROM life WHERE k <> 0 AND prev_k = 0) c ON c.wid = o.wid AND c.seq > o.seq
    WHERE o.next_k = 0
    GROUP BY o.seq
)
SELECT o.wid, o.seq AS start_seq, o."time" AS start_us, o.next_seq AS end_seq, o.next_us AS end_us, o.next_k AS end_k
FROM openers o WHERE o.next_k IS DISTINCT FROM 0
UNION ALL
SELECT o.wid, o.seq, o."time", l.end_seq, l.end_us, l.end_k
FROM openers o LEFT JOIN late_closed l ON l.start_seq = o.seq
WHERE o.next_k = 0;

-- End events with no run open: a completion there ends a waiting workload (fine);
-- a preemption there is an anomaly.
CREATE OR REPLACE TEMP TABLE loose_ends AS
SELECT wid, seq, "time", k FROM life WHERE k <> 0 AND prev_k IS DISTINCT FROM 0;

-- The completion that ends each workload: the first in log order not paired with a later start.
CREATE OR REPLACE TEMP TABLE terminal AS
SELECT wid, arg_min(end_us, end_seq) AS end_us, min(end_seq) AS end_seq
FROM (
    SELECT wid, end_us, end_seq FROM cand_runs WHERE end_k = 2 AND end_us >= start_us
    UNION ALL
    SELECT wid, "time", seq FROM loose_ends WHERE k = 2
)
GROUP BY wid;

-- Order checks, then overlap: a run that begins before an earlier ordered run ended overlaps it.
CREATE OR REPLACE TEMP TABLE runs_checked AS
WITH ordered AS (
    SELECT c.*,
           (c.end_us < c.start_us OR t.end_seq < c.start_seq) IS TRUE AS misordered
    FROM cand_runs c LEFT JOIN terminal t USING (wid)
)
SELECT wid, start_seq, start_us, end_seq, end_us, end_k, misordered,
       CASE WHEN NOT misordered THEN
           max(end_us) FILTER (WHERE NOT misordered) OVER (PARTITION BY wid ORDER BY start_seq
                                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
       END AS earlier_end_us
FROM ordered;

-- Valid runs with integer keys: the compact interval table every audit reads (protect_us: how long the
-- run's start protected it).
CREATE OR REPLACE TEMP TABLE run_iv AS
WITH ok AS (
    SELECT wid, start_seq, start_us, end_seq, end_us, end_k FROM runs_checked
    WHERE NOT misordered AND (earlier_end_us IS NULL OR start_us >= earlier_end_us)
)
SELECT ok.wid, w.bid, s.gpus, s.allocated, ok.start_seq, ok.start_us, ok.end_seq, ok.end_us, ok.end_k,
       greatest(0, coalesce(s.protected_until, ok.start_us) - ok.start_us) AS protect_us,
       row_number() OVER (PARTITION BY ok.wid ORDER BY ok.start_seq) AS run_no,
       lead(ok.start_us) OVER (PARTITION BY ok.wid ORDER BY ok.start_seq) AS next_start_us
FROM ok JOIN workload_keys w USING (wid) JOIN ev_started s ON s.seq = ok.start_seq;

-- Runs that may have run on a host while it was marked unhealthy or failed, with their hosts: every
-- valid run that names such a host and had not ended before the first such mark (a superset; the
-- occupancy audit cuts it to the period's down spells), so audits never scan every start's hosts.
CREATE OR REPLACE TEMP TABLE run_down_hosts AS
WITH down AS (
    SELECT list(DISTINCT host) AS hosts, min("time") AS since FROM ev_health WHERE state IN ('unhealthy', 'failed')
)
SELECT r.start_seq, s.nodes
FROM run_iv r JOIN ev_started s ON s.seq = r.start_seq, down d
WHERE d.since IS NOT NULL AND coalesce(r.end_us, 9223372036854775807) > d.since AND list_has_any(s.nodes, d.hosts);

-- Preemptions that ended a valid run, with the work they threw away (GPU-microseconds): since the last
-- checkpoint of that run (only checkpoints of preempted workloads are looked at), or since its start
-- for a workload that cannot resume (its checkpoints save nothing it can start from again).
CREATE OR REPLACE TEMP TABLE preempt_iv AS
WITH p AS (
    SELECT r.*, k.restart_s, w.resumable
    FROM run_iv r JOIN workload_keys k USING (wid) JOIN workloads w USING (wid) WHERE r.end_k = 1
), ck AS (
    SELECT w.wid, c.seq, c."time"
    FROM ev_checkpoint c JOIN (SELECT DISTINCT k.wid, k.workload_id FROM p JOIN workload_keys k USING (wid)) w
      USING (workload_id)
), last_ck AS (
    SELECT p.start_seq, max(ck."time") AS last_ckpt_us
    FROM p JOIN ck ON ck.wid = p.wid AND ck.seq > p.start_seq AND ck.seq < p.end_seq
    GROUP BY p.start_seq
)
SELECT p.wid, p.bid, p.allocated, p.gpus, p.start_seq, p.start_us, p.end_seq, p.end_us AS preempt_us,
       p.next_start_us, p.restart_s,
       greatest(0, p.end_us - CASE WHEN p.resumable THEN greatest(p.start_us, coalesce(l.last_ckpt_us, p.start_us))
                                   ELSE p.start_us END) AS lost_us,
       CASE WHEN p.next_start_us IS NULL THEN 0 ELSE p.restart_s * 1000000 END AS restart_us
FROM p LEFT JOIN last_ck l USING (start_seq);

-- Each workload (integer columns only) with its first valid start, terminal completion and preemptions.
CREATE OR REPLACE TEMP TABLE workload_iv AS
SELECT k.wid, k.bid, k.gpus, k.min_runtime_s, k.restart_s, k.submit_us, f.first_start_us, t.end_us,
       coalesce(p.n, 0) AS preemptions
FROM workload_keys k
LEFT JOIN (SELECT wid, min(start_us) AS first_start_us FROM run_iv GROUP BY wid) f USING (wid)
LEFT JOIN terminal t USING (wid)
LEFT JOIN (SELECT wid, count(*) AS n FROM preempt_iv GROUP BY wid) p USING (wid);

-- Intervals the hour-by-hour sums are made of: valid runs (key = bid * 4 + allocated) and the demand of
-- allocated workloads from submission to completion (key = bid * 4 + 3), with the whole hours (index
-- since the epoch) of their first and last microsecond; end_us is NULL while a run is open or a
-- workload has not ended.
CREATE OR REPLACE TEMP TABLE hour_iv AS
SELECT key, gpus, lo_us, hi_us, lo_us // 3600000000 AS ha, (hi_us - 1) // 3600000000 AS hb
FROM (
    SELECT bid * 4 + allocated::INTEGER AS key, gpus, start_us AS lo_us, end_us AS hi_us FROM run_iv
    UNION ALL
    SELECT bid * 4 + 3, gpus, submit_us, end_us FROM workload_iv WHERE min_runtime_s > 0
);

-- The closed intervals summed by (key, first hour, last hour): GPUs, and GPU-microseconds before the
-- start within the first hour (gin) and up to the end within the last hour (gout). An audit period
-- that does not cut a group's intervals takes its hour pieces from these sums (see derive.sql).
CREATE OR REPLACE TEMP TABLE hour_iv_sums AS
SELECT key, ha, hb, sum(gpus) AS g, sum(gpus * (lo_us - ha * 3600000000)) AS gin,
       sum(gpus * (hi_us - hb * 3600000000)) AS gout
FROM hour_iv WHERE hi_us > lo_us
GROUP BY ALL;

-- Budget tree. A node exists from its first definition; its parent is the one that definition names.
CREATE OR REPLACE TEMP TABLE nodes AS
SELECT path, arg_min(parent, seq) AS parent, min("time") AS defined_us, min(seq) AS defined_seq
FROM ev_node GROUP BY path;

-- Ancestors of each node (itself included) by parent links.
CREATE OR REPLACE TEMP TABLE ancestry AS
WITH RECURSIVE up(path, anc, depth, next_parent) AS (
    SELECT path, path, 0, parent FROM nodes
    UNION ALL
    SELECT up.path, n.path, up.depth + 1, n.parent
    FROM up JOIN nodes n ON n.path = up.next_parent
    WHERE up.depth < 64
)
SELECT up.path, up.anc, up.depth FROM up;

-- Nodes whose chain of parents stops at a node that names a parent never defined.
CREATE OR REPLACE TEMP TABLE broken_paths AS
SELECT DISTINCT u.path
FROM (SELECT path, arg_max(anc, depth) AS top FROM ancestry GROUP BY path) u
JOIN nodes n ON n.path = u.top
WHERE n.parent IS NOT NULL;

-- Teams: leaves of the tree, plus any defined node that funds workloads directly.
CREATE OR REPLACE TEMP TABLE teams AS
SELECT b.bid, n.path AS budget FROM nodes n JOIN budgets b USING (path)
WHERE NOT EXISTS (SELECT 1 FROM nodes c WHERE c.parent = n.path)
   OR EXISTS (SELECT 1 FROM workloads w WHERE w.budget = n.path);
