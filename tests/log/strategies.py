"""Hypothesis strategies for every event in the catalogue: any value the models and Avro both accept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from ledger import events as ev

INT32 = 2**31 - 1
INT64 = 2**63 - 1

names = st.text(min_size=1, max_size=12)
maybe_names = st.none() | names
paths = st.from_regex(r"[a-z0-9_.-]{1,6}(/[a-z0-9_.-]{1,6}){0,3}", fullmatch=True)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31, 23, 59, 59, 999_999), timezones=st.just(UTC)
)
shares = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
seconds = st.integers(0, INT64)  # Avro long
int32 = st.integers(-INT32 - 1, INT32)
gpus = st.integers(1, INT32)
name_tuples = st.lists(names, max_size=4).map(tuple)


def _common() -> dict[str, Any]:
    return {"event_id": names, "cluster": names, "time": times, "schema_version": int32}


STRATEGIES: dict[str, st.SearchStrategy[ev.Event]] = {
    "BudgetNodeDefined": st.builds(
        ev.BudgetNodeDefined, **_common(), path=paths, parent=st.none() | paths, share=shares,
        managers=name_tuples, set_by=names,
    ),
    "AllocationChanged": st.builds(ev.AllocationChanged, **_common(), path=paths, share=shares, set_by=names),
    "AllocationRefused": st.builds(
        ev.AllocationRefused, **_common(), path=paths, share=shares, set_by=names, refused_event_id=names,
        reason=st.text(max_size=30),
    ),
    "WorkloadSubmitted": st.builds(
        ev.WorkloadSubmitted, **_common(), workload_id=names, budget=paths, user=names, gpus=gpus,
        nodes=st.integers(0, INT32), min_runtime_s=seconds, resumable=st.booleans(), priority=int32,
        kind=st.sampled_from(["batch", "training", "debug", "interactive", "other"]),
        work_s=st.none() | seconds, checkpoint_interval_s=st.none() | seconds, restart_s=st.none() | seconds,
    ),
    "WorkloadStarted": st.builds(
        ev.WorkloadStarted, **_common(), workload_id=names, nodes=st.lists(names, min_size=1, max_size=4).map(tuple),
        gpus=gpus, allocated=st.booleans(), protected_until=times, attempt=st.integers(1, INT32),
    ),
    "CheckpointWritten": st.builds(ev.CheckpointWritten, **_common(), workload_id=names, progress_s=seconds),
    "WorkloadPreempted": st.builds(
        ev.WorkloadPreempted, **_common(), workload_id=names,
        reason=st.sampled_from(["fair_share", "host_drain", "host_failure", "user"]), preempted_by=maybe_names,
    ),
    "WorkloadRequeued": st.builds(ev.WorkloadRequeued, **_common(), workload_id=names),
    "WorkloadCompleted": st.builds(
        ev.WorkloadCompleted, **_common(), workload_id=names,
        outcome=st.sampled_from(["succeeded", "failed", "cancelled"]),
    ),
    "HostHealthChanged": st.builds(
        ev.HostHealthChanged, **_common(), host=names, state=st.sampled_from(["healthy", "unhealthy", "failed"]),
        reason=st.none() | st.text(max_size=20),
    ),
    "ClusterCapacityChanged": st.builds(
        ev.ClusterCapacityChanged, **_common(), gpus=st.integers(0, INT32), gpus_per_node=gpus
    ),
    "SchedulingDecision": st.builds(
        ev.SchedulingDecision, **_common(),
        action=st.sampled_from(["start", "preempt", "requeue", "drain", "complete"]), workload_id=names,
        nodes=name_tuples, reason=st.text(max_size=30), for_workload=maybe_names,
        budget_ratio=st.none() | st.floats(allow_nan=False, allow_infinity=False),
        queue_position=st.none() | st.integers(1, INT32), effective_time=times,
    ),
}

any_event: st.SearchStrategy[ev.Event] = st.one_of(*STRATEGIES.values())
