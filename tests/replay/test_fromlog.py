"""Replaying an event log: the hints a submission lacks are derived from what the log saw happen."""

from __future__ import annotations

from pathlib import Path

from ledger.events import WorkloadSubmitted
from ledger.log import EventLog
from ledger.replay.fromlog import load_log
from tests.replay.helpers import H, drive, lab, submit


def _strip(sub: WorkloadSubmitted) -> WorkloadSubmitted:
    return sub.model_copy(update={"work_s": None, "checkpoint_interval_s": None, "restart_s": None})


def test_hints_derived_from_a_log_give_back_the_work_cadence_and_restart(tmp_path: Path) -> None:
    subs = [
        submit(0, "a-long", "a", 16, 10 * H, interval_s=1800, restart_s=600),
        submit(105, "b-burst", "b", 16, H),
        submit(110, "b-dbg", "b", 1, 300, min_runtime_s=600, resumable=False),
    ]
    events, _ = drive(lab(), subs)
    assert any(e.type_name == "WorkloadPreempted" for e in events), "a-long is preempted once and resumes"
    # the log as an outside scheduler would have written it: facts, but submissions without hints
    bare = [_strip(e) if isinstance(e, WorkloadSubmitted) else e for e in events]
    log = EventLog(tmp_path / "events")
    log.append(bare)
    log.close()
    inputs = load_log(tmp_path)
    derived = {e.workload_id: e for e in inputs.inputs if isinstance(e, WorkloadSubmitted)}
    for sub in subs:
        got = derived[sub.workload_id]
        assert (got.work_s, got.checkpoint_interval_s, got.restart_s) == (
            sub.work_s,
            sub.checkpoint_interval_s,
            sub.restart_s,
        ), sub.workload_id
    assert "3 of 3 submissions" in inputs.notes[0]
    # and only outside facts are fed again: no decisions, starts or checkpoints
    assert {e.type_name for e in inputs.inputs} == {"WorkloadSubmitted"}
    assert {e.type_name for e in inputs.setup} == {"ClusterCapacityChanged", "BudgetNodeDefined"}


def test_a_workload_that_never_started_gets_its_minimum_runtime_as_work(tmp_path: Path) -> None:
    from ledger.replay.fromlog import _Seen, derive_hints

    sub = _strip(submit(0, "w", "a", 8, 1, min_runtime_s=1800))
    assert derive_hints(sub, _Seen(), 0) == (1800, 0, 0)
    unallocated = _strip(submit(0, "w", "a", 8, 1, min_runtime_s=0))
    assert derive_hints(unallocated, _Seen(), 0)[0] == 3600
