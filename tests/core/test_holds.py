"""A wide run gathers its hosts: the head of the fair-share order holds hosts while fill soaks them.

Four hosts of 8 GPUs, two teams with equal shares. Team b fills the cluster with runs protected an
hour, started ten minutes apart; team a, which has used nothing, then asks for 16 GPUs (two whole
hosts). It stands first in the fair-share order but can neither start (no free room) nor preempt
(everything is protected), so the core holds the two hosts whose protected windows end first.
"""

from __future__ import annotations

import pickle
from datetime import timedelta

from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from ledger.core.contract import hold_span_s, start_bound
from tests.core.test_day import of, run
from tests.factories import Events, at


def _cluster(e: Events, gpus: int = 32) -> list[ev.Event]:
    return [
        e.capacity(0, gpus),
        e.node(0, "lab", 1.0, ("director",)),
        e.node(0, "lab/a", 0.5),
        e.node(0, "lab/b", 0.5),
    ]


def _decisions(out: list[ev.Event], action: str) -> list[ev.SchedulingDecision]:
    return [d for d in of(out, ev.SchedulingDecision) if d.action == action]  # type: ignore[attr-defined]


def _started(out: list[ev.Event]) -> dict[str, ev.WorkloadStarted]:
    return {s.workload_id: s for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]


def _morning(e: Events, core: DecisionCore) -> dict[str, tuple[str, ...]]:
    """08:00-08:30: team b takes every host with runs protected 60, 60, 60 and 240 minutes."""
    out = run(core, [
        *_cluster(e),
        e.submit(0, "b1", "lab/b", gpus=8, min_runtime_s=3600),
        e.submit(10, "b2", "lab/b", gpus=8, min_runtime_s=3600),
        e.submit(20, "b3", "lab/b", gpus=8, min_runtime_s=3600),
        e.submit(30, "b4", "lab/b", gpus=8, min_runtime_s=4 * 3600),
    ])
    return {wid: s.nodes for wid, s in _started(out).items()}  # type: ignore[attr-defined]


def test_a_wide_run_gathers_its_hosts_while_fill_and_short_work_soak_them() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    where = _morning(e, core)
    # 08:35 team a asks for two whole hosts: first in the order, no room, nothing past its protection
    out = run(core, [e.submit(35, "wide", "lab/a", gpus=16, min_runtime_s=2 * 3600)])
    [hold] = _decisions(out, "hold")
    assert hold.workload_id == "wide"  # type: ignore[attr-defined]
    # the hosts whose protected windows end first: b1's (09:00) and b2's (09:10)
    assert set(hold.nodes) == set(where["b1"] + where["b2"])  # type: ignore[attr-defined]
    assert hold.effective_time == at(70)  # type: ignore[attr-defined]
    assert "holding 2 hosts for wide (16 GPUs) until 2026-03-02 01:10 UTC" in hold.reason  # type: ignore[attr-defined]
    assert "when the last protected window on them ends" in hold.reason  # type: ignore[attr-defined]
    # 08:45 b1 finishes early: its held host is free, but team b's next hour-long run may not start there
    out = run(core, [e.complete(45, "b1"), e.submit(46, "b-long", "lab/b", gpus=8, min_runtime_s=3600)])
    assert "b-long" in core.waiting() and not of(out, ev.WorkloadStarted)
    # a 15-minute run ends its protection by 09:10: it may soak the held host, and free fill beside it
    out = run(core, [
        e.submit(47, "b-short", "lab/b", gpus=4, min_runtime_s=15 * 60),
        e.submit(48, "fill", "lab/a", gpus=4, min_runtime_s=0),
    ])
    started = _started(out)
    assert started["b-short"].nodes == where["b1"] and started["fill"].nodes == where["b1"]  # type: ignore[attr-defined]
    assert started["b-short"].protected_until == at(62)  # type: ignore[attr-defined]
    assert started["fill"].protected_until == at(48)  # free fill: no protected window at all
    soak = next(d for d in _decisions(out, "start") if d.workload_id == "b-short")  # type: ignore[attr-defined]
    assert "held for wide until 2026-03-02 01:10 UTC: its protected window ends by then" in soak.reason  # type: ignore[attr-defined]
    # 09:10 the hold's time: b2 is past its protection, and so are b-short and the fill: all make way
    out = core.advance(ev.to_us(at(70)))
    preempted = {p.workload_id for p in of(out, ev.WorkloadPreempted)}  # type: ignore[attr-defined]
    assert preempted == {"b2", "b-short", "fill"}
    assert all(p.preempted_by == "wide" for p in of(out, ev.WorkloadPreempted))  # type: ignore[attr-defined]
    assert set(_started(out)["wide"].nodes) == set(where["b1"] + where["b2"])  # type: ignore[attr-defined]
    start = next(d for d in _decisions(out, "start") if d.workload_id == "wide")  # type: ignore[attr-defined]
    assert "on the hosts held for it since 2026-03-02 00:35 UTC (35m)" in start.reason  # type: ignore[attr-defined]
    # b2, requeued, needs one host only: it waits under the rules of a single host's room, no hold
    assert core.hold is None and not any(h.held for h in core.hosts.hosts)
    # the wait stayed within the stated bound
    assert timedelta(minutes=70 - 35) <= timedelta(seconds=hold_span_s(Knobs())) < start_bound(Knobs())


def test_the_hold_stays_with_its_holder_when_the_head_changes_and_the_next_head_gets_the_next_hold() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [
        e.capacity(0, 32), e.node(0, "lab", 1.0), e.node(0, "lab/a", 1.0), e.node(0, "lab/b", 1.0),
        e.node(0, "lab/c", 1.0),
        e.submit(0, "c1", "lab/c", gpus=8, min_runtime_s=3600),
        e.submit(10, "c2", "lab/c", gpus=8, min_runtime_s=3600),
        e.submit(20, "c3", "lab/c", gpus=8, min_runtime_s=3600),
        e.submit(30, "c4", "lab/c", gpus=8, min_runtime_s=3600),
    ])
    # 08:35 a's wide run is the head and is granted the hold on c1's and c2's hosts (until 09:10)
    out = run(core, [e.submit(35, "wa", "lab/a", gpus=16, min_runtime_s=3600)])
    assert [d.workload_id for d in _decisions(out, "hold")] == ["wa"]  # type: ignore[attr-defined]
    # 08:40 team a runs a small job elsewhere? no room: instead team a is charged by an hour-long run
    # of a host that frees early: c3 completes and a's debug run takes its host, so b now stands first
    out = run(core, [e.complete(40, "c3"), e.submit(40, "a-debug", "lab/a", gpus=8, min_runtime_s=3600)])
    assert "a-debug" in _started(out)
    out = run(core, [e.submit(41, "wb", "lab/b", gpus=16, min_runtime_s=3600)])
    assert core.fair_share_order()[1] == "lab/b"  # b (nothing used) now ranks ahead of a
    # the head changed, the hold did not: no second hold while the first stands
    assert not _decisions(out, "hold") and core.hold is not None and core.hold.wid == "wa"
    # 09:10 the hold's time: wa starts on its held hosts, and wb is granted the next hold at once
    out = core.advance(ev.to_us(at(70)))
    assert "wa" in _started(out)
    [nxt] = _decisions(out, "hold")
    assert nxt.workload_id == "wb"  # type: ignore[attr-defined]
    assert core.hold is not None and core.hold.wid == "wb"


def test_a_hold_is_dropped_when_a_held_host_fails_and_when_its_holder_starts_elsewhere() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    where = _morning(e, core)
    run(core, [e.submit(35, "wide", "lab/a", gpus=16, min_runtime_s=2 * 3600)])
    assert core.hold is not None and core.hosts.names(core.hold.hosts) == where["b1"] + where["b2"]
    # 08:40 b1's host fails: b1 is preempted at once, the hold is dropped and granted afresh on the
    # hosts left, b2's and b3's (until 09:20, when b3's window ends)
    out = run(core, [e.host(40, where["b1"][0], "failed")])
    [again] = _decisions(out, "hold")
    assert again.workload_id == "wide" and again.nodes == where["b2"] + where["b3"]  # type: ignore[attr-defined]
    assert again.effective_time == at(80)  # type: ignore[attr-defined]
    # 08:45 the host is back and b4 completes, at the same instant: two whole hosts free outside the
    # hold, and the holder, first in the order, starts there at once; the hold is dropped
    core.handle(e.host(45, where["b1"][0], "healthy"), decide=False)
    out = core.handle(e.complete(45, "b4"))
    assert set(_started(out)["wide"].nodes) == set(where["b1"] + where["b4"])  # type: ignore[attr-defined]
    assert core.hold is None or core.hold.wid != "wide"
    assert not any(h.held for h in core.hosts.hosts if core.hold is None or h.index not in core.hold.hosts)


def test_free_fill_is_preempted_at_once_by_any_allocated_request() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    out = run(core, [*_cluster(e, 8), e.submit(0, "fill", "lab/a", gpus=8, min_runtime_s=0)])
    assert _started(out)["fill"].protected_until == at(0)  # type: ignore[attr-defined]
    # half a minute later an allocated debug run arrives: the fill makes way at that instant
    out = run(core, [e.submit(0.5, "debug", "lab/b", gpus=8, min_runtime_s=600)])
    assert [(p.workload_id, p.time) for p in of(out, ev.WorkloadPreempted)] == [("fill", at(0.5))]  # type: ignore[attr-defined]
    assert _started(out)["debug"].time == at(0.5)


def test_a_restored_core_keeps_its_hold_and_decides_the_same() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    _morning(e, core)
    run(core, [e.submit(35, "wide", "lab/a", gpus=16, min_runtime_s=2 * 3600)])
    copy = DecisionCore.restore(core.snapshot())
    assert copy.hold == core.hold and [h.held for h in copy.hosts.hosts] == [h.held for h in core.hosts.hosts]
    later = [e.complete(45, "b1"), e.submit(47, "b-short", "lab/b", gpus=4, min_runtime_s=15 * 60)]
    assert pickle.dumps(run(core, later)) == pickle.dumps(run(copy, later))
    assert pickle.dumps(core.advance(ev.to_us(at(70)))) == pickle.dumps(copy.advance(ev.to_us(at(70))))


def test_a_hold_at_now_is_granted_only_once_the_waiter_has_waited_a_holds_span() -> None:
    # Cap 1 h, so a hold's span is an hour. Teams a and b each run two 8-GPU hosts, protected five
    # minutes; at 00:10 a asks for two whole hosts. b's hosts are past protection, so room for it is
    # there "now", but the final-share test refuses the swap (a, charged its hour on 16 GPUs, would
    # rank behind b), and both teams' usage then grows alike: it never allows it.
    e = Events()
    knobs = Knobs(max_min_runtime_s=3600)
    core = DecisionCore(knobs, "lab")
    run(core, [
        *_cluster(e),
        e.submit(0, "b1", "lab/b", gpus=8, min_runtime_s=300, resumable=False),
        e.submit(0, "b2", "lab/b", gpus=8, min_runtime_s=300, resumable=False),
        e.submit(1, "a1", "lab/a", gpus=8, min_runtime_s=300, resumable=False),
        e.submit(1, "a2", "lab/a", gpus=8, min_runtime_s=300, resumable=False),
    ])
    out = run(core, [e.submit(10, "wide", "lab/a", gpus=16, min_runtime_s=3600)])
    # no hold that would preempt at the instant of its grant, with no swap test
    assert not _decisions(out, "hold") and "wide" in core.waiting()
    out = core.advance(ev.to_us(at(69)))
    assert not _decisions(out, "hold") and not _decisions(out, "preempt") and "wide" in core.waiting()
    # 01:10: it has waited a hold's span, so it is held for at "now" after all and takes b's hosts
    assert hold_span_s(knobs) == 3600
    out = core.advance(ev.to_us(at(71)))
    [hold] = _decisions(out, "hold")
    assert hold.effective_time == hold.time == at(70)  # type: ignore[attr-defined]
    assert "until now: the runs there are past their protected windows, and it has waited 1h" in hold.reason  # type: ignore[attr-defined]
    assert {p.workload_id for p in of(out, ev.WorkloadPreempted)} == {"b1", "b2"}  # type: ignore[attr-defined]
    assert "wide" in _started(out)
