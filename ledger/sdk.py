"""The SDK a home-grown scheduler calls: ``Ledger(cluster, log=DIR)`` or ``Ledger(cluster, bootstrap=HOST:PORT)``.

>>> with Ledger("lab", log="ledger-events/") as ledger:            # doctest: +SKIP
...     ledger.submit("job-42", budget="ai2/olmo", user="ada", gpus=8, min_runtime_s=3600)
...     ledger.start("job-42", nodes=["lab-n001"])
...     ledger.checkpoint("job-42", progress_s=1800)
...     ledger.preempt("job-42", reason="fair_share", preempted_by="job-43")
...     ledger.requeue("job-42")
...     ledger.start("job-42", nodes=["lab-n002"])
...     ledger.complete("job-42", "succeeded")

Every call validates its event (errors name the field and value) and makes it durable before it
returns: appended to the embedded log, or spooled (fsynced) and sent to Kafka through the streams
publisher, which resends what the broker did not acknowledge. Event ids are derived from the
workload and the step (``{cluster}/sdk/{workload}/start2``), so a scheduler that repeats a call
after a crash records nothing twice. Times default to the wall clock (the SDK sits at the edge:
the decision core never reads a clock); pass ``time=`` to record when something really happened.

The SDK remembers each workload's GPUs, minimum runtime and attempt number, so ``start`` needs
only the nodes. Opened on an embedded log it first reads back this cluster's workloads from the
log, so a restarted scheduler continues where it left off; on Kafka, pass ``attempt=`` (and
``gpus=``) to ``start`` after a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from ledger import events as ev
from ledger.errors import ConfigError, EventValidationError

__all__ = ["Ledger"]


@dataclass
class _Known:
    gpus: int
    min_runtime_s: int
    attempt: int = 0


class Ledger:
    """Record a scheduler's facts as ledger events, durably, one call at a time."""

    def __init__(
        self,
        cluster: str,
        *,
        log: str | Path | None = None,
        bootstrap: str | None = None,
        spool_dir: str | Path | None = None,
        topic: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if (log is None) == (bootstrap is None):
            raise ConfigError("Ledger needs exactly one of log=DIR (embedded log) or bootstrap=HOST:PORT (Kafka)")
        if not cluster:
            raise ConfigError("Ledger needs a cluster name")
        self.cluster = cluster
        self._clock = clock or (lambda: datetime.now(UTC))
        self._known: dict[str, _Known] = {}
        self._log: Any = None
        self._publisher: Any = None
        if log is not None:
            from ledger.adapters.sink import log_dir
            from ledger.log import EventLog

            self._log = EventLog(log_dir(log))
            self._recover()
        else:
            # Kafka only when asked for: the publisher (and aiokafka) are imported lazily
            from ledger.streams.publisher import Publisher

            kwargs: dict[str, Any] = {"topic": topic} if topic else {}
            self._publisher = Publisher(str(bootstrap), spool_dir or ".gpuledger-spool", **kwargs)

    def _recover(self) -> None:
        """Rebuild what the SDK remembers of this cluster's workloads from the embedded log."""
        for name, rec in self._log.records():
            if rec["cluster"] != self.cluster:
                continue
            if name == "WorkloadSubmitted":
                self._known[rec["workload_id"]] = _Known(rec["gpus"], rec["min_runtime_s"])
            elif name == "WorkloadStarted" and rec["workload_id"] in self._known:
                k = self._known[rec["workload_id"]]
                k.attempt = max(k.attempt, rec["attempt"])

    # --- writing --------------------------------------------------------------------------------

    def _record(self, cls: type[ev.Event], workload_id: str, what: str, time: datetime | None, **fields: Any) -> Any:
        when = time if time is not None else self._clock()
        event = ev.parse_event(
            cls.__name__,
            {"event_id": f"{self.cluster}/sdk/{workload_id}/{what}", "cluster": self.cluster, "time": when,
             "workload_id": workload_id, **fields},
            where=f"Ledger.{what.rstrip('0123456789-')}({workload_id!r})",
        )  # fmt: skip
        if self._log is not None:
            self._log.append([event])
        else:
            self._publisher.publish([event])
        return event

    def _workload(self, workload_id: str) -> _Known:
        known = self._known.get(workload_id)
        if known is None:
            raise EventValidationError(
                f"workload {workload_id!r} was not submitted through this ledger: pass gpus= (and attempt=)",
                field="workload_id",
                value=workload_id,
            )
        return known

    def submit(
        self,
        workload_id: str,
        *,
        budget: str,
        user: str,
        gpus: int,
        min_runtime_s: int,
        resumable: bool = True,
        priority: int = 0,
        kind: ev.WorkloadKind = "batch",
        nodes: int = 0,
        work_s: int | None = None,
        checkpoint_interval_s: int | None = None,
        restart_s: int | None = None,
        time: datetime | None = None,
    ) -> ev.WorkloadSubmitted:
        """Record that a workload was submitted with its contract (minimum runtime, resumable)."""
        event: ev.WorkloadSubmitted = self._record(
            ev.WorkloadSubmitted, workload_id, "submit", time, schema_version=2, budget=budget, user=user, gpus=gpus,
            min_runtime_s=min_runtime_s, resumable=resumable, priority=priority, kind=kind, nodes=nodes,
            work_s=work_s, checkpoint_interval_s=checkpoint_interval_s, restart_s=restart_s,
        )  # fmt: skip
        self._known.setdefault(workload_id, _Known(gpus, min_runtime_s))
        return event

    def start(
        self,
        workload_id: str,
        *,
        nodes: Sequence[str],
        gpus: int | None = None,
        allocated: bool | None = None,
        protected_until: datetime | None = None,
        attempt: int | None = None,
        time: datetime | None = None,
    ) -> ev.WorkloadStarted:
        """Record that a workload started on ``nodes``; attempt, GPUs and protection default from its submission."""
        known = self._known.get(workload_id)
        if known is None:
            if gpus is None:
                self._workload(workload_id)  # raises: nothing to take the GPUs from
            known = self._known[workload_id] = _Known(gpus or 0, 0)
        when = time if time is not None else self._clock()
        n = attempt if attempt is not None else known.attempt + 1
        is_allocated = known.min_runtime_s > 0 if allocated is None else allocated
        until = protected_until or when + timedelta(seconds=known.min_runtime_s if is_allocated else 0)
        event: ev.WorkloadStarted = self._record(
            ev.WorkloadStarted, workload_id, f"start{n}", when, nodes=tuple(nodes),
            gpus=gpus if gpus is not None else known.gpus, allocated=is_allocated, protected_until=until, attempt=n,
        )  # fmt: skip
        known.attempt = max(known.attempt, n)
        return event

    def checkpoint(self, workload_id: str, progress_s: int, *, time: datetime | None = None) -> ev.CheckpointWritten:
        """Record that a workload saved its progress (productive seconds so far)."""
        n = self._known[workload_id].attempt if workload_id in self._known else 0
        event: ev.CheckpointWritten = self._record(
            ev.CheckpointWritten, workload_id, f"ckpt{n}-{progress_s}", time, progress_s=progress_s
        )
        return event

    def preempt(
        self,
        workload_id: str,
        reason: ev.PreemptReason = "fair_share",
        *,
        preempted_by: str | None = None,
        time: datetime | None = None,
    ) -> ev.WorkloadPreempted:
        """Record that a running workload was preempted (fair_share, host_drain, host_failure or user)."""
        n = self._known[workload_id].attempt if workload_id in self._known else 0
        event: ev.WorkloadPreempted = self._record(
            ev.WorkloadPreempted, workload_id, f"preempt{n}", time, reason=reason, preempted_by=preempted_by
        )
        return event

    def requeue(self, workload_id: str, *, time: datetime | None = None) -> ev.WorkloadRequeued:
        """Record that a preempted workload went back to the queue."""
        n = self._known[workload_id].attempt if workload_id in self._known else 0
        event: ev.WorkloadRequeued = self._record(ev.WorkloadRequeued, workload_id, f"requeue{n}", time)
        return event

    def complete(
        self, workload_id: str, outcome: ev.Outcome = "succeeded", *, time: datetime | None = None
    ) -> ev.WorkloadCompleted:
        """Record that a workload ended: succeeded, failed or cancelled."""
        event: ev.WorkloadCompleted = self._record(ev.WorkloadCompleted, workload_id, "end", time, outcome=outcome)
        return event

    # --- lifetime -------------------------------------------------------------------------------

    def flush(self, wait_s: float = 0.0) -> int:
        """Send what the Kafka spool still holds (retrying up to ``wait_s``); return how many remain spooled."""
        if self._publisher is None:
            return 0
        remaining: int = self._publisher.flush(wait_s).spooled
        return remaining

    def close(self) -> None:
        """Release the log's writer lock or stop the publisher (spooled records stay on disk)."""
        if self._log is not None:
            self._log.close()
        if self._publisher is not None:
            self._publisher.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
