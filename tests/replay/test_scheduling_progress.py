"""The progress rules told as small months: nothing preempted as it completes, no swap that swaps back, an end."""

from __future__ import annotations

from datetime import timedelta

from ledger.core.knobs import Knobs
from ledger.events import Event
from tests.replay.helpers import H, drive, lab, of, submit


def _preemptions(events: list[Event]) -> list[Event]:
    return [e for e in events if type(e).__name__ == "WorkloadPreempted"]


def test_a_job_whose_work_equals_its_145_s_protection_completes_and_is_never_preempted_as_it_completes() -> None:
    # A full 8-GPU host; team a's 1-GPU jobs do exactly 145 s of work under a 145 s minimum runtime,
    # restarts cost 300 s; team b keeps a queue of the same jobs waiting.
    subs = [
        submit(0, f"a{i}", "a", 1, 145, min_runtime_s=145, restart_s=300) for i in range(8)
    ] + [submit(1, f"b{i}", "b", 1, 145, min_runtime_s=145, restart_s=300) for i in range(8)]
    for knobs in (Knobs(), Knobs(preemption_strategy="instant")):
        events, _ = drive(lab(8), subs, knobs)
        for s in subs:
            done = of(events, s.workload_id, "WorkloadCompleted")
            assert [d.outcome for d in done] == ["succeeded"], s.workload_id  # completed once, not rerun
            assert not of(events, s.workload_id, "WorkloadPreempted"), s.workload_id


def test_a_restart_dearer_than_the_protection_is_covered_and_repeated_preemption_stops_at_the_bound() -> None:
    # Two teams' long runs that never checkpoint, on one host, each with a queue behind it: under the
    # literal rule a run preempted at every 145 s protection end while it still restores would never end.
    knobs_list = (Knobs(), Knobs(preemption_strategy="instant"))
    subs = [submit(m, f"{t}{m}", t, 8, 2 * H, min_runtime_s=145, restart_s=300) for m in (0, 1, 2) for t in "ab"]
    for knobs in knobs_list:
        events, _ = drive(lab(8), subs, knobs)
        for s in subs:
            assert len(of(events, s.workload_id, "WorkloadCompleted")) == 1
            assert len(of(events, s.workload_id, "WorkloadPreempted")) <= knobs.max_preemptions
            starts = of(events, s.workload_id, "WorkloadStarted")
            for start in starts[1:]:  # a restart is protected for its 300 s restore on top of the minimum runtime
                assert (start.protected_until - start.time).total_seconds() >= 145 + 300


def test_two_teams_standing_level_do_not_trade_gpus_back_and_forth_under_final_share() -> None:
    # Equal shares, equal work: both teams stand at about the same ratio all day long.
    subs = [submit(m * 10, f"{t}{m}", t, 8, 3 * H, min_runtime_s=1800, interval_s=600, restart_s=60)
            for m in range(6) for t in "ab"]
    final, _ = drive(lab(16), subs, Knobs())
    instant, _ = drive(lab(16), subs, Knobs(preemption_strategy="instant"))
    assert len(_preemptions(final)) < len(_preemptions(instant))
    reasons = [e.reason for e in final if type(e).__name__ == "SchedulingDecision" and e.action == "preempt"]
    assert all("after the swap" in r and "would still rank at or ahead of" in r for r in reasons)


def test_an_allocated_request_takes_the_room_kept_from_free_fill_instead_of_evicting_it() -> None:
    # 16 GPUs. Team a's 8-GPU run holds one host for an hour; eight 1-GPU fill jobs arrive at once;
    # ten minutes later team b asks for 4 GPUs for half an hour.
    subs = [submit(0, "a-run", "a", 8, H, min_runtime_s=1800)]
    subs += [submit(1, f"fill{i}", "a", 1, 2 * H, min_runtime_s=0, interval_s=600) for i in range(8)]
    subs.append(submit(10, "b-run", "b", 4, 1800, min_runtime_s=1800))
    kept, _ = drive(lab(16), subs, Knobs(fill_headroom=0.25))  # 4 of the 16 GPUs kept from fill
    filled, _ = drive(lab(16), subs, Knobs(fill_headroom=0.0))

    b_start = of(kept, "b-run", "WorkloadStarted")[0]
    assert b_start.time == subs[-1].time and not _preemptions(kept)  # b starts at once in the kept room
    assert len(_preemptions(filled)) == 4  # without the headroom fill took every GPU and b evicts four
    # once no allocated work runs or waits the headroom is not kept: every fill job starts and ends
    for i in range(8):
        assert [d.outcome for d in of(kept, f"fill{i}", "WorkloadCompleted")] == ["succeeded"]
    assert of(kept, "fill7", "WorkloadStarted")[0].time >= of(kept, "a-run", "WorkloadCompleted")[0].time


def test_a_first_run_is_protected_its_minimum_runtime_only_and_a_restart_also_its_restore() -> None:
    # One 8-GPU host. Team a's job (1 h minimum runtime, 10 min restarts, hourly checkpoints) starts
    # at once; team b's job arrives at 00:30 and takes the host when a's first hour is over. a's
    # first run restores nothing, so it is protected 1 h, not 1 h 10 min; its second run, after one
    # preemption, 2 h plus the 10 min restore.
    subs = [
        submit(0, "a-job", "a", 8, 4 * H, interval_s=H // 2, restart_s=600),
        submit(30, "b-job", "b", 8, 2 * H, interval_s=H // 2, restart_s=600),
    ]
    events, _ = drive(lab(8), subs, Knobs())
    first, second = of(events, "a-job", "WorkloadStarted")
    assert (first.protected_until - first.time).total_seconds() == H
    assert (second.protected_until - second.time).total_seconds() == 2 * H + 600
    b_start = of(events, "b-job", "WorkloadStarted")[0]
    assert b_start.time == first.time + timedelta(hours=1)  # b takes the host when a's hour is up


def test_a_start_decision_says_the_protected_window_the_run_gets() -> None:
    # The same two jobs: a's first start is protected its 1 h minimum runtime; after one preemption
    # its restart is protected twice that plus its 10 min restore, and the decision says 130m, as the
    # start it records does (it said 1h, the minimum runtime, whatever the run actually got).
    subs = [
        submit(0, "a-job", "a", 8, 4 * H, interval_s=H // 2, restart_s=600),
        submit(30, "b-job", "b", 8, 2 * H, interval_s=H // 2, restart_s=600),
    ]
    events, _ = drive(lab(8), subs, Knobs())
    decisions = [d for d in of(events, "a-job", "SchedulingDecision") if d.action == "start"]
    starts = of(events, "a-job", "WorkloadStarted")
    assert [(s.protected_until - s.time).total_seconds() for s in starts] == [H, 2 * H + 600]
    assert ["protected for 1h;" in decisions[0].reason, "protected for 130m;" in decisions[1].reason] == [True, True]
