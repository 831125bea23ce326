"""Months of the scenario family replayed whole: they end, and nothing is preempted as it completes."""

from __future__ import annotations

from collections import Counter

import pytest

from ledger.core import DecisionCore
from ledger.core.knobs import Knobs
from ledger.events import Event, WorkloadCompleted, WorkloadPreempted, WorkloadSubmitted
from ledger.replay.driver import ReplayDriver
from ledger.replay.scenario_family import Params, month

SMALL = Params(gpus=32, days=1, teams=3, demand=2.5, exact_share=0.35, never_checkpoint=0.5)


def _replay(subs: list[WorkloadSubmitted], knobs: Knobs, budgets: object) -> list[Event]:
    out: list[Event] = []
    driver = ReplayDriver(DecisionCore(knobs, "fam"), "fam", out.extend)
    driver.feed(budgets.events(subs[0].time))  # type: ignore[attr-defined]
    driver.feed(subs)
    stats = driver.run()
    assert stats.stopped_at is None and not stats.unfinished
    return out


def test_the_same_params_and_seed_give_the_same_month() -> None:
    a, b = month(SMALL, 5), month(SMALL, 5)
    assert a == b
    assert month(SMALL, 6)[0] != a[0]
    work = sum(s.gpus * (s.work_s or 0) for s in a[0])
    assert work >= SMALL.demand * SMALL.gpus * SMALL.days * 86_400  # the demand asked for
    assert any(s.work_s == s.min_runtime_s and (s.restart_s or 0) > s.min_runtime_s for s in a[0])


@pytest.mark.parametrize("strategy", ["final-share", "instant"])
@pytest.mark.parametrize("close", [True, False])
def test_a_family_month_ends_with_every_workload_done_and_none_preempted_as_it_completes(
    strategy: str, close: bool
) -> None:
    subs, budgets = month(Params(**{**SMALL.__dict__, "close_budgets": close}), 11)
    knobs = Knobs(preemption_strategy=strategy)  # type: ignore[arg-type]
    events = _replay(subs, knobs, budgets)
    ended = {e.workload_id for e in events if isinstance(e, WorkloadCompleted)}
    assert ended == {s.workload_id for s in subs}
    # (a non-resumable victim ends "cancelled" at its preemption: that is not a completion)
    done = {e.workload_id: e.time for e in events if isinstance(e, WorkloadCompleted) and e.outcome == "succeeded"}
    preempted = [e for e in events if isinstance(e, WorkloadPreempted)]
    assert all(done.get(p.workload_id) != p.time for p in preempted)
    allocated = {s.workload_id for s in subs if s.min_runtime_s > 0 and (s.checkpoint_interval_s or 0) == 0}
    counts = Counter(p.workload_id for p in preempted if p.workload_id in allocated)
    assert all(n <= knobs.max_preemptions for n in counts.values()), counts.most_common(3)
