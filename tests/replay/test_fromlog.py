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


def test_a_logged_workload_wider_than_the_replayed_cluster_is_set_aside_and_named(tmp_path: Path) -> None:
    # A 16-GPU lab's log holds a 16-GPU run and an 8-GPU one; it is replayed on an 8-GPU cluster
    # (``--budgets`` of another size). The 16-GPU run could never start there: it is set aside as a
    # trace row that could never fit is, naming the log, the field and the value, not left to wait
    # while the replay says every workload completed.
    events, _ = drive(lab(16), [submit(0, "a-wide", "a", 16, H), submit(0, "b-host", "b", 8, H)])
    log = EventLog(tmp_path / "run" / "events")
    log.append(events)
    log.close()
    small = tmp_path / "small.yaml"
    small.write_text("cluster: {name: lab, gpus: 8, gpus_per_node: 8}\nnodes:\n  - {path: lab}\n  - {path: lab/a}\n"
                     "  - {path: lab/b}\n")
    inputs = load_log(tmp_path / "run", small)
    assert [e.workload_id for e in inputs.inputs if isinstance(e, WorkloadSubmitted)] == ["b-host"]
    (bad,) = inputs.rejected
    assert (bad.field, bad.value) == ("gpus", 16)
    assert str(bad).startswith(f"{tmp_path / 'run'}:") and "only 8 GPUs, so a-wide could never start" in str(bad)
    # on its own cluster every run fits, and nothing is set aside
    assert load_log(tmp_path / "run").rejected == []


def test_a_log_replayed_on_a_budgets_file_of_another_cluster_keeps_its_host_changes(tmp_path: Path) -> None:
    # A 16-GPU lab's log in which host lab-n001 fails at 00:30 under b's run. Replayed with a budgets
    # file naming the cluster "lab2", the submissions were moved to lab2 but the host change was not:
    # the replay stopped with "HostHealthChanged ...: cluster 'lab' is not this core's 'lab2'". The
    # host change now moves too, its host renamed as the replayed cluster names it (lab2-n001).
    from ledger.cli import main
    from ledger.events import HostHealthChanged
    from ledger.log import open_log
    from tests.factories import at

    events, _ = drive(lab(16), [submit(0, "a-run", "a", 8, 2 * H), submit(0, "b-run", "b", 8, 2 * H)])
    fail = HostHealthChanged(event_id="lab/fail", cluster="lab", time=at(30), host="lab-n001", state="failed")
    log = EventLog(tmp_path / "run" / "events")
    log.append([*events, fail])
    log.close()
    other = tmp_path / "lab2.yaml"
    other.write_text("cluster: {name: lab2, gpus: 16, gpus_per_node: 8}\nnodes:\n  - {path: lab}\n  - {path: lab/a}\n"
                     "  - {path: lab/b}\n")
    inputs = load_log(tmp_path / "run", other)
    (moved,) = [e for e in inputs.inputs if isinstance(e, HostHealthChanged)]
    assert (moved.cluster, moved.host, moved.state) == ("lab2", "lab2-n001", "failed")
    assert main(["replay", str(tmp_path / "run"), "--budgets", str(other), "--out", str(tmp_path / "again"),
                 "--quiet"]) == 0
    failed = [e for e in open_log(tmp_path / "again") if e.type_name == "WorkloadPreempted"]
    assert [(e.reason, e.time) for e in failed] == [("host_failure", at(30))]
