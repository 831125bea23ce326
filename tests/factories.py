"""Small builders for events in tests: sequential ids, times in minutes from a fixed day."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger import events as ev

DAY0 = datetime(2026, 3, 2, tzinfo=UTC)


def at(minutes: float) -> datetime:
    """Return DAY0 plus some minutes."""
    return DAY0 + timedelta(minutes=minutes)


@dataclass
class Events:
    """Build events for one cluster with ids e1, e2, ... (deterministic)."""

    cluster: str = "lab"
    _n: int = field(default=0)

    def _common(self, minutes: float) -> dict[str, Any]:
        self._n += 1
        return {"event_id": f"{self.cluster}-e{self._n}", "cluster": self.cluster, "time": at(minutes)}

    def capacity(self, minutes: float, gpus: int, gpus_per_node: int = 8) -> ev.ClusterCapacityChanged:
        return ev.ClusterCapacityChanged(**self._common(minutes), gpus=gpus, gpus_per_node=gpus_per_node)

    def node(
        self, minutes: float, path: str, share: float = 1.0, managers: tuple[str, ...] = (), set_by: str = "admin"
    ) -> ev.BudgetNodeDefined:
        parent = path.rsplit("/", 1)[0] if "/" in path else None
        return ev.BudgetNodeDefined(
            **self._common(minutes), path=path, parent=parent, share=share, managers=managers, set_by=set_by
        )

    def allocate(self, minutes: float, path: str, share: float, set_by: str) -> ev.AllocationChanged:
        return ev.AllocationChanged(**self._common(minutes), path=path, share=share, set_by=set_by)

    def submit(
        self, minutes: float, wid: str, budget: str, gpus: int = 8, min_runtime_s: int = 3600, **kw: Any
    ) -> ev.WorkloadSubmitted:
        fields: dict[str, Any] = {"user": "u", "resumable": True, **kw}
        return ev.WorkloadSubmitted(
            **self._common(minutes), workload_id=wid, budget=budget, gpus=gpus, min_runtime_s=min_runtime_s, **fields
        )

    def start(
        self,
        minutes: float,
        wid: str,
        nodes: tuple[str, ...],
        gpus: int,
        allocated: bool = True,
        protected_for_min: float = 60,
        attempt: int = 1,
    ) -> ev.WorkloadStarted:
        common = self._common(minutes)
        until = common["time"] + timedelta(minutes=protected_for_min if allocated else 0)
        return ev.WorkloadStarted(
            **common,
            workload_id=wid,
            nodes=nodes,
            gpus=gpus,
            allocated=allocated,
            protected_until=until,
            attempt=attempt,
        )

    def checkpoint(self, minutes: float, wid: str, progress_s: int) -> ev.CheckpointWritten:
        return ev.CheckpointWritten(**self._common(minutes), workload_id=wid, progress_s=progress_s)

    def preempt(
        self, minutes: float, wid: str, reason: ev.PreemptReason = "fair_share", by: str | None = None
    ) -> ev.WorkloadPreempted:
        return ev.WorkloadPreempted(**self._common(minutes), workload_id=wid, reason=reason, preempted_by=by)

    def requeue(self, minutes: float, wid: str) -> ev.WorkloadRequeued:
        return ev.WorkloadRequeued(**self._common(minutes), workload_id=wid)

    def complete(self, minutes: float, wid: str, outcome: ev.Outcome = "succeeded") -> ev.WorkloadCompleted:
        return ev.WorkloadCompleted(**self._common(minutes), workload_id=wid, outcome=outcome)

    def host(self, minutes: float, host: str, state: ev.HostState, reason: str | None = None) -> ev.HostHealthChanged:
        return ev.HostHealthChanged(**self._common(minutes), host=host, state=state, reason=reason)
