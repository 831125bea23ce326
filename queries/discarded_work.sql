-- discarded_work.sql: how much work did preemption throw away?
-- Per preemption: GPUs x (time since the last checkpoint in that run, or since its start) plus
-- GPUs x restart time. The log has no resume marker, so restart time is the submission's
-- restart_s, counted when the workload started again after the preemption (else 0).
-- Reported: preemptions per workload-week (weeks of running time), discarded GPU-hours and their
-- share of delivered GPU-hours, median restart time, split allocated / unallocated and by team;
-- eviction_ratio = GPUs preempted / GPUs of the workloads those preemptions let start.

CREATE OR REPLACE TEMP TABLE discarded_rows AS
SELECT x.wid, b.path AS budget, x.allocated, x.gpus, x.end_seq, x.preempt_us, x.next_start_us, x.restart_s,
       x.lost_us, x.restart_us, CASE WHEN x.allocated THEN 'allocated' ELSE 'unallocated' END AS tier,
       x.gpus * (x.lost_us + x.restart_us) AS discarded_gpu_us
FROM preempt_iv x JOIN budgets b USING (bid), params p
WHERE x.preempt_us >= p.t0 AND x.preempt_us < p.pt1;

CREATE OR REPLACE TEMP TABLE run_totals AS
SELECT b.path AS budget, CASE WHEN r.allocated THEN 'allocated' ELSE 'unallocated' END AS tier,
       r.delivered_gpu_us, r.run_us
FROM (SELECT bid, allocated, sum(gpus * (hi_us - lo_us)) AS delivered_gpu_us, sum(hi_us - lo_us) AS run_us
      FROM run_c WHERE hi_us > lo_us GROUP BY ALL) r
JOIN budgets b USING (bid);

-- One summary row per (group, key): overall, per tier, per team.
CREATE OR REPLACE TEMP TABLE discarded_summary AS
WITH keyed AS (
    SELECT 'all' AS grp, 'all' AS key, * FROM discarded_rows
    UNION ALL SELECT 'tier', tier, * FROM discarded_rows
    UNION ALL SELECT 'team', budget, * FROM discarded_rows
), totals AS (
    SELECT 'all' AS grp, 'all' AS key, sum(delivered_gpu_us) AS delivered_gpu_us, sum(run_us) AS run_us
    FROM run_totals
    UNION ALL SELECT 'tier', tier, sum(delivered_gpu_us), sum(run_us) FROM run_totals GROUP BY tier
    UNION ALL SELECT 'team', budget, sum(delivered_gpu_us), sum(run_us) FROM run_totals GROUP BY budget
    UNION ALL SELECT 'tier', t, 0, 0 FROM (VALUES ('allocated'), ('unallocated')) v(t)
), agg AS (
    SELECT grp, key, count(*) AS preemptions, sum(discarded_gpu_us) AS discarded_gpu_us,
           sum(gpus * lost_us) AS lost_gpu_us, sum(gpus * restart_us) AS restart_gpu_us,
           quantile_cont(restart_s::DOUBLE, 0.5) FILTER (WHERE next_start_us IS NOT NULL) AS median_restart_s
    FROM keyed GROUP BY ALL
), tot AS (
    SELECT grp, key, sum(delivered_gpu_us) AS delivered_gpu_us, sum(run_us) AS run_us FROM totals GROUP BY ALL
)
SELECT grp, key, coalesce(a.preemptions, 0) AS preemptions,
       coalesce(a.discarded_gpu_us, 0) / 3.6e9 AS discarded_gpu_hours,
       coalesce(a.lost_gpu_us, 0) / 3.6e9 AS lost_since_checkpoint_gpu_hours,
       coalesce(a.restart_gpu_us, 0) / 3.6e9 AS restart_gpu_hours,
       coalesce(t.delivered_gpu_us, 0) / 3.6e9 AS delivered_gpu_hours,
       CASE WHEN t.delivered_gpu_us > 0 THEN coalesce(a.discarded_gpu_us, 0) / t.delivered_gpu_us END
           AS discarded_share,
       a.median_restart_s,
       coalesce(t.run_us, 0) / 6.048e11 AS workload_weeks,
       CASE WHEN t.run_us > 0 THEN coalesce(a.preemptions, 0) / (t.run_us / 6.048e11) END
           AS preemptions_per_workload_week
FROM tot t FULL JOIN agg a USING (grp, key)
ORDER BY grp, key;

-- Eviction ratio: victims' GPUs over the GPUs of each beneficiary start they made room for
-- (the beneficiary's first start at or after the preemption; counted once per such start).
CREATE OR REPLACE TEMP TABLE eviction AS
WITH named AS (
    SELECT d.end_seq, d.gpus, d.preempt_us, w.wid AS by_wid, w.gpus AS by_gpus
    FROM discarded_rows d JOIN ev_preempted e ON e.seq = d.end_seq
    JOIN workload_keys w ON w.workload_id = e.preempted_by
), started AS (
    SELECT n.end_seq, min(r.start_us) AS by_start_us
    FROM named n JOIN run_iv r ON r.wid = n.by_wid AND r.start_us >= n.preempt_us
    GROUP BY n.end_seq
), beneficiaries AS (
    SELECT DISTINCT n.by_wid, s.by_start_us, n.by_gpus FROM named n LEFT JOIN started s USING (end_seq)
)
SELECT (SELECT coalesce(sum(gpus), 0) FROM named) AS gpus_preempted,
       (SELECT coalesce(sum(by_gpus), 0) FROM beneficiaries) AS gpus_started,
       (SELECT count(*) FROM beneficiaries) AS beneficiary_starts;
