"""The replay driver's clock: it jumps from one moment that matters to the next, missing none, repeating none."""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.core import DecisionCore
from ledger.core.knobs import Knobs
from ledger.events import (
    CheckpointWritten,
    ClusterCapacityChanged,
    Event,
    WorkloadCompleted,
    WorkloadPreempted,
    WorkloadStarted,
    to_us,
    validated,
)
from ledger.replay.driver import ReplayDriver
from tests.factories import at
from tests.replay.helpers import H, drive, lab, of, submit

US = 1_000_000


def test_a_lone_training_run_checkpoints_on_schedule_and_completes_once() -> None:
    events, _ = drive(lab(), [submit(0, "train", "a", 16, 3 * H + 600, interval_s=H)])
    (start,) = of(events, "train", "WorkloadStarted")
    assert start.time == at(0)
    ckpts = of(events, "train", "CheckpointWritten")
    assert [(c.time, c.progress_s) for c in ckpts] == [(at(60), H), (at(120), 2 * H), (at(180), 3 * H)]
    (done,) = of(events, "train", "WorkloadCompleted")
    assert (done.time, done.outcome) == (at(190), "succeeded")


def test_a_workload_that_never_checkpoints_just_completes() -> None:
    events, _ = drive(lab(), [submit(5, "dbg", "a", 1, 300, min_runtime_s=600, resumable=False)])
    assert [e.type_name for e in of(events, "dbg") if e.type_name != "SchedulingDecision"] == [
        "WorkloadSubmitted",
        "WorkloadStarted",
        "WorkloadCompleted",
    ]
    assert of(events, "dbg", "WorkloadCompleted")[0].time == at(10)


def test_preempted_resumable_work_resumes_from_its_last_checkpoint_after_paying_the_restart() -> None:
    # Team a fills the cluster; its protection ends after 1 h; team b (unserved) arrives at 1 h 45.
    a = submit(0, "a-long", "a", 16, 10 * H, interval_s=1800, restart_s=600)
    b = submit(105, "b-burst", "b", 16, H)
    events, _ = drive(lab(), [a, b])
    (pre,) = of(events, "a-long", "WorkloadPreempted")
    assert pre.time == at(105) and pre.preempted_by == "b-burst"
    assert len(of(events, "a-long", "WorkloadRequeued")) == 1
    ckpts = of(events, "a-long", "CheckpointWritten")
    before = [c for c in ckpts if c.time <= pre.time]
    assert [c.progress_s for c in before] == [1800, 3600, 5400]  # at 30, 60, 90 min: 15 min of work is lost
    starts = of(events, "a-long", "WorkloadStarted")
    assert [s.attempt for s in starts] == [1, 2]
    restart = starts[1].time
    assert restart == at(165)  # when b-burst completes
    after = [c for c in ckpts if c.time > pre.time]
    # productive work resumes 10 min after the restart, from progress 5400
    assert after[0].progress_s == 7200 and after[0].time == restart + timedelta(seconds=600 + 1800)
    (done,) = of(events, "a-long", "WorkloadCompleted")
    assert done.time == restart + timedelta(seconds=600 + 10 * H - 5400)
    # what was thrown away: GPUs x (time since the last checkpoint) = 16 x 15 min, plus 16 x the restart
    assert (pre.time - before[-1].time) == timedelta(minutes=15)


def test_a_preempted_non_resumable_workload_is_cancelled_and_never_simulated_again() -> None:
    a = submit(0, "a-once", "a", 16, 10 * H, resumable=False)
    b = submit(105, "b-burst", "b", 16, H)
    events, _ = drive(lab(), [a, b])
    outcomes = [e.outcome for e in of(events, "a-once", "WorkloadCompleted")]
    assert outcomes == ["cancelled"]
    assert len(of(events, "a-once", "WorkloadStarted")) == 1
    assert of(events, "a-once", "CheckpointWritten") == []


def _random_trace(seed: int) -> list:  # type: ignore[type-arg]
    rng = random.Random(seed)
    subs = []
    for i in range(60):
        resumable = rng.random() < 0.8
        subs.append(
            submit(
                rng.randrange(0, 24 * 60),
                f"w{i:02d}",
                rng.choice("ab"),
                rng.choice((1, 2, 4, 8, 8, 16)),
                rng.randrange(600, 8 * H),
                min_runtime_s=rng.choice((0, 900, H, 2 * H)),
                resumable=resumable,
                interval_s=rng.choice((0, 900, 1800)) if resumable else 0,
                restart_s=rng.randrange(0, 600),
            )
        )
    return subs


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000))
@example(seed=3)  # busy enough to preempt dozens of times, so resumed attempts are checked too
def test_every_simulated_moment_happens_exactly_once_in_order_and_nothing_happens_between_steps(seed: int) -> None:
    subs = _random_trace(seed)
    events, core = drive(lab(32), subs, Knobs(max_min_runtime_s=H))
    times = [to_us(e.time) for e in events]
    assert times == sorted(times), "events leave the driver in time order"
    assert len({e.event_id for e in events}) == len(events), "no event twice"
    steps = set(core.steps)
    assert {to_us(e.time) for e in events} <= steps, "every event happens at a moment the clock stepped to"
    assert all(validated(e) == e for e in events), "the driver's and the core's events are valid"
    hints = {s.workload_id: s for s in subs}
    for wid, sub in hints.items():
        mine = [e for e in events if getattr(e, "workload_id", None) == wid]
        seen = [
            (e.type_name, to_us(e.time), e.progress_s if isinstance(e, CheckpointWritten) else sub.work_s)
            for e in mine
            if isinstance(e, CheckpointWritten) or (isinstance(e, WorkloadCompleted) and e.outcome == "succeeded")
        ]
        # rebuild, from the starts and stops alone, every checkpoint and the completion the driver owed
        owed: list[tuple[str, int, int]] = []
        pending: list[tuple[str, int, int]] = []
        progress = 0
        for e in mine:
            if isinstance(e, WorkloadStarted):
                restart = sub.restart_s if e.attempt > 1 else 0
                progress = progress if sub.resumable else 0
                origin = to_us(e.time) + (restart - progress) * US
                p = progress
                while sub.checkpoint_interval_s and p + sub.checkpoint_interval_s < sub.work_s:
                    p += sub.checkpoint_interval_s
                    pending.append(("CheckpointWritten", origin + p * US, p))
                pending.append(("WorkloadCompleted", origin + sub.work_s * US, sub.work_s))
            elif isinstance(e, WorkloadPreempted | WorkloadCompleted) and pending:
                stop = to_us(e.time)
                # what fell before the stop happened; at the very moment of the stop either order is fair
                kept = [x for x in pending if x[1] < stop or (x[1] == stop and x in seen)]
                owed += kept
                progress = max([progress, *(x[2] for x in kept if x[0] == "CheckpointWritten")])
                pending = []
        assert not pending, f"{wid} was still running when the replay ended"
        assert seen == owed, wid  # every owed moment exactly once, in order, and nothing else


def test_a_backlog_longer_than_the_safety_margin_is_replayed_to_its_end() -> None:
    # Twelve 16-GPU jobs of 10 days each, all submitted at once on a 16-GPU cluster: the work alone needs
    # 120 days after the last submission (Philly's jobs replayed on a smaller cluster are such a backlog).
    # A stop 90 days after the last input cut the replay with three jobs unfinished; the margin is now
    # counted past the time the whole cluster needs for the work submitted.
    from ledger.core import DecisionCore
    from ledger.replay.driver import ReplayDriver

    out: list = []
    budgets = lab()
    driver = ReplayDriver(DecisionCore(Knobs(), budgets.cluster), budgets.cluster, out.extend)
    driver.feed(budgets.events(at(0)))
    driver.feed([submit(0, f"j{i}", "a", 16, 10 * 86_400) for i in range(12)])
    stats = driver.run()
    assert stats.stopped_at is None and not stats.unfinished
    done = [e for e in out if isinstance(e, WorkloadCompleted)]
    assert len(done) == 12 and max(e.time for e in done) == at(120 * 24 * 60)


def test_a_replay_whose_waiting_work_can_never_start_ends_naming_it_not_as_all_work_done() -> None:
    # A 16-GPU lab shrinks to 8 GPUs at 00:05; at 00:10 team a asks for all 16, team b for 8 for an
    # hour. b runs and completes; nothing is left to happen, and a's job still waits for GPUs the
    # cluster no longer has. The replay ends there, but it must not say every workload completed.
    budgets = lab(16)
    shrink = ClusterCapacityChanged(event_id="lab/shrink", cluster="lab", time=at(5), gpus=8, gpus_per_node=8)
    core = DecisionCore(Knobs(), "lab")
    out: list[Event] = []
    driver = ReplayDriver(core, "lab", out.extend)
    driver.feed(budgets.events(at(0)))
    driver.feed([shrink, submit(10, "a-wide", "a", 16, H), submit(10, "b-host", "b", 8, H)])
    stats = driver.run()
    assert [d.outcome for d in of(out, "b-host", "WorkloadCompleted")] == ["succeeded"]
    assert not of(out, "a-wide", "WorkloadStarted")
    assert stats.stopped_at is None  # no limit was reached: the replay ran out of things to happen
    assert stats.unfinished == {"a-wide": 0}
