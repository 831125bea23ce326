"""A protected window ends at 10:00 while an under-served team waits: the swap happens at 10:00:00 sharp."""

from __future__ import annotations

from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from tests.core.test_day import of, run, to_minutes
from tests.factories import Events, at

TEN = 10 * 60  # 10:00 in minutes from midnight


def _morning(knobs: Knobs) -> tuple[DecisionCore, list[ev.Event]]:
    """One 8-GPU host; team a runs A from 08:00, protected for 2 h; team b's B waits from 08:30.

    A writes a checkpoint at 09:45 (resumable work is only preempted once it holds saved progress).
    At 09:59:30 team c's free-tier sweep arrives too (minimum runtime 0: it cannot preempt and
    waits) — an unrelated event just before A's protection ends.
    """
    e = Events()
    core = DecisionCore(knobs, "lab")
    setup = [
        e.capacity(0, 8),
        e.node(0, "lab", 1.0, ("director",)),
        e.node(0, "lab/a", 1.0),
        e.node(0, "lab/b", 1.0),
        e.node(0, "lab/c", 1.0),
    ]
    out = run(core, [*setup, e.submit(8 * 60, "A", "lab/a", gpus=8, min_runtime_s=2 * 3600)])
    assert [s.workload_id for s in of(out, ev.WorkloadStarted)] == ["A"]  # type: ignore[attr-defined]
    out = run(core, [e.submit(8 * 60 + 30, "B", "lab/b", gpus=8, min_runtime_s=3600)])
    assert out == [] and core.waiting() == ["B"]  # A is protected: B waits
    assert run(core, [e.checkpoint(9 * 60 + 45, "A", progress_s=105 * 60)]) == []
    out = run(core, [e.submit(TEN - 0.5, "sweep", "lab/c", gpus=8, min_runtime_s=0)])
    assert out == []
    return core, out


def test_b_preempts_a_at_the_exact_instant_as_protection_ends() -> None:
    core, _ = _morning(Knobs())
    # nothing happens a microsecond before the end of A's window
    assert core.advance(to_minutes(TEN) - 1) == []
    assert core.next_wakeup() == to_minutes(TEN)
    out = core.advance(to_minutes(TEN))
    pre = of(out, ev.WorkloadPreempted)
    assert [(p.workload_id, p.preempted_by, p.time) for p in pre] == [("A", "B", at(TEN))]  # type: ignore[attr-defined]
    started = of(out, ev.WorkloadStarted)
    assert [(s.workload_id, s.time) for s in started] == [("B", at(TEN))]  # type: ignore[attr-defined]
    # the reason quotes the two budgets compared: b has used nothing, a two hours of the host
    decision = next(d for d in of(out, ev.SchedulingDecision) if d.action == "preempt")  # type: ignore[attr-defined]
    assert "after the swap lab/b (2%" in decision.reason and "ahead of lab/a (" in decision.reason  # type: ignore[attr-defined]
    assert core.waiting() == ["A", "sweep"]  # A requeued (resumable), the sweep still waits


def test_a_preemption_cycle_postpones_the_swap_to_the_next_cycle() -> None:
    """With a 60 s cycle the walk that ran at 09:59:30 holds the next one back until 10:00:30."""
    core, _ = _morning(Knobs(preempt_cycle_s=60))
    assert of(core.advance(to_minutes(TEN)), ev.WorkloadPreempted) == []
    out = core.advance(to_minutes(TEN + 0.5))
    assert [(s.workload_id, s.time) for s in of(out, ev.WorkloadStarted)] == [("B", at(TEN + 0.5))]  # type: ignore[attr-defined]


def test_with_the_swap_margin_a_waiter_that_would_outrank_a_at_once_is_refused() -> None:
    """B asks for 8 h of protection: charged that, b would rank after a (16 GPU-hours used), so A keeps running."""
    e = Events()
    for margin, expect in ((True, []), (False, ["A"])):
        core = DecisionCore(Knobs(preemption_strategy="final-share" if margin else "instant"), "lab")
        setup = [e.capacity(0, 8), e.node(0, "lab", 1.0), e.node(0, "lab/a", 1.0), e.node(0, "lab/b", 1.0)]
        run(core, [*setup, e.submit(8 * 60, "A", "lab/a", gpus=8, min_runtime_s=2 * 3600)])
        run(core, [e.submit(8 * 60 + 30, "B", "lab/b", gpus=8, min_runtime_s=8 * 3600)])
        run(core, [e.checkpoint(9 * 60 + 45, "A", progress_s=105 * 60)])
        out = core.advance(to_minutes(TEN))
        assert [p.workload_id for p in of(out, ev.WorkloadPreempted)] == expect  # type: ignore[attr-defined]
        assert ("A" in core.running()) is margin


def test_the_reason_quotes_the_sibling_branches_where_the_paths_part() -> None:
    """Waiter in vision/r1, victim in text/r2: the walk compares lab/vision with lab/text, and so does the reason."""
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    setup = [
        e.capacity(0, 8),
        e.node(0, "lab", 1.0),
        e.node(0, "lab/text", 1.0),
        e.node(0, "lab/vision", 1.0),
        e.node(0, "lab/text/r2", 1.0),
        e.node(0, "lab/text/r3", 9.0),
        e.node(0, "lab/vision/r1", 1.0),
    ]
    run(core, [*setup, e.submit(60, "T", "lab/text/r2", gpus=8, min_runtime_s=3600)])
    run(core, [e.submit(70, "V", "lab/vision/r1", gpus=8, min_runtime_s=3600)])
    run(core, [e.checkpoint(110, "T", progress_s=50 * 60)])
    out = core.advance(to_minutes(120))
    decision = next(d for d in of(out, ev.SchedulingDecision) if d.action == "preempt")  # type: ignore[attr-defined]
    reason: str = decision.reason  # type: ignore[attr-defined]
    text = core.usage("lab/text")["ratio"]
    leaf = core.usage("lab/text/r2")["ratio"]
    assert leaf != text  # r2 holds a tenth of text's allocation: the leaves' ratios differ from the branches'
    assert "after the swap lab/vision (" in reason and "ahead of lab/text (" in reason
    assert "where lab/text/r2 and lab/vision/r1 part" in reason


def test_a_resumable_run_without_a_checkpoint_keeps_its_host_until_it_writes_one() -> None:
    """A never checkpoints before 10:00: preempting it then would throw away its whole run, so B waits.

    At 10:20 A writes its first checkpoint; from that instant it holds saved progress and yields to B.
    Under the former rule (``preempt_uncheckpointed``) A is preempted at 10:00 and loses two hours.
    """
    e = Events()
    for former in (False, True):
        core = DecisionCore(Knobs(preempt_uncheckpointed=former), "lab")
        setup = [e.capacity(0, 8), e.node(0, "lab", 1.0), e.node(0, "lab/a", 1.0), e.node(0, "lab/b", 1.0)]
        run(core, [*setup, e.submit(8 * 60, "A", "lab/a", gpus=8, min_runtime_s=2 * 3600)])
        run(core, [e.submit(8 * 60 + 30, "B", "lab/b", gpus=8, min_runtime_s=3600)])
        out = core.advance(to_minutes(TEN))
        if former:
            assert [(p.workload_id, p.time) for p in of(out, ev.WorkloadPreempted)] == [("A", at(TEN))]  # type: ignore[attr-defined]
            continue
        assert out == [] and core.waiting() == ["B"] and "A" in core.running()
        out = run(core, [e.checkpoint(TEN + 20, "A", progress_s=140 * 60)])
        assert [(p.workload_id, p.preempted_by, p.time) for p in of(out, ev.WorkloadPreempted)] == [  # type: ignore[attr-defined]
            ("A", "B", at(TEN + 20))
        ]
        assert [s.workload_id for s in of(out, ev.WorkloadStarted)] == ["B"]  # type: ignore[attr-defined]


def test_a_run_that_never_checkpoints_is_spared_no_longer_than_the_protection_cap() -> None:
    """A (from 08:00, protected 2 h) never writes a checkpoint: it is spared until 16:00, the 8 h cap from its start.

    A job cannot keep its GPUs for ever by never checkpointing: at 16:00 it is a victim like any
    other, and B, waiting since 08:30, preempts it then.
    """
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    setup = [e.capacity(0, 8), e.node(0, "lab", 1.0), e.node(0, "lab/a", 1.0), e.node(0, "lab/b", 1.0)]
    run(core, [*setup, e.submit(8 * 60, "A", "lab/a", gpus=8, min_runtime_s=2 * 3600)])
    run(core, [e.submit(8 * 60 + 30, "B", "lab/b", gpus=8, min_runtime_s=3600)])
    assert of(core.advance(to_minutes(16 * 60) - 1), ev.WorkloadPreempted) == []
    out = core.advance(to_minutes(16 * 60))
    assert [(p.workload_id, p.preempted_by, p.time) for p in of(out, ev.WorkloadPreempted)] == [  # type: ignore[attr-defined]
        ("A", "B", at(16 * 60))
    ]


def test_standings_that_cross_between_events_are_acted_on_within_the_standing_check() -> None:
    """One 8-GPU host, a : b = 1 : 1; a's 1-GPU run checkpoints hourly from 00:00; b's 8-GPU run waits from 00:10.

    Under final-share b may take the host once a, charged what it ran, stands at or above b charged
    the 8 GPU-hours of its protected hour: at 08:00, when a has run 8 GPU-hours. Nothing arrives
    then (checkpoints do not change standings), yet the swap is made by 08:01: a pass runs at least
    every ``standing_check_s`` while allocated work waits. With the check off, b still waits at 09:00.
    """
    e = Events()
    for check in (60, 0):
        core = DecisionCore(Knobs(standing_check_s=check), "lab")
        setup = [e.capacity(0, 8), e.node(0, "lab", 1.0), e.node(0, "lab/a", 1.0), e.node(0, "lab/b", 1.0)]
        run(core, [*setup, e.submit(0, "big", "lab/a", gpus=1, min_runtime_s=60)])
        run(core, [e.submit(10, "cl", "lab/b", gpus=8, min_runtime_s=3600)])
        started = []
        for hour in range(1, 10):
            out = core.advance(to_minutes(hour * 60) - 1)
            out += run(core, [e.checkpoint(hour * 60, "big", progress_s=hour * 3600)])
            started += [(s.workload_id, s.time) for s in of(out, ev.WorkloadStarted)]  # type: ignore[attr-defined]
        if check:
            assert len(started) == 1 and started[0][0] == "cl" and at(8 * 60) <= started[0][1] <= at(8 * 60 + 1)
        else:
            assert started == [] and core.waiting() == ["cl"]
