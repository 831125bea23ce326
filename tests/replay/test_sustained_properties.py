"""No starvation under sustained demand: the head of the fair-share order starts within the stated bound.

The liveness property of ``test_family_properties`` bounds how long work takes once submissions
stop. Here they never stop: hypothesis draws sustained-demand months (``scenario_family.sustained``:
2–3× the capacity submitted at every moment, training runs as wide as the whole cluster among them)
and the rules (strategy, protection cap, grace), and the month is replayed only up to its last
submission, so the backlog grows for the whole replay. After every instant the core decides, the
test asks it for its fair-share order and names the *head*: the first waiting allocated workload of
the first budget in that order that has one (inside a budget: priority, then submit time, as the
core queues them). The core states (``ledger.core.contract.start_bound``) that the head, for as long
as it stays the head, starts within that bound; so no workload may stay the head, unstarted, for
longer. A head still waiting when the replay stops counts with its wait so far: the horizon hides
no wait. The bound's stated exception (hosts held by a settled run, which keeps its GPUs until it
checkpoints or ends) is added as the longest such a run can keep them in the month: the longest
work of a run that cannot resume, and the longest checkpoint interval of one that can, each with its
restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import DecisionCore
from ledger.core.contract import start_bound
from ledger.core.knobs import Knobs
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
    started: dict[str, int] = field(default_factory=dict)  # workload -> first start
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
        return out

    def close(self, t: int) -> None:
        """End the current head's streak at ``t`` (its start, its losing the head, or the horizon)."""
        if self.head is not None:
            self.streaks.append((self.started.get(self.head, t) - self.since, self.head))

    def next_wakeup(self) -> int | None:
        return self.core.next_wakeup()

    def _seen(self, out: list[Event]) -> list[Event]:
        for e in out:
            if isinstance(e, WorkloadStarted):
                self.started.setdefault(e.workload_id, to_us(e.time))
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


def late_heads(watch: HeadWatch, knobs: Knobs, subs: list[WorkloadSubmitted]) -> list[str]:
    """Return, worst first, every head that stayed the head unstarted longer than the bound."""
    bound = bound_us(knobs, subs)
    late = sorted((w, wid) for w, wid in watch.streaks if w > bound)[::-1]
    return [f"{wid} ({watch.subs[wid].gpus} GPUs) the head for {w / 3.6e9:.1f} h unstarted, bound {bound / 3.6e9:.1f} h"
            for w, wid in late]


shapes = st.builds(
    Sustained,
    gpus=st.sampled_from([32, 64, 128]),
    days=st.just(3),
    demand=st.floats(2.0, 3.0),
    wide_share=st.floats(0.3, 0.8),
    resumable=st.sampled_from([0.7, 1.0]),
    programs=st.just(2),
    projects=st.integers(2, 4),
    researchers=st.integers(4, 10),
)
rules = st.builds(
    Knobs,
    preemption_strategy=st.sampled_from(["final-share", "instant"]),
    max_min_runtime_s=st.sampled_from([2 * 3600, 8 * 3600]),
    grace_s=st.sampled_from([0, 120]),
    max_preemptions=st.sampled_from([1, 2]),
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, seed=st.integers(0, 10_000), knobs=rules)
def test_the_head_of_the_fair_share_order_starts_within_the_bound_while_submissions_go_on(
    shape: Sustained, seed: int, knobs: Knobs
) -> None:
    watch, subs, _ = replay_sustained(shape, seed, knobs)
    assert watch.streaks  # allocated work waited: the demand outgrew the cluster
    late = late_heads(watch, knobs, subs)
    assert not late, late[:5]


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), strategy=st.sampled_from(["final-share", "instant"]))
def test_on_256_gpus_over_a_week_the_head_starts_within_the_bound(seed: int, strategy: str) -> None:
    shape = Sustained(gpus=256, days=7, programs=3, projects=6, researchers=30)
    knobs = Knobs(preemption_strategy=strategy)  # type: ignore[arg-type]
    watch, subs, _ = replay_sustained(shape, seed, knobs)
    late = late_heads(watch, knobs, subs)
    assert not late, late[:5]
