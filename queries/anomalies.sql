-- anomalies.sql: records the audits cannot take at face value, each with the reason and
-- whether the figures include it. Nothing here stops an audit. Built at load, after intervals.sql
-- (the pairing tables life, runs_checked and loose_ends); independent of the audit period.

-- GPUs running at once against the capacity in force: each valid run adds its GPUs at its start and
-- takes them away at its end; what runs from an instant on is the level after every start, end and
-- capacity change at it (a window over peers). One row per capacity version that level exceeds, with
-- the event that first took it over: at that instant the ends come first, then capacity changes,
-- then the starts in log order, and it is the first start past the capacity (or the capacity change
-- itself, when what already ran was more than the new capacity).
CREATE OR REPLACE TEMP TABLE over_capacity AS
WITH cap AS (
    SELECT "time" AS from_us, arg_max(gpus, seq) AS gpus FROM ev_capacity GROUP BY "time"
), steps AS (
    SELECT start_us AS t, gpus AS d, start_seq AS seq FROM run_iv
    UNION ALL SELECT end_us, -gpus, end_seq FROM run_iv WHERE end_us IS NOT NULL
    UNION ALL SELECT "time", 0, seq FROM ev_capacity
), level AS (
    SELECT t, sum(d) OVER (ORDER BY t) AS level, lead(t) OVER (ORDER BY t) AS next_t FROM steps
), over AS (
    SELECT c.from_us, any_value(c.gpus) AS cap, max(l.level) AS peak, min(l.t) AS first_us,
           sum(coalesce(l.next_t, l.t) - l.t) AS over_us
    FROM level l ASOF JOIN cap c ON c.from_us <= l.t
    WHERE l.level > c.gpus
    GROUP BY c.from_us
), at_first AS (
    SELECT o.from_us, o.cap, s.d, s.seq,
           (SELECT coalesce(sum(d), 0) FROM steps p WHERE p.t < o.first_us)
           + sum(s.d) OVER (PARTITION BY o.from_us ORDER BY sign(s.d), s.seq
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running
    FROM over o JOIN steps s ON s.t = o.first_us
)
SELECT o.from_us, o.cap, o.peak, o.first_us, o.over_us,
       (SELECT arg_min(a.seq, (sign(a.d), a.seq)) FROM at_first a
        WHERE a.from_us = o.from_us AND a.d >= 0 AND a.running > o.cap) AS first_seq
FROM over o;

CREATE OR REPLACE TEMP TABLE anomalies AS
SELECT * FROM (
    SELECT 'unknown_workload' AS kind, e.event_id, e.workload_id, e."time" AS time_us, e.seq,
           e.type || ' for workload ' || e.workload_id || ', which was never submitted' AS reason,
           false AS included, 'left out of every figure' AS effect
    FROM (
        SELECT 'WorkloadStarted' AS type, event_id, workload_id, "time", seq FROM ev_started
        UNION ALL SELECT 'CheckpointWritten', event_id, workload_id, "time", seq FROM ev_checkpoint
        UNION ALL SELECT 'WorkloadPreempted', event_id, workload_id, "time", seq FROM ev_preempted
        UNION ALL SELECT 'WorkloadRequeued', event_id, workload_id, "time", seq FROM ev_requeued
        UNION ALL SELECT 'WorkloadCompleted', event_id, workload_id, "time", seq FROM ev_completed
    ) e ANTI JOIN workloads w USING (workload_id)

    UNION ALL
    SELECT 'duplicate_submission', s.event_id, s.workload_id, s."time", s.seq,
           'workload ' || s.workload_id || ' submitted again (first submission is ' || w.event_id || ')',
           false, 'the first submission is used'
    FROM ev_submitted s JOIN workloads w USING (workload_id) WHERE s.seq <> w.seq

    UNION ALL
    SELECT 'overlapping_runs', s.event_id, s.workload_id, s."time", s.seq,
           'workload ' || s.workload_id || ' started again while its run was still open', false,
           'this start is left out; the open run continues'
    FROM life l JOIN ev_started s USING (seq) WHERE l.k = 0 AND l.prev_k = 0

    UNION ALL
    SELECT 'overlapping_runs', s.event_id, s.workload_id, r.start_us, r.start_seq,
           'workload ' || s.workload_id || ' started before its earlier run ended', false,
           'this run is left out of every figure'
    FROM runs_checked r JOIN ev_started s ON s.seq = r.start_seq
    WHERE NOT r.misordered AND r.earlier_end_us IS NOT NULL AND r.start_us < r.earlier_end_us

    UNION ALL
    SELECT 'completion_before_start',
           CASE WHEN r.end_us < r.start_us THEN e.event_id ELSE s.event_id END, s.workload_id,
           CASE WHEN r.end_us < r.start_us THEN r.end_us ELSE r.start_us END,
           CASE WHEN r.end_us < r.start_us THEN r.end_seq ELSE r.start_seq END,
           CASE WHEN r.end_us < r.start_us
                THEN 'workload ' || s.workload_id || ' ' || (CASE r.end_k WHEN 2 THEN 'completed' ELSE 'was preempted' END)
                     || ' before the start it would end'
                ELSE 'workload ' || s.workload_id || ' started after it had completed' END,
           false, 'this run is left out of every figure'
    FROM runs_checked r JOIN ev_started s ON s.seq = r.start_seq
    LEFT JOIN (SELECT seq, event_id FROM ev_preempted UNION ALL SELECT seq, event_id FROM ev_completed) e
           ON e.seq = r.end_seq
    WHERE r.misordered

    UNION ALL
    SELECT 'preempted_while_not_running', e.event_id, e.workload_id, e."time", e.seq,
           'workload ' || e.workload_id || ' preempted with no run open', false, 'left out of every figure'
    FROM loose_ends l JOIN ev_preempted e USING (seq) WHERE l.k = 1

    UNION ALL
    SELECT 'undefined_budget', w.event_id, w.workload_id, w.submit_us, w.seq,
           'budget path ' || w.budget || CASE WHEN w.budget IN (SELECT path FROM nodes)
               THEN ' has an ancestor that was never defined' ELSE ' was never defined' END,
           true, 'counted in occupancy, waits and discarded work; left out of owed hours (no share)'
    FROM workloads w
    WHERE w.budget NOT IN (SELECT path FROM nodes) OR w.budget IN (SELECT path FROM broken_paths)

    UNION ALL
    SELECT 'undefined_budget', a.event_id, NULL, a."time", a.seq,
           'allocation change for budget path ' || a.path || ', not defined at that time', false,
           'the change is not applied'
    FROM ev_allocation a LEFT JOIN nodes n USING (path)
    WHERE n.path IS NULL OR a."time" < n.defined_us

    UNION ALL
    SELECT 'over_capacity', coalesce(s.event_id, c.event_id), s.workload_id, o.first_us, o.first_seq,
           'the records ran up to ' || o.peak || ' GPUs at once, more than the ' || o.cap
           || ' GPUs of the cluster''s capacity (over it for ' || round(o.over_us / 3.6e9, 1) || ' h in all, first '
           || CASE WHEN s.workload_id IS NULL THEN 'when the capacity became ' || o.cap
                   ELSE 'when workload ' || s.workload_id || ' started' END
           || '): the capacity the log states is less than what ran',
           true, 'counted as run: occupancy goes above 100% and owed hours are shares of the smaller capacity'
    FROM over_capacity o
    LEFT JOIN ev_started s ON s.seq = o.first_seq
    LEFT JOIN ev_capacity c ON c.seq = o.first_seq
)
ORDER BY seq;
