"""A tiny driver for core tests: feeds inputs in time order, completes started work, checks facts as they flow."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger import events as ev
from ledger.codec import encode
from ledger.core import DecisionCore


@dataclass
class Ledger:
    """What the emitted facts say: runs, host use, waiting work — recounted from outputs, not from the core."""

    per_node: int
    host_gpus: dict[str, int]
    budgets: dict[str, str | None] = field(default_factory=dict)  # workload -> defined budget node (None: undefined)
    gpus: dict[str, int] = field(default_factory=dict)
    runs: list[list[object]] = field(default_factory=list)  # [wid, nodes, gpus, allocated, start, protected, end]
    open: dict[str, list[object]] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, None] = field(default_factory=dict)
    health: dict[str, str] = field(default_factory=dict)
    fill: set[str] = field(default_factory=set)  # free fill: minimum runtime 0 or an undefined budget
    debug: set[str] = field(default_factory=set)  # debug runs: allocated, protected at most 15 min, one host at most

    def submitted(self, e: ev.WorkloadSubmitted, defined: bool) -> None:
        self.budgets[e.workload_id] = e.budget if defined else None
        self.gpus[e.workload_id] = e.gpus
        self.waiting[e.workload_id] = None
        if e.min_runtime_s == 0 or not defined:
            self.fill.add(e.workload_id)
        elif e.min_runtime_s <= 900 and e.gpus <= self.per_node and e.nodes <= 1:
            self.debug.add(e.workload_id)

    def fact(self, o: ev.Event) -> None:
        t = ev.to_us(o.time)
        if isinstance(o, ev.WorkloadStarted):
            self.waiting.pop(o.workload_id, None)
            share = [o.gpus] if len(o.nodes) == 1 else [self.per_node] * len(o.nodes)
            for h, g in zip(o.nodes, share, strict=True):
                self.used[h] = self.used.get(h, 0) + g
                assert self.used[h] <= self.host_gpus[h], f"{h} holds {self.used[h]} GPUs > {self.host_gpus[h]}"
            run: list[object] = [o.workload_id, o.nodes, o.gpus, o.allocated, t, ev.to_us(o.protected_until), None]
            self.runs.append(run)
            self.open[o.workload_id] = run
        elif isinstance(o, ev.WorkloadPreempted | ev.WorkloadCompleted):
            run = self.open.pop(o.workload_id, None)  # type: ignore[assignment]
            if run is None:
                self.waiting.pop(o.workload_id, None)
                return
            if isinstance(o, ev.WorkloadPreempted) and o.reason != "host_failure":
                assert t >= run[5], f"{o.workload_id} preempted at {t} inside its protected window (until {run[5]})"
            run[6] = t
            nodes, g = run[1], run[2]
            share = [g] if len(nodes) == 1 else [self.per_node] * len(nodes)  # type: ignore[arg-type]
            for h, x in zip(nodes, share, strict=True):  # type: ignore[call-overload]
                self.used[h] -= x
        elif isinstance(o, ev.WorkloadRequeued):
            self.waiting[o.workload_id] = None

    def charged_by_node(self, chain: dict[str, list[str]], t: int, window_us: int, upfront: bool) -> dict[str, int]:
        """Recount every node's charged allocated GPU-µs in the window from the runs, in one pass.

        Runs that ended before the window are dropped for good (time only moves forward), so a long
        stream costs O(runs still in the window) per call rather than O(all runs ever).
        """
        totals: dict[str, int] = {}
        kept: list[list[object]] = []
        for run in self.runs:
            wid, _nodes, g, allocated, s, pu, e = run
            end = t if e is None else e
            lo = max(s, t - window_us)  # type: ignore[call-overload]
            if e is not None and end <= lo:  # type: ignore[operator]
                continue  # wholly before the window: it never counts again
            kept.append(run)
            b = self.budgets[wid]  # type: ignore[index]
            if not allocated or b is None:
                continue
            charge = g * (end - lo) if end > lo else 0  # type: ignore[operator]
            if upfront and e is None and pu > t:  # type: ignore[operator]
                charge += g * (pu - t)  # type: ignore[operator]
            for node in chain[b]:
                totals[node] = totals.get(node, 0) + charge
        self.runs = kept
        return totals

    def nothing_waiting_fits(
        self, headroom: int = 0, held: tuple[str, ...] = (), holder: str = "", partition: tuple[str, ...] = ()
    ) -> str | None:
        """Return a waiting workload that fits the free healthy room now, if any (there must be none).

        Free fill is held back while the room it would leave is under ``headroom`` GPUs and allocated
        work runs or waits (the fill headroom of fair share): such fill does not count as fitting.
        Hosts ``held`` for ``holder`` are room for the holder only (the others may or may not start
        there, as the hold's rules say); the holder may start on them and on any other free host.
        Hosts of the debug ``partition`` are room for debug runs and for free fill that fits them alone.
        """
        healthy = [h for h in self.host_gpus if self.health.get(h, "healthy") == "healthy"]
        outside_hosts = sum(1 for h, g in self.host_gpus.items() if h not in partition and g == self.per_node)
        beyond = holder in self.gpus and -(-self.gpus[holder] // self.per_node) > outside_hosts
        # the holder's room: any free host, the debug partition's only when it is too wide for the hosts outside it
        everywhere = {h: self.host_gpus[h] - self.used.get(h, 0) for h in healthy if beyond or h not in partition}
        whole_everywhere = sum(
            1 for h, f in everywhere.items() if f == self.per_node and self.host_gpus[h] == self.per_node
        )
        if holder in self.waiting and whole_everywhere >= -(-self.gpus[holder] // self.per_node):
            return holder
        free = {h: f for h, f in everywhere.items() if h not in held}
        lane = {h: f for h, f in free.items() if h in partition}
        outside = {h: f for h, f in free.items() if h not in partition}
        allocated_busy = any(r[3] for r in self.open.values()) or any(w not in self.fill for w in self.waiting)
        total_free = sum(outside.values())
        for wid in self.waiting:
            g = self.gpus[wid]
            if wid in self.fill and allocated_busy and total_free - g < headroom:
                continue
            if self._fits(g, outside) or ((wid in self.debug or wid in self.fill) and self._fits(g, lane)):
                return wid
        return None

    def _fits(self, g: int, free: dict[str, int]) -> bool:
        """Return whether ``g`` GPUs fit ``free`` (host -> free GPUs): one host's room, or enough wholly free hosts."""
        if g <= self.per_node:
            return any(f >= g for f in free.values())
        whole = sum(1 for h, f in free.items() if f == self.per_node and self.host_gpus[h] == self.per_node)
        return whole >= -(-g // self.per_node)


def allowed_preemptions(knobs: object, checkpoints: int) -> int:
    """Return how often one allocated workload may be preempted for waiters: the cap, plus once per checkpoint.

    Past ``max_preemptions`` a run is preempted again only once it has written a checkpoint (it
    keeps saved progress); here checkpoints are inputs, so each allows at most one more.
    """
    return int(knobs.max_preemptions) + checkpoints  # type: ignore[attr-defined]


def liveness_bound_us(core: DecisionCore, inputs: list[ev.Event], work_min: dict[str, float]) -> int | None:
    """Return the latest time every workload must have finished by under fair share (docs/rules.md), else None.

    After the last input at T nothing new arrives and every host is back: some workload runs
    whenever one waits (whatever fits the idle cluster starts), so the tail is at most the sum of
    the runs still to come, each no longer than its work (a run that lasts its work completes;
    runs restart from zero here). An allocated workload runs at most ``max_preemptions`` + 1
    times, plus once more per host event; every fill preemption starts an allocated run, so fill
    reruns are at most as many as those, each at most the longest fill's work.
    """
    knobs = core.knobs
    if knobs.policy != "fairshare":
        return None
    subs = [e for e in inputs if isinstance(e, ev.WorkloadSubmitted)]
    hosts = sum(1 for e in inputs if isinstance(e, ev.HostHealthChanged))
    us = 60 * 1_000_000
    ckpts: dict[str, int] = {}
    for e in inputs:
        if isinstance(e, ev.CheckpointWritten):
            ckpts[e.workload_id] = ckpts.get(e.workload_id, 0) + 1

    def attempts(wid: str) -> int:
        return allowed_preemptions(knobs, ckpts.get(wid, 0)) + 1 + hosts

    alloc = [e for e in subs if e.min_runtime_s > 0]
    fill = [e for e in subs if e.min_runtime_s == 0]
    longest_fill = max((work_min.get(e.workload_id, 60) for e in fill), default=0)
    grace = knobs.grace_s * 1_000_000
    tail = sum(attempts(e.workload_id) * (work_min.get(e.workload_id, 60) * us + grace) for e in alloc)
    tail += sum((1 + hosts) * work_min.get(e.workload_id, 60) * us for e in fill)
    tail += sum(attempts(e.workload_id) for e in alloc) * (longest_fill * us + grace)
    return max(ev.to_us(e.time) for e in inputs) + int(tail)


def drive(
    core: DecisionCore,
    inputs: list[ev.Event],
    work_min: dict[str, float],
    cut: int | None = None,
    ledger: Ledger | None = None,
    check: Callable[[DecisionCore, Ledger], None] | None = None,
) -> tuple[list[bytes], DecisionCore]:
    """Feed inputs in time order; complete each started run after its work; return encoded outputs.

    Facts of one instant (inputs and completions) are all applied before that instant's wake-ups
    and its one scheduling pass (``handle(e, decide=False)`` then ``advance(t)``), as the replay
    driver does. With ``cut``, the core is snapshotted and restored after that many inputs and
    driving continues with the restored core (the caller compares against an uncut run).

    No cap on the simulation: it runs until nothing is left to happen. Under fair share it must
    end by ``liveness_bound_us``; a preemption at the very instant the victim's run completes
    fails the drive.
    """
    # at one instant simulated completions come before inputs (as in the replay driver): a host
    # failing at the instant a run completes finds it completed
    queue: list[tuple[int, int, int, ev.Event]] = [(ev.to_us(e.time), 1, i, e) for i, e in enumerate(inputs)]
    heapq.heapify(queue)
    bound = liveness_bound_us(core, inputs, work_min)
    seq = len(inputs)
    out: list[bytes] = []
    attempts: dict[str, int] = {}
    due: dict[str, int] = {}  # workload -> when its current run completes
    fed = 0
    while queue or core.next_wakeup() is not None:
        nxt = core.next_wakeup()
        now = queue[0][0] if queue and (nxt is None or queue[0][0] <= nxt) else nxt
        assert now is not None
        assert bound is None or now <= bound, f"liveness: still busy at {now} past the stated bound {bound}"
        if nxt is not None and (not queue or nxt < queue[0][0]):
            produced = core.advance(nxt)
        else:
            produced = []
            while queue and queue[0][0] == now:
                _, _, _, e = heapq.heappop(queue)
                if isinstance(e, ev.WorkloadCompleted) and e.event_id.startswith("done:"):
                    wid, attempt = e.workload_id, int(e.event_id.rsplit(":", 1)[1])
                    if attempts.get(wid) != attempt:
                        continue  # its run was preempted
                if ledger is not None and isinstance(e, ev.WorkloadSubmitted):
                    ledger.submitted(e, e.budget in core.tree)
                if ledger is not None and isinstance(e, ev.HostHealthChanged):
                    ledger.health[e.host] = e.state
                produced += core.handle(e, False)
                if ledger is not None and isinstance(e, ev.WorkloadCompleted):
                    ledger.fact(e)
                fed += 1
                if cut is not None and fed == cut:
                    core = DecisionCore.restore(core.snapshot())
            produced += core.advance(now)
        for o in produced:
            out.append(encode(o))
            if ledger is not None:
                ledger.fact(o)
            if isinstance(o, ev.WorkloadStarted):
                attempts[o.workload_id] = o.attempt
                done = o.time + _minutes(work_min.get(o.workload_id, 60))
                due[o.workload_id] = ev.to_us(done)
                seq += 1
                c = ev.WorkloadCompleted(
                    event_id=f"done:{o.workload_id}:{o.attempt}", cluster=core.cluster, time=done,
                    workload_id=o.workload_id, outcome="succeeded",
                )
                heapq.heappush(queue, (ev.to_us(done), 0, seq, c))
            elif isinstance(o, ev.WorkloadPreempted):
                assert due.get(o.workload_id) != ev.to_us(o.time), f"{o.workload_id} preempted as it completes"
                attempts[o.workload_id] = -1
        if ledger is not None and check is not None:
            check(core, ledger)
    return out, core


def _minutes(m: float):  # type: ignore[no-untyped-def]
    from datetime import timedelta

    return timedelta(minutes=m)
