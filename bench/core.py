"""Benchmark the decision core: the month of a 1,024-GPU cluster, ~150 researchers, ~100,000 workloads.

``main`` replays the full demo month (``gpuledger demo --month full``) through the core with the
replay driver's simulation of execution, writing nothing, and reports microseconds per event,
the cost of one fair-share ordering and the core's time, for the fair-share policy and the two
baselines.

The module also keeps a small synthetic stream (``workloads``: debug jobs that outlive their
15-minute protection without a checkpoint, unallocated batch work and training, from a fixed
seed) with its own tiny completion simulation (``simulate``): the pinned decision hashes of the
tests and the compiled-build comparison are computed on it.
"""

from __future__ import annotations

import heapq
import math
import os
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from ledger.core.fairshare import FairShareOrder
from ledger.gcpause import paused_gc
from ledger.replay.demo_month import FULL, generate
from ledger.replay.driver import ReplayDriver
from ledger.replay.run import ReplayInputs, inputs_from_budgets

CLUSTER = "bench"
GPUS = 1024
DAYS = 30
WORKLOADS = 100_000
START = ev.from_us(ev.to_us(ev.EARLIEST) + 26 * 365 * 86_400 * 1_000_000)  # early 2026
CHECKPOINT_S = 1800


@dataclass(slots=True)
class Job:
    """What the simulation knows about a workload."""

    wid: str
    work_s: int
    remaining_s: int
    started_us: int = 0
    attempt: int = 0


def budget_tree() -> list[tuple[str, float, tuple[str, ...]]]:
    """Return (path, share, managers): org / 3 programs / 15 projects / 150 researchers."""
    rng = random.Random(7)
    nodes: list[tuple[str, float, tuple[str, ...]]] = [("ai2", 1.0, ("ceo",))]
    for p in range(3):
        prog = f"ai2/prog{p}"
        nodes.append((prog, [0.45, 0.35, 0.20][p], (f"pm{p}",)))
        for q in range(5):
            proj = f"{prog}/proj{q}"
            nodes.append((proj, round(rng.uniform(0.5, 2.0), 2), (f"pi{p}{q}",)))
            for r in range(10):
                nodes.append((f"{proj}/r{r}", round(rng.uniform(0.5, 1.5), 2), ()))
    return nodes


def workloads(leaves: list[str], n: int = WORKLOADS, days: float = DAYS) -> list[tuple[int, ev.WorkloadSubmitted]]:
    """Return (submit time µs, submission) for a month at 2–3× demand, from a fixed seed."""
    rng = random.Random(42)
    t0 = ev.to_us(START)
    span = int(days * 86_400 * 1_000_000)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.45:  # debug: small, short, protected up to 15 min
            gpus, work, mrt, kind = rng.choice([1, 1, 2, 4, 8]), rng.randint(120, 1800), 900, "debug"
        elif r < 0.69:  # unallocated batch: free and preemptible
            gpus, work, mrt, kind = rng.choice([1, 2, 4, 8]), rng.randint(1800, 4 * 3600), 0, "batch"
        elif r < 0.995:  # training
            gpus, work, mrt, kind = rng.choice([4, 8, 8, 16]), rng.randint(1800, 6 * 3600), 2 * 3600, "training"
        else:  # large training
            gpus, work, mrt, kind = rng.choice([64, 128, 256]), rng.randint(4 * 3600, 12 * 3600), 8 * 3600, "training"
        t = t0 + rng.randrange(span)
        out.append(
            (
                t,
                ev.WorkloadSubmitted.model_construct(
                    event_id=f"s{i}", cluster=CLUSTER, time=ev.from_us(t), schema_version=2,
                    workload_id=f"w{i}", budget=rng.choice(leaves), user="u", gpus=gpus, nodes=0,
                    min_runtime_s=mrt, resumable=rng.random() < 0.9, priority=rng.choice([0, 0, 1, 2]), kind=kind,
                    work_s=work, checkpoint_interval_s=CHECKPOINT_S, restart_s=300,
                ),
            )
        )
    out.sort(key=lambda x: (x[0], x[1].workload_id))
    return out


def setup_events() -> list[ev.Event]:
    """Return the capacity and budget events that open the month."""
    evs: list[ev.Event] = [
        ev.ClusterCapacityChanged(event_id="cap", cluster=CLUSTER, time=START, gpus=GPUS, gpus_per_node=8)
    ]
    for path, share, managers in budget_tree():
        parent = path.rsplit("/", 1)[0] if "/" in path else None
        evs.append(
            ev.BudgetNodeDefined(
                event_id=f"b-{path}", cluster=CLUSTER, time=START, path=path, parent=parent, share=share,
                managers=managers, set_by="admin",
            )
        )
    return evs


def simulate(
    knobs: Knobs, subs: list[tuple[int, ev.WorkloadSubmitted]], until_us: int | None = None
) -> dict[str, float]:
    """Drive one month (or its part up to ``until_us``) through the core; return counts and timings.

    ``core_s`` is wall time spent inside the core; ``cpu_s`` the process CPU time of the whole
    loop (the core plus this small simulation), steadier than wall time on a shared machine.
    """
    core = DecisionCore(knobs, CLUSTER)
    for e in setup_events():
        core.handle(e)
    jobs = {s.workload_id: Job(s.workload_id, s.work_s or 0, s.work_s or 0) for _, s in subs}
    # inputs: (time, seq, event); completions carry the attempt they belong to
    inputs: list[tuple[int, int, ev.Event, int]] = [(t, i, s, 0) for i, (t, s) in enumerate(subs)]
    heapq.heapify(inputs)
    seq = len(inputs)
    counts = {"inputs": 0, "wakeups": 0, "starts": 0, "preemptions": 0, "completed": 0, "outputs": 0}
    core_s = 0.0
    wall0 = time.perf_counter()
    cpu0 = time.process_time()
    while inputs:
        nxt = core.next_wakeup()
        t_in = inputs[0][0]
        if until_us is not None and min(t_in, nxt if nxt is not None else t_in) > until_us:
            break
        clock = time.perf_counter()
        if nxt is not None and nxt <= t_in:
            outs = core.advance(nxt)
            counts["wakeups"] += 1
        else:
            _, _, e, attempt = heapq.heappop(inputs)
            if isinstance(e, ev.WorkloadCompleted) and jobs[e.workload_id].attempt != attempt:
                continue  # the run it belonged to was preempted
            outs = core.handle(e)
            counts["inputs"] += 1
        core_s += time.perf_counter() - clock
        counts["outputs"] += len(outs)
        for o in outs:
            if isinstance(o, ev.WorkloadStarted):
                job = jobs[o.workload_id]
                job.attempt, job.started_us = o.attempt, ev.to_us(o.time)
                seq += 1
                done = job.started_us + job.remaining_s * 1_000_000
                heapq.heappush(
                    inputs,
                    (
                        done, seq,
                        ev.WorkloadCompleted.model_construct(
                            event_id=f"c{o.workload_id}.{o.attempt}", cluster=CLUSTER, time=ev.from_us(done),
                            schema_version=1, workload_id=o.workload_id, outcome="succeeded",
                        ),
                        o.attempt,
                    ),
                )
                counts["starts"] += 1
            elif isinstance(o, ev.WorkloadPreempted):
                job = jobs[o.workload_id]
                ran = (ev.to_us(o.time) - job.started_us) // 1_000_000
                job.remaining_s -= ran // CHECKPOINT_S * CHECKPOINT_S
                job.attempt = -1
                counts["preemptions"] += 1
            elif isinstance(o, ev.WorkloadCompleted):
                counts["completed"] += 1
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    events = counts["inputs"] + counts["wakeups"]
    result: dict[str, float] = {
        **counts, "core_s": core_s, "wall_s": wall, "cpu_s": cpu, "us_per_event": core_s / events * 1e6,
        "cpu_us_per_event": cpu / events * 1e6,
    }
    result["ordering_us"] = ordering_cost(core)
    result["ordering_cold_us"] = ordering_cost(core, cold=True)
    return result


def ordering_cost(core: DecisionCore, repeat: int = 200, cold: bool = False) -> float:
    """Return microseconds for one full fair-share ordering of every budget node.

    Warm: one order object asked at successive instants (kept rankings reused while they hold,
    as the core's own queries are). Cold: a fresh order object each time (every ratio and
    ranking computed).
    """
    order = FairShareOrder(core.tree, core.occ)
    order.capacity = core.hosts.capacity
    t = core.now
    clock = time.perf_counter()
    for i in range(repeat):
        if cold:
            order = FairShareOrder(core.tree, core.occ)
            order.capacity = core.hosts.capacity
        order.ranking(t + i)
    return (time.perf_counter() - clock) / repeat * 1e6


def naive_usage_cost(events: int = 20_000) -> float:
    """Return µs to recompute one node's window usage by rescanning intervals (the baseline avoided)."""
    intervals = [(i * 1000, i * 1000 + 5000, 8) for i in range(events)]
    clock = time.perf_counter()
    lo = intervals[-1][1] - 7 * 86_400 * 1000
    total = 0
    for s, e, g in intervals:
        a, b = max(s, lo), e
        if b > a:
            total += (b - a) * g
    return (time.perf_counter() - clock) * 1e6


class _TimedCore:
    """The decision core behind the replay driver, with the CPU time spent inside it summed."""

    def __init__(self, core: DecisionCore) -> None:
        self.core = core
        self.seconds = 0.0
        self.calls = 0

    def handle(self, event: ev.Event, decide: bool = True, t_us: int | None = None) -> list[ev.Event]:
        clock = time.process_time()
        outs = self.core.handle(event, decide, t_us)
        self.seconds += time.process_time() - clock
        self.calls += 1
        return outs

    def advance(self, until_us: int) -> list[ev.Event]:
        clock = time.process_time()
        outs = self.core.advance(until_us)
        self.seconds += time.process_time() - clock
        self.calls += 1
        return outs

    def next_wakeup(self) -> int | None:
        return self.core.next_wakeup()


def replay_month(knobs: Knobs, inputs: ReplayInputs, until_us: int | None) -> dict[str, float]:
    """Drive the month through the core with the replay driver's own simulation, writing nothing; return figures.

    ``core_s`` is CPU time inside the core's calls (steadier than wall time on a shared machine);
    ``cpu_s`` the CPU time of the whole loop (the core and the driver's simulation; no log is
    written: the sink only counts). The ordering costs are measured for fair share only.
    """
    timed = _TimedCore(DecisionCore(knobs, inputs.cluster))
    counts: Counter[str] = Counter()

    def count(events: list[ev.Event]) -> None:
        counts.update(type(e).__name__ for e in events)

    driver = ReplayDriver(timed, inputs.cluster, count)
    driver.feed(inputs.setup)
    driver.feed(inputs.inputs)
    cpu0 = time.process_time()
    with paused_gc():  # as the replay runs it
        driver.run(until_us=until_us)
    cpu = time.process_time() - cpu0
    return {
        "calls": timed.calls, "starts": counts["WorkloadStarted"], "preemptions": counts["WorkloadPreempted"],
        "submitted": counts["WorkloadSubmitted"], "core_s": timed.seconds, "cpu_s": cpu,
        "us_per_event": timed.seconds / max(1, timed.calls) * 1e6,
    } | (
        {"ordering_us": ordering_cost(timed.core), "ordering_cold_us": ordering_cost(timed.core, cold=True)}
        if knobs.policy == "fairshare" else {"ordering_us": math.nan, "ordering_cold_us": math.nan}
    )


def main(argv: list[str] | None = None) -> None:
    """Run the month's decisions under fair share, then under the baselines; print a table.

    The month is ``gpuledger demo --month full``'s: 1,024 GPUs, a 4-level tree of about 150
    researchers, ~100,000 workloads at 2–3× demand over 30 days, fed to the core by the replay
    driver's simulation of execution. Arguments (optional): the policies to run.
    ``BENCH_CORE_DAYS`` replays only the first days (default: all 30). ``BENCH_REPEAT`` repeats
    each run and prints the best and the median core time.
    """
    # the command line is ours only when run as ``python -m bench.core`` (not via ``python -m bench``)
    args = (sys.argv[1:] if __name__ == "__main__" else []) if argv is None else argv
    days = float(os.environ.get("BENCH_CORE_DAYS", str(DAYS)))
    repeat = int(os.environ.get("BENCH_REPEAT", "1"))
    month = generate(7, mix=FULL)
    inputs = inputs_from_budgets(month.budgets, list(month.submissions), start=month.start)
    until = ev.to_us(min(month.end, month.start + timedelta(days=days)))
    leaves = sum(1 for n in month.budgets.nodes if n.path.count("/") == 3)
    print(
        f"the full demo month: {len(month.submissions):,} workloads, {leaves} researchers, "
        f"{month.budgets.gpus} GPUs; replaying {days:g} of {DAYS} days; target: the whole month in < 5 s"
    )
    print(f"{'policy':<10} {'events':>8} {'starts':>7} {'preempt':>8} {'us/event':>9} {'core s':>7} {'cpu s':>7}"
          f" {'core best':>9} {'core med':>8} {'order us':>9} {'cold us':>8}")
    for policy in args or ("fairshare", "priority", "fifo"):
        runs = [replay_month(Knobs(policy=policy), inputs, until) for _ in range(repeat)]  # type: ignore[arg-type]
        cores = sorted(r["core_s"] for r in runs)
        r = runs[-1]
        print(
            f"{policy:<10} {int(r['calls']):>8} {int(r['starts']):>7} {int(r['preemptions']):>8}"
            f" {r['us_per_event']:>9.1f} {r['core_s']:>7.2f} {r['cpu_s']:>7.2f} {cores[0]:>9.2f}"
            f" {statistics.median(cores):>8.2f} {r['ordering_us']:>9.1f} {r['ordering_cold_us']:>8.1f}",
            flush=True,
        )
    print(f"(baseline: rescanning one node's 20,000 intervals for its window usage: {naive_usage_cost():.0f} us)")


if __name__ == "__main__":
    main()
