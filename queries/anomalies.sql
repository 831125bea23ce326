-- anomalies.sql: records the audits cannot take at face value, each with the reason and
-- whether the figures include it. Nothing here stops an audit.

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
    SELECT 'overlapping_runs', event_id, workload_id, "time", seq,
           'workload ' || workload_id || ' started again while its run was still open', false,
           'this start is left out; the open run continues'
    FROM life WHERE kind = 'start' AND prev_kind = 'start'

    UNION ALL
    SELECT 'overlapping_runs', start_event_id, workload_id, start_us, start_seq,
           'workload ' || workload_id || ' started before its earlier run ended', false,
           'this run is left out of every figure'
    FROM runs_checked WHERE earlier_end_us IS NOT NULL AND start_us < earlier_end_us

    UNION ALL
    SELECT 'completion_before_start',
           CASE WHEN end_us < start_us THEN end_event_id ELSE start_event_id END, workload_id,
           CASE WHEN end_us < start_us THEN end_us ELSE start_us END,
           CASE WHEN end_us < start_us THEN end_seq ELSE start_seq END,
           CASE WHEN end_us < start_us
                THEN 'workload ' || workload_id || ' ' || (CASE end_kind WHEN 'complete' THEN 'completed' ELSE 'was preempted' END)
                     || ' before the start it would end'
                ELSE 'workload ' || workload_id || ' started after it had completed' END,
           false, 'this run is left out of every figure'
    FROM ordered_runs WHERE problem = 'completion_before_start'

    UNION ALL
    SELECT 'preempted_while_not_running', event_id, workload_id, "time", seq,
           'workload ' || workload_id || ' preempted with no run open', false, 'left out of every figure'
    FROM loose_ends WHERE kind = 'preempt'

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
