"""The core's wake-ups: earliest first, in the order asked at one time; its own kinds queued once until they fire."""

from __future__ import annotations

from ledger.core.contract import Workload
from ledger.core.wakeups import CYCLE, EXIT, HOLD, PROTECT, RECHECK, Wakeups


def _run(wid: str, epoch: int) -> Workload:
    w = Workload(wid, "lab/a", "lab/a", "ana", 1, 3600, True, 0, "train", 0)
    w.epoch = epoch
    return w


def test_wakeups_come_earliest_first_and_in_the_order_asked_at_one_time() -> None:
    wakeups = Wakeups()
    wakeups.workload(20, EXIT, _run("late", 3))
    wakeups.workload(10, PROTECT, _run("first", 1))
    wakeups.timed(10, HOLD)
    assert not wakeups.due(9) and wakeups.due(10)
    assert [wakeups.pop() for _ in range(3)] == [
        (10, 2, PROTECT, "first", 1), (10, 3, HOLD, "", 0), (20, 1, EXIT, "late", 3)
    ]
    assert wakeups.next_time() == -1 and not wakeups.due(1 << 60)


def test_a_preemption_cycle_or_standing_check_is_queued_once_until_it_fires() -> None:
    wakeups = Wakeups()
    wakeups.once(60, CYCLE)
    wakeups.once(30, CYCLE)  # one is queued already: the later ask is dropped, not moved earlier
    wakeups.once(90, RECHECK)
    assert wakeups.is_queued(CYCLE) and wakeups.is_queued(RECHECK)
    assert wakeups.pop()[:3] == (60, 1, CYCLE)
    assert not wakeups.is_queued(CYCLE) and wakeups.is_queued(RECHECK)
    wakeups.once(120, CYCLE)  # fired: the next cycle may be queued
    assert [w[:3] for w in (wakeups.pop(), wakeups.pop())] == [(90, 2, RECHECK), (120, 3, CYCLE)]


def test_a_snapshot_of_the_wakeups_restores_the_same_queue() -> None:
    wakeups = Wakeups()
    wakeups.once(60, CYCLE)
    wakeups.workload(30, PROTECT, _run("a", 2))
    copy = Wakeups()
    copy.restore(wakeups.snapshot())
    assert copy.is_queued(CYCLE)
    copy.once(10, CYCLE)
    assert [copy.pop(), copy.pop()] == [(30, 2, PROTECT, "a", 2), (60, 1, CYCLE, "", 0)]
