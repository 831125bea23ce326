-- anomalies.sql: records the audits cannot take at face value, each with the reason and
-- whether the figures include it. Nothing here stops an audit. Built at load, after intervals.sql
-- (the pairing tables life, runs_checked and loose_ends); independent of the audit period.

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
)
ORDER BY seq;
