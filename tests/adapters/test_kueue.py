"""Kueue Workloads: a watch stream tells every run; a list tells the current one; bad objects are rejected."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ledger import events as ev
from ledger.adapters.kueue import KueueOptions, import_kueue, import_kueue_file
from tests.adapters.helpers import DATA, assert_all_valid, waits_from_events

WATCH = DATA / "kueue" / "watch-events.json"
LIST = DATA / "kueue" / "workloads-list.json"


def at(hhmmss: str) -> datetime:
    return datetime.fromisoformat(f"2026-03-02T{hhmmss}").replace(tzinfo=UTC)


def story(events: list[ev.Event], wid: str) -> list[tuple[str, datetime, str]]:
    out = []
    for e in events:
        if getattr(e, "workload_id", None) != wid:
            continue
        detail = getattr(e, "reason", None) or getattr(e, "outcome", None) or ""
        if isinstance(e, ev.WorkloadStarted):
            detail = ",".join(e.nodes)
        out.append((e.type_name.removeprefix("Workload"), e.time, detail))
    return out


def test_a_watch_stream_shows_a_preemption_its_requeue_and_the_second_run_to_the_finish() -> None:
    res = import_kueue_file(WATCH, KueueOptions(cluster="k8s-east"))
    assert res.rejected == []
    assert story(res.events, "team-a/job-train-llm-4f2a1") == [
        ("Submitted", at("10:00:00"), ""),
        ("Started", at("10:05:00"), "cq-gpu/a100"),
        ("Preempted", at("12:00:00"), "fair_share"),
        ("Requeued", at("12:00:05"), ""),  # the Requeued condition's time
        ("Started", at("12:30:00"), "cq-gpu/h100"),
        ("Completed", at("15:00:00"), "succeeded"),
    ]
    sub = next(e for e in res.events if isinstance(e, ev.WorkloadSubmitted) and e.workload_id.startswith("team-a"))
    assert (sub.gpus, sub.budget, sub.priority, sub.cluster) == (8, "k8s-east/team-a/lq-research", 100, "k8s-east")
    assert_all_valid(res.events)


def test_an_older_kueue_eviction_is_requeued_at_the_backoff_and_a_deleted_workload_is_cancelled() -> None:
    res = import_kueue_file(WATCH)
    assert story(res.events, "team-c/job-eval-7") == [
        ("Submitted", at("09:00:00"), ""),
        ("Started", at("09:30:00"), "unknown"),
        ("Preempted", at("13:00:00"), "host_failure"),  # PodsReadyTimeout
        ("Requeued", at("13:01:00"), ""),  # status.requeueState.requeueAt: no Requeued condition
        ("Started", at("13:20:00"), "unknown"),
        ("Completed", at("14:00:00"), "failed"),
    ]
    assert story(res.events, "team-b/pod-notebook-9c1")[-1] == ("Completed", at("11:40:00"), "cancelled")
    assert res.skipped == {"no GPUs requested": 1}  # the CPU-only ETL job
    waits = waits_from_events(res.events)
    # first waits 5 min (team-a) and 30 min (team-c); restarts 30 min and 20 min after their preemptions
    assert waits == {"2-8": [5 * 60, 20 * 60, 30 * 60, 30 * 60], "1": [2 * 60]}


def test_a_list_shows_current_state_only_and_counts_evictions_it_cannot_place() -> None:
    res = import_kueue_file(LIST)
    assert res.rows_read == 5 and res.workloads == 4
    assert [(r.line, r.reason) for r in res.rejected] == [
        (1, "items[4]: spec.podSets[0].count 'two' is not a whole, non-negative number")
    ]
    assert story(res.events, "team-a/job-pending-1") == [("Submitted", at("08:00:00"), "")]
    assert story(res.events, "team-a/job-running-2")[1:] == [("Started", at("08:40:00"), "cq-gpu/a100")]
    assert story(res.events, "team-b/job-done-3")[1:] == [
        ("Started", at("07:03:00"), "cq-gpu/h100"),
        ("Completed", at("09:03:00"), "succeeded"),
    ]
    gpus = {e.workload_id: e.gpus for e in res.events if isinstance(e, ev.WorkloadSubmitted)}
    assert gpus == {"team-a/job-pending-1": 64, "team-a/job-running-2": 2, "team-b/job-done-3": 32,
                    "team-b/job-evicted-4": 4}  # fmt: skip
    assert res.skipped == {"eviction of a run the file does not show": 1}


def test_reading_the_list_and_then_the_watch_again_adds_the_same_ids() -> None:
    once = [e.event_id for e in import_kueue_file(WATCH).events]
    assert once == [e.event_id for e in import_kueue_file(WATCH).events]
    assert len(set(once)) == len(once)


def test_a_malformed_watch_event_is_rejected_by_line_and_changes_nothing() -> None:
    good = {"type": "ADDED", "object": {
        "metadata": {"name": "a", "namespace": "n", "uid": "u1", "creationTimestamp": "2026-03-02T10:00:00Z"},
        "spec": {"podSets": [{"count": 1, "template": {"spec": {"containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]}}}  # fmt: skip
    bad_time = json.loads(json.dumps(good))
    bad_time["type"] = "MODIFIED"
    bad_time["object"]["status"] = {"conditions": [
        {"type": "Admitted", "status": "True", "lastTransitionTime": "around noon"}]}  # fmt: skip
    text = "\n".join([json.dumps(good), json.dumps(bad_time), "{oops", json.dumps({"type": "BOOKMARK", "object": {}})])
    res = import_kueue(text, "watch.jsonl")
    assert [r.line for r in res.rejected] == [2, 3]
    assert "'around noon'" in res.rejected[0].reason and "not JSON" in res.rejected[1].reason
    assert [e.type_name for e in res.events] == ["WorkloadSubmitted"]
    assert res.skipped == {"watch event BOOKMARK": 1}
