"""A cluster's day, narrated: budgets, starts, the protected window, preemption, requeue, refusal."""

from __future__ import annotations

from ledger import events as ev
from ledger.codec import encode
from ledger.core import DecisionCore, Knobs
from ledger.events import validated
from tests.factories import Events


def run(core: DecisionCore, events: list[ev.Event]) -> list[ev.Event]:
    """Feed events, check every output is a valid, encodable event, return all outputs."""
    out: list[ev.Event] = []
    for e in events:
        for o in core.handle(e):
            validated(o)
            encode(o)
            out.append(o)
    return out


def of(out: list[ev.Event], cls: type[ev.Event]) -> list[ev.Event]:
    return [o for o in out if isinstance(o, cls)]


def two_teams(e: Events, gpus: int = 16) -> list[ev.Event]:
    return [
        e.capacity(0, gpus),
        e.node(0, "lab", 1.0, ("director",)),
        e.node(0, "lab/vision", 0.5, ("vision-pi",)),
        e.node(0, "lab/text", 0.5, ("text-pi",)),
    ]


def test_morning_two_teams_share_a_small_cluster_and_time_slice_after_protection() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    # 08:00 vision fills both hosts with two one-hour protected jobs
    out = run(core, [*two_teams(e), e.submit(1, "v1", "lab/vision"), e.submit(1, "v2", "lab/vision")])
    started = of(out, ev.WorkloadStarted)
    assert [s.workload_id for s in started] == ["v1", "v2"]  # type: ignore[attr-defined]
    assert {s.nodes for s in started} == {("lab-n000",), ("lab-n001",)}  # type: ignore[attr-defined]
    # 08:10 text submits: both vision jobs are protected, so text waits; nothing is preempted
    out = run(core, [e.submit(10, "t1", "lab/text")])
    assert out == []
    assert core.waiting() == ["t1"]
    # 08:45 both vision jobs write a checkpoint
    assert run(core, [e.checkpoint(45, "v1", progress_s=44 * 60), e.checkpoint(45, "v2", progress_s=44 * 60)]) == []
    # 09:01 the protected windows end; text is under-served, vision ranks after it: one vision job yields
    out = core.advance(to_minutes(61))
    pre = of(out, ev.WorkloadPreempted)
    assert len(pre) == 1 and pre[0].preempted_by == "t1"  # type: ignore[attr-defined]
    assert of(out, ev.WorkloadRequeued)[0].workload_id == pre[0].workload_id  # type: ignore[attr-defined]
    start = of(out, ev.WorkloadStarted)[0]
    assert start.workload_id == "t1"  # type: ignore[attr-defined]
    decision = next(d for d in of(out, ev.SchedulingDecision) if d.action == "preempt")  # type: ignore[attr-defined]
    assert decision.for_workload == "t1" and "would still rank at or ahead" in decision.reason  # type: ignore[attr-defined]
    start = next(d for d in of(out, ev.SchedulingDecision) if d.action == "start")  # type: ignore[attr-defined]
    # enough for `explain`: where, why, the budget's ratio and the place in the queue
    assert start.nodes == pre_nodes(out) and start.queue_position == 1  # type: ignore[attr-defined]
    assert start.budget_ratio is not None and start.budget_ratio < 0.01  # type: ignore[attr-defined]
    assert "lab/text has used 0% of its allocation" in start.reason  # type: ignore[attr-defined]


def test_a_budget_with_a_share_of_0_is_told_as_such_when_it_starts() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    # guests get a share of 0, and so do visitors, a branch with one team of its own below it
    tree = [*two_teams(e, gpus=24), e.node(0, "lab/guest", 0.0), e.node(0, "lab/visitors", 0.0),
            e.node(0, "lab/visitors/ada", 1.0)]  # fmt: skip
    # 08:01 nothing else waits: the guest's job and ada's start on the free hosts, protected for an hour
    out = run(core, [*tree, e.submit(1, "g1", "lab/guest"), e.submit(1, "a1", "lab/visitors/ada")])
    starts = {d.workload_id: d for d in of(out, ev.SchedulingDecision) if d.action == "start"}  # type: ignore[attr-defined]
    assert sorted(starts) == ["a1", "g1"]
    assert starts["g1"].budget_ratio is None  # type: ignore[attr-defined]  # no ratio to show: no allocation
    assert starts["g1"].reason == (  # type: ignore[attr-defined]
        "lab/guest has a share of 0: it has no allocation, so it ranks after the budgets beside it that have a "
        "share; first in the fair-share order among work that fits; protected for 1h; placed on lab-n000"
    )
    assert starts["a1"].reason == (  # type: ignore[attr-defined]
        "lab/visitors/ada is under lab/visitors, which has a share of 0: it has no allocation, and lab/visitors "
        "ranks after the budgets beside it that have a share; first in the fair-share order among work that "
        "fits; protected for 1h; placed on lab-n001"
    )
    assert not any("no allocation of its allocation" in d.reason for d in starts.values())  # type: ignore[attr-defined]


def test_a_budget_with_a_share_of_0_is_told_as_such_when_its_run_is_preempted() -> None:
    for strategy in ("final-share", "instant"):
        e = Events()
        core = DecisionCore(Knobs(preemption_strategy=strategy), "lab")
        # 08:01 the cluster is idle: the guest's job (a share of 0) takes the one host; it checkpoints at 08:50
        tree = [e.capacity(0, 8), e.node(0, "lab", 1.0), e.node(0, "lab/text", 1.0), e.node(0, "lab/guest", 0.0)]
        run(core, [*tree, e.submit(1, "g1", "lab/guest"), e.checkpoint(50, "g1", progress_s=49 * 60)])
        # 08:30 text submits; at 09:01 the guest's protected hour is over and text takes the host
        run(core, [e.submit(30, "t1", "lab/text")])
        out = core.advance(to_minutes(61))
        decision = next(d for d in of(out, ev.SchedulingDecision) if d.action == "preempt")  # type: ignore[attr-defined]
        assert decision.workload_id == "g1" and decision.for_workload == "t1"  # type: ignore[attr-defined]
        assert "lab/guest (no allocation" in decision.reason, strategy  # type: ignore[attr-defined]
        assert "no allocation of its allocation" not in decision.reason, strategy  # type: ignore[attr-defined]


def pre_nodes(out: list[ev.Event]) -> tuple[str, ...]:
    """Return the hosts of the preempt decision in ``out``."""
    return next(d.nodes for d in of(out, ev.SchedulingDecision) if d.action == "preempt")  # type: ignore[attr-defined]


def test_a_manager_of_another_team_cannot_change_a_share() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, two_teams(e))
    refused = run(core, [e.allocate(5, "lab/vision", 0.9, set_by="text-pi")])
    assert len(refused) == 1 and isinstance(refused[0], ev.AllocationRefused)
    assert "text-pi manages neither lab/vision" in refused[0].reason
    assert core.tree.nodes["lab/vision"].share == 0.5
    # the director manages an ancestor: accepted, and applying it twice changes nothing
    ok = e.allocate(6, "lab/vision", 0.75, set_by="director")
    assert run(core, [ok, ok]) == []
    assert core.tree.nodes["lab/vision"].share == 0.75
    assert abs(core.tree.fraction("lab/vision") - 0.6) < 1e-12


def to_minutes(m: float) -> int:
    from tests.factories import at

    return ev.to_us(at(m))
