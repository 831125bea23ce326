"""Properties over the scenario family: any month of any shape ends within the stated bound.

Hypothesis draws the month's shape (demand, free fill, close or spread budgets, short jobs whose
work is their protection with dearer restarts, work that never checkpoints, wide runs) and the
preemption strategy; each month is replayed with no limit of its own (the driver's safety stop is
asserted never to be reached) and must end within the liveness bound of docs/rules.md.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import DecisionCore
from ledger.core.knobs import Knobs
from ledger.events import Event, WorkloadCompleted, WorkloadPreempted, WorkloadSubmitted, to_us
from ledger.replay.driver import ReplayDriver
from ledger.replay.scenario_family import Params, month

_US = 1_000_000

shapes = st.builds(
    Params,
    gpus=st.sampled_from([16, 32]),
    days=st.just(1),
    teams=st.integers(2, 4),
    demand=st.floats(1.5, 3.0),
    fill_share=st.floats(0.0, 0.3),
    close_budgets=st.booleans(),
    exact_share=st.floats(0.0, 0.5),
    never_checkpoint=st.floats(0.0, 0.7),
    wide_share=st.floats(0.0, 0.4),
)


def bound_us(subs: list[WorkloadSubmitted], knobs: Knobs) -> int:
    """Return when every workload must have finished by (docs/rules.md, "Liveness"), after the last submission."""
    def runs(s: WorkloadSubmitted) -> int:
        interval = s.checkpoint_interval_s or 0
        return knobs.max_preemptions + 1 + ((s.work_s or 0) // interval if interval else 0)

    allocated = [s for s in subs if s.min_runtime_s > 0]
    fill = [s for s in subs if s.min_runtime_s == 0]
    longest_fill = max(((s.work_s or 0) + (s.restart_s or 0) for s in fill), default=0)
    grace = knobs.grace_s
    tail = sum(runs(s) * ((s.work_s or 0) + (s.restart_s or 0) + grace) for s in allocated)
    tail += sum((s.work_s or 0) + (s.restart_s or 0) for s in fill)
    tail += sum(runs(s) for s in allocated) * (longest_fill + grace)
    return max(to_us(s.time) for s in subs) + tail * _US


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, seed=st.integers(0, 10_000), strategy=st.sampled_from(["final-share", "instant"]))
def test_every_month_of_the_family_ends_within_the_bound_with_nothing_preempted_as_it_completes(
    shape: Params, seed: int, strategy: str
) -> None:
    subs, budgets = month(shape, seed)
    knobs = Knobs(preemption_strategy=strategy, gpus_per_node=shape.gpus_per_node)  # type: ignore[arg-type]
    out: list[Event] = []
    driver = ReplayDriver(DecisionCore(knobs, budgets.cluster), budgets.cluster, out.extend)
    driver.feed(budgets.events(subs[0].time))
    driver.feed(subs)
    stats = driver.run()
    assert stats.stopped_at is None and not stats.unfinished  # ended because the work did, not at a limit

    ends = [e for e in out if isinstance(e, WorkloadCompleted)]
    assert Counter(e.workload_id for e in ends) == Counter(s.workload_id for s in subs)  # each ends once
    assert max(to_us(e.time) for e in ends) <= bound_us(subs, knobs)

    succeeded = {e.workload_id: e.time for e in ends if e.outcome == "succeeded"}
    preempted = [e for e in out if isinstance(e, WorkloadPreempted)]
    assert all(succeeded.get(p.workload_id) != p.time for p in preempted)
    never_checkpoints = {s.workload_id for s in subs if s.min_runtime_s > 0 and not s.checkpoint_interval_s}
    counts = Counter(p.workload_id for p in preempted if p.workload_id in never_checkpoints)
    assert all(n <= knobs.max_preemptions for n in counts.values()), counts.most_common(3)
