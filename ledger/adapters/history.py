"""A workload's history as a scheduler recorded it, and the ledger events it stands for.

Every file adapter (Slurm, Philly, CSV) parses its records into ``History`` objects and lets
``history_events`` write the events, so the mapping from "runs and how they ended" to
``WorkloadSubmitted`` / ``WorkloadStarted`` / ``WorkloadPreempted`` / ``WorkloadRequeued`` /
``WorkloadCompleted`` lives in one place:

* submitted at ``submit``;
* each run starts (``attempt`` 1, 2, ...); a run that was interrupted (``Run.preempted`` set)
  ends in a preemption, followed by a requeue when the workload ran again or was put back in
  the queue (``Run.requeued``);
* the workload completes with ``outcome`` at ``end`` (a preempted last run that was not requeued
  is a preemption followed by ``cancelled``, the project's non-resumable rule);
* ``outcome`` None means the record has not ended yet (pending or running).

Event ids are ``{cluster}/{source}/{workload_id}/{what}``, derived from the source record only,
so importing the same file twice yields the same ids and the log drops the repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ledger import events as ev

__all__ = ["History", "Run", "build_event", "history_events"]


@dataclass(slots=True)
class Run:
    """One run of a workload: when it started and ended, where, and whether something interrupted it."""

    start: datetime
    end: datetime | None = None
    hosts: tuple[str, ...] = ("unknown",)
    preempted: ev.PreemptReason | None = None  # set when the run was interrupted rather than finished
    requeued: bool = False  # the interrupted workload went back to the queue


@dataclass(slots=True)
class History:
    """What one source record (or group of records) says happened to a workload."""

    workload_id: str
    submit: datetime
    budget: str
    user: str
    gpus: int
    min_runtime_s: int
    resumable: bool
    runs: list[Run] = field(default_factory=list)
    outcome: ev.Outcome | None = None  # None: not ended yet
    end: datetime | None = None  # when it completed (also for one cancelled before it ever ran)
    nodes: int = 0
    priority: int = 0
    kind: ev.WorkloadKind = "batch"
    work_s: int | None = None


# Adapters check every value they put in an event (and report the file line when one is bad), and
# the log validates every event again before it appends, so events are built without pydantic here:
# that is what lets an import parse tens of thousands of rows a second.
build_event = ev.trusted

_SUBMITTED = ev.WorkloadSubmitted
_STARTED = ev.WorkloadStarted
_PREEMPTED = ev.WorkloadPreempted
_REQUEUED = ev.WorkloadRequeued
_COMPLETED = ev.WorkloadCompleted


def history_events(h: History, cluster: str, source: str) -> list[ev.Event]:
    """Return the events a history stands for, in the order they happened."""
    base = f"{cluster}/{source}/{h.workload_id}/"
    wid = h.workload_id
    out: list[ev.Event] = [
        build_event(
            _SUBMITTED,
            {
                "event_id": base + "submit",
                "cluster": cluster,
                "time": h.submit,
                "schema_version": 2,
                "workload_id": wid,
                "budget": h.budget,
                "user": h.user,
                "gpus": h.gpus,
                "nodes": h.nodes,
                "min_runtime_s": h.min_runtime_s,
                "resumable": h.resumable,
                "priority": h.priority,
                "kind": h.kind,
                "work_s": h.work_s,
                "checkpoint_interval_s": None,
                "restart_s": None,
            },
        )
    ]
    if h.runs:
        allocated = h.min_runtime_s > 0
        protect = timedelta(seconds=h.min_runtime_s)
        last = len(h.runs)
        for n, run in enumerate(h.runs, 1):
            out.append(
                build_event(
                    _STARTED,
                    {
                        "event_id": f"{base}start{n}",
                        "cluster": cluster,
                        "time": run.start,
                        "schema_version": 1,
                        "workload_id": wid,
                        "nodes": run.hosts,
                        "gpus": h.gpus,
                        "allocated": allocated,
                        "protected_until": run.start + protect,
                        "attempt": n,
                    },
                )
            )
            if run.end is None or run.preempted is None:
                continue
            out.append(
                build_event(
                    _PREEMPTED,
                    {
                        "event_id": f"{base}preempt{n}",
                        "cluster": cluster,
                        "time": run.end,
                        "schema_version": 1,
                        "workload_id": wid,
                        "reason": run.preempted,
                        "preempted_by": None,
                    },
                )
            )
            if run.requeued or n < last:
                out.append(
                    build_event(
                        _REQUEUED,
                        {
                            "event_id": f"{base}requeue{n}",
                            "cluster": cluster,
                            "time": run.end,
                            "schema_version": 1,
                            "workload_id": wid,
                        },
                    )
                )
    if h.outcome is not None and h.end is not None:
        out.append(
            build_event(
                _COMPLETED,
                {
                    "event_id": base + "end",
                    "cluster": cluster,
                    "time": h.end,
                    "schema_version": 1,
                    "workload_id": wid,
                    "outcome": h.outcome,
                },
            )
        )
    return out
