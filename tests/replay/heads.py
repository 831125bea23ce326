"""The head of the fair-share order, watched between the instants a decision core decides."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core import DecisionCore
from ledger.core.contract import start_bound
from ledger.core.knobs import DEBUG_RUNTIME_S, Knobs
from ledger.events import Event, WorkloadStarted, WorkloadSubmitted, to_us
from ledger.replay.driver import ReplayDriver
from ledger.replay.scenario_family import Sustained, sustained

_US = 1_000_000


@dataclass(repr=False)
class HeadWatch:
    """A decision core whose fair-share head is noted after every instant it decides."""

    core: DecisionCore
    subs: dict[str, WorkloadSubmitted]
    streaks: list[tuple[int, str]] = field(default_factory=list)  # (how long, workload) it stayed the head
    heads: list[tuple[int, str]] = field(default_factory=list)  # (since, workload): every new head in turn
    started: dict[str, int] = field(default_factory=dict)  # workload -> its latest start
    first_start: dict[str, int] = field(default_factory=dict)  # workload -> its first start
    starts: list[WorkloadStarted] = field(default_factory=list)  # every start, in order
    head: str | None = None
    since: int = 0

    def handle(self, event: Event, decide: bool = True, t_us: int | None = None) -> list[Event]:
        return self._seen(self.core.handle(event, decide, t_us))

    def advance(self, until_us: int) -> list[Event]:
        out = self._seen(self.core.advance(until_us))
        head = self.first(until_us)
        if head != self.head:
            self.close(until_us)
            self.head, self.since = head, until_us
            if head is not None:
                self.heads.append((until_us, head))
        return out

    def close(self, t: int) -> None:
        """End the current head's streak at ``t``: when it started, lost the head, or the replay stopped."""
        if self.head is not None:
            began = self.started.get(self.head, -1)
            self.streaks.append(((began if began >= self.since else t) - self.since, self.head))

    def next_wakeup(self) -> int | None:
        return self.core.next_wakeup()

    def _seen(self, out: list[Event]) -> list[Event]:
        for e in out:
            if isinstance(e, WorkloadStarted):
                self.started[e.workload_id] = to_us(e.time)
                self.first_start.setdefault(e.workload_id, to_us(e.time))
                self.starts.append(e)
        return out

    def first(self, t: int) -> str | None:
        """Return the first waiting allocated workload of the first budget in fair-share order that has one."""
        by_budget: dict[str, list[WorkloadSubmitted]] = {}
        for wid in self.core.waiting():
            s = self.subs[wid]
            if s.min_runtime_s > 0:
                by_budget.setdefault(s.budget, []).append(s)
        if not by_budget:
            return None
        for node in self.core.fair_share_order(t):
            if node in by_budget:
                return min(by_budget[node], key=lambda s: (-s.priority, to_us(s.time), s.workload_id)).workload_id
        raise AssertionError(f"budgets {sorted(by_budget)} wait but are not in the fair-share order")


def replay_sustained(shape: Sustained, seed: int, knobs: Knobs) -> tuple[HeadWatch, list[WorkloadSubmitted], int]:
    """Replay a sustained month up to its last submission; return the watch, the submissions and that instant."""
    subs, budgets = sustained(shape, seed)
    watch = HeadWatch(DecisionCore(knobs, budgets.cluster), {s.workload_id: s for s in subs})
    driver = ReplayDriver(watch, budgets.cluster, lambda events: None)
    driver.feed(budgets.events(subs[0].time))
    driver.feed(subs)
    horizon = max(to_us(s.time) for s in subs)
    driver.run(until_us=horizon)
    watch.close(horizon)
    return watch, subs, horizon


def bound_us(knobs: Knobs, subs: list[WorkloadSubmitted]) -> int:
    """Return the core's stated bound for this month, with its stated exception (settled runs) added."""
    def held(s: WorkloadSubmitted) -> int:
        kept = (s.checkpoint_interval_s or 0) if s.resumable else (s.work_s or 0)
        return kept + (s.restart_s or 0)

    restart = max((s.restart_s or 0) for s in subs)
    settled = max((held(s) for s in subs if s.min_runtime_s > 0), default=0)
    return int(start_bound(knobs, restart).total_seconds() + settled) * _US


def off_the_partition(watch: HeadWatch) -> list[str]:
    """Return the allocated starts on debug-partition hosts of runs that are not debug runs (none may be).

    A debug run is protected at most 15 minutes on one host; a run needing more hosts than there are
    outside the partition may be held onto it (``ledger.core.lanes``).
    """
    hosts = watch.core.hosts
    lane = {hosts.hosts[i].name for i in hosts.lane_hosts}
    knobs = watch.core.knobs
    outside = hosts.outside_hosts()
    wrong = []
    for e in watch.starts:
        if not e.allocated or not lane.intersection(e.nodes):
            continue
        s = watch.subs[e.workload_id]
        debug = 0 < min(s.min_runtime_s, knobs.max_min_runtime_s) <= DEBUG_RUNTIME_S and e.gpus <= knobs.gpus_per_node
        if not debug and len(e.nodes) <= outside:
            wrong.append(f"{e.workload_id} ({e.gpus} GPUs, minimum runtime {s.min_runtime_s} s) on {e.nodes}")
    return wrong


def late_heads(watch: HeadWatch, knobs: Knobs, subs: list[WorkloadSubmitted]) -> list[str]:
    """Return, worst first, every head wider than a host that stayed the head unstarted longer than the bound.

    The bound is stated for heads that need more than one host (the ones the core holds hosts for); a
    narrower run takes the first room of its size that frees.
    """
    bound = bound_us(knobs, subs)
    wide = [(w, wid) for w, wid in watch.streaks if watch.subs[wid].gpus > knobs.gpus_per_node]
    late = sorted((w, wid) for w, wid in wide if w > bound)[::-1]
    return [f"{wid} ({watch.subs[wid].gpus} GPUs) the head for {w / 3.6e9:.1f} h unstarted, bound {bound / 3.6e9:.1f} h"
            for w, wid in late]
