-- hour_bound.sql: at most how much of its owed hours could any schedule have given each level of the tree,
-- hour by hour, given the gangs (a run needs all its GPUs at once) and the protected windows?
-- Needs owed_levels.sql (level_hours, level_members, tree_levels) and derive.sql (hours, segment_avail,
-- run_hours, run_c). docs/audits.md ("The hourly bound") states the relaxation and proves it.
--
-- The owed hours o(T, h) of this run are taken as given. For a level, hour h and any schedule delivering
-- d(T, h) to its nodes T: received(h) = sum_T min(d, o) = sum_T d - E(h) <= C(h) - E(h), where E(h) = sum_T
-- (d - o)+ is the hour's excess and C(h) what the hour can hold (the capacity up, or what this run's
-- allocated work ran if more: work left on a host being drained). So received(h) <= O(h) - (E(h) - s(h))+
-- with O(h) = sum_T o and slack s(h) = C(h) - O(h).
-- Gangs force excess: while a workload of g GPUs runs, its node T runs at least g GPUs, so in every whole
-- clock hour inside the run T's excess is at least g - peak(T) (peak: T's largest hourly owed of the
-- period); overlapping workloads of one node add up. A workload of protection p (its runs' shortest
-- WorkloadStarted protected_until - start) that this run gave W hours of productive run time (its run time
-- in the period less the work its preemptions discarded and its restart time) in pieces no shorter than p
-- but for k of them (k: how many of its pieces in this run were shorter than their own protection, at
-- least 1) has at least
-- whole_hours(W, p, k) whole clock hours inside its pieces, in any schedule that does the same. The excess
-- can fall in any hour from its submission on and is absorbed by slack; with every window a suffix of the
-- period, Hall's condition makes the part no placement can absorb max over t of (E(submitted >= t) -
-- S(hours >= t))+. Bound = (sum_h O(h) - that) / sum_h O(h).

-- The fewest whole clock hours inside pieces covering w_us of run time, each piece at least p_us long but for
-- at most k of them. A piece of L hours holds at least floor(L) - 1 whole hours (0 below 2 h), which is at
-- least c = floor(p) - 1 for a long piece and more than L - 2 for any: n long pieces give a total of at least
-- max(n * c, a - 2n) with a = floor(W - 2k) + 1, the smaller at the n nearest to where the two cross.
-- (In steps: a macro argument used several times is expanded each time, so bound_work passes columns.)
CREATE OR REPLACE TEMP MACRO bound_a(w_us, k) AS
    CASE WHEN w_us >= 2 * k * 3600000000 THEN (w_us - 2 * k * 3600000000) // 3600000000 + 1 ELSE 0 END;
CREATE OR REPLACE TEMP MACRO bound_c(p_us) AS p_us // 3600000000 - 1;
CREATE OR REPLACE TEMP MACRO whole_hours_of(a, c) AS
    CASE WHEN c < 1 THEN 0
         ELSE least(greatest(a // (c + 2) * c, a - 2 * (a // (c + 2))),
                    greatest((a // (c + 2) + 1) * c, a - 2 * (a // (c + 2) + 1))) END;
CREATE OR REPLACE TEMP MACRO whole_hours(w_us, p_us, k) AS whole_hours_of(bound_a(w_us, k), bound_c(p_us));

-- Each node's peak: the most it was owed in any hour of the period.
CREATE OR REPLACE TEMP TABLE bound_peak AS
SELECT depth, budget, max(owed_gpu_us) AS peak_us FROM level_hours GROUP BY ALL;

-- Each allocated workload's runs in the period that were protected 2 h or more (a shorter protection holds
-- no whole hour for certain; leaving such runs out only lowers the count): their width, shortest protection,
-- productive run time (less what the workload's preemptions in the period threw away), pieces shorter than
-- their own protection (a piece as long as its own is as long as the shortest), the first whole hour after
-- its submission (or the period's start), and the whole hours any schedule giving it that run time holds.
-- Only a workload wider than the peak of some node its work counts to can force excess, so runs no wider
-- than the least peak of their team's nodes go unread.
CREATE OR REPLACE TEMP TABLE bound_work AS
WITH floor AS (
    SELECT b.bid, min(pk.peak_us) AS floor_us
    FROM level_members m JOIN bound_peak pk USING (depth, budget) JOIN budgets b ON b.path = m.team
    GROUP BY b.bid
), w AS (
    SELECT r.wid, any_value(r.bid) AS bid, min(r.gpus) AS gpus, min(r.protect_us) AS protect_us,
           sum(least(coalesce(r.end_us, p.t1), p.t1) - greatest(r.start_us, p.t0)) AS run_us,
           greatest(1, count(*) FILTER (WHERE least(coalesce(r.end_us, p.t1), p.t1) - greatest(r.start_us, p.t0)
                                               < r.protect_us)) AS short_pieces
    FROM run_iv r JOIN floor f USING (bid), params p
    WHERE r.allocated AND r.protect_us >= 2 * 3600000000 AND r.gpus * 3600000000 > f.floor_us
      AND r.start_us < p.t1 AND coalesce(r.end_us, p.t1) > p.t0
    GROUP BY r.wid
), lost AS (
    SELECT x.wid, sum(x.lost_us + x.restart_us) AS lost_us
    FROM preempt_iv x SEMI JOIN w USING (wid), params p
    WHERE x.preempt_us >= p.t0 AND x.preempt_us < p.pt1
    GROUP BY x.wid
), x AS (
    SELECT w.wid, w.bid, w.gpus, w.protect_us, w.short_pieces,
           greatest(0, w.run_us - coalesce(l.lost_us, 0)) AS work_us,
           (greatest(k.submit_us, p.t0) + 3599999999) // 3600000000 * 3600000000 AS from_us
    FROM w JOIN workload_keys k USING (wid) LEFT JOIN lost l USING (wid), params p
), y AS (
    SELECT *, bound_a(work_us, short_pieces) AS a, bound_c(protect_us) AS c FROM x
)
SELECT wid, bid, gpus, protect_us, short_pieces, work_us, from_us, whole_hours_of(a, c) AS whole_hours FROM y;

-- Per level: each workload wider than its node's peak owed adds (g - peak) GPU-hours of excess per whole hour.
CREATE OR REPLACE TEMP TABLE bound_excess AS
SELECT m.depth, m.budget, w.wid, w.from_us, w.gpus, w.whole_hours,
       (w.gpus * 3600000000 - pk.peak_us) * w.whole_hours AS excess_us
FROM bound_work w JOIN budgets b USING (bid)
JOIN level_members m ON m.team = b.path
JOIN bound_peak pk ON pk.depth = m.depth AND pk.budget = m.budget
WHERE w.whole_hours > 0 AND w.gpus * 3600000000 > pk.peak_us;

-- Per level and hour: what the hour can hold, what its nodes were owed, and the slack between.
CREATE OR REPLACE TEMP TABLE bound_slack AS
WITH cap AS (
    SELECT h.hour_us, greatest(coalesce(a.avail_us, 0), coalesce(r.alloc_us, 0)) AS cap_us
    FROM hours h
    LEFT JOIN (SELECT hour_us, sum(avail_gpus * len_us) AS avail_us FROM segment_avail GROUP BY ALL) a USING (hour_us)
    LEFT JOIN (SELECT hour_us, sum(gpu_us) AS alloc_us FROM run_hours WHERE allocated GROUP BY ALL) r USING (hour_us)
)
SELECT l.depth, l.hour_us, sum(l.owed_gpu_us) AS owed_us, greatest(0, any_value(c.cap_us) - sum(l.owed_gpu_us)) AS slack_us
FROM level_hours l JOIN cap c USING (hour_us)
GROUP BY l.depth, l.hour_us;

-- The sweep: for each first hour t a workload's excess may use, its excess and that of every workload
-- submitted later, less the slack of the hours from t on; the largest is what no schedule can absorb.
CREATE OR REPLACE TEMP TABLE level_bound AS
WITH e AS (
    SELECT depth, from_us, sum(excess_us) AS x FROM bound_excess GROUP BY ALL
), e_after AS (
    SELECT depth, from_us, sum(x) OVER (PARTITION BY depth ORDER BY from_us DESC) AS x_after FROM e
), s_after AS (
    SELECT depth, hour_us, sum(slack_us) OVER (PARTITION BY depth ORDER BY hour_us DESC) AS s_after FROM bound_slack
), unabsorbed AS (
    SELECT e.depth, greatest(0, max(e.x_after - coalesce(s.s_after, 0))) AS u_us
    FROM e_after e ASOF LEFT JOIN s_after s ON s.depth = e.depth AND s.hour_us >= e.from_us
    GROUP BY e.depth
), owed AS (
    SELECT depth, sum(owed_us) AS owed_us FROM bound_slack GROUP BY depth
), wide AS (
    SELECT depth, count(DISTINCT wid) AS workloads, sum(excess_us) AS excess_us FROM bound_excess GROUP BY depth
)
SELECT l.depth, coalesce(o.owed_us, 0) / 3.6e9 AS owed_gpu_hours,
       least(coalesce(u.u_us, 0), coalesce(o.owed_us, 0)) / 3.6e9 AS unabsorbed_gpu_hours,
       coalesce(w.excess_us, 0) / 3.6e9 AS gang_excess_gpu_hours, coalesce(w.workloads, 0) AS wide_workloads,
       CASE WHEN o.owed_us > 0 THEN greatest(0, o.owed_us - coalesce(u.u_us, 0)) / o.owed_us END AS ratio
FROM tree_levels l LEFT JOIN owed o USING (depth) LEFT JOIN unabsorbed u USING (depth) LEFT JOIN wide w USING (depth)
ORDER BY l.depth;
