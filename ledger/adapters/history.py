"""A workload's history as a scheduler recorded it, and the ledger events it stands for.

Every file adapter (Slurm, Philly, CSV) parses its records into ``History`` objects and lets
``history_records`` write the events' records, so the mapping from "runs and how they ended" to
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

Records, not event objects: the adapters have checked every value (``check_history`` adds the bounds
of the Avro types), so the events go to the log's trusted append as they are
(``EventLog.append_records``, which encodes them with the log's encoder).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger import events as ev
from ledger.adapters.common import INT_MAX, LATEST_US, LONG_MAX, ImportResult, Record, RowError
from ledger.gcpause import paused_gc

__all__ = [
    "History",
    "Run",
    "add_histories",
    "add_history",
    "check_history",
    "history_records",
    "keep_histories",
]


@dataclass(slots=True)
class Run:
    """One run of a workload (times in µs since the epoch): when, where, and whether something interrupted it."""

    start: int
    end: int | None = None
    hosts: tuple[str, ...] = ("unknown",)
    preempted: ev.PreemptReason | None = None  # set when the run was interrupted rather than finished
    requeued: bool = False  # the interrupted workload went back to the queue


@dataclass(slots=True)
class History:
    """What one source record (or group of records) says happened to a workload; times in µs since the epoch."""

    workload_id: str
    submit: int
    budget: str
    user: str
    gpus: int
    min_runtime_s: int
    resumable: bool
    runs: list[Run] = field(default_factory=list)
    outcome: ev.Outcome | None = None  # None: not ended yet
    end: int | None = None  # when it completed (also for one cancelled before it ever ran)
    nodes: int = 0
    priority: int = 0
    kind: ev.WorkloadKind = "batch"
    work_s: int | None = None


_TEN_YEARS_S = 10 * 366 * 86_400


def check_history(h: History) -> None:
    """Raise RowError for a value the event schema cannot hold (the parsers check format, this the bounds)."""
    if (
        0 < h.gpus <= INT_MAX
        and 0 <= h.nodes <= INT_MAX
        and -INT_MAX - 1 <= h.priority <= INT_MAX
        and 0 <= h.min_runtime_s < _TEN_YEARS_S
        and (h.work_s is None or 0 <= h.work_s <= LONG_MAX)
        and (not h.runs or h.runs[-1].start + h.min_runtime_s * 1_000_000 < LATEST_US)
    ):
        return  # the common row: one test; the messages below name what is out of bounds
    if not 1 <= h.gpus <= INT_MAX:
        raise RowError(f"gpus {h.gpus} is not between 1 and {INT_MAX}")
    if not 0 <= h.nodes <= INT_MAX:
        raise RowError(f"nodes {h.nodes} is not between 0 and {INT_MAX}")
    if not -INT_MAX - 1 <= h.priority <= INT_MAX:
        raise RowError(f"priority {h.priority} does not fit a 32-bit integer")
    if not 0 <= h.min_runtime_s <= LONG_MAX:
        raise RowError(f"min_runtime {h.min_runtime_s} is not a whole, non-negative number of seconds")
    if h.work_s is not None and not 0 <= h.work_s <= LONG_MAX:
        raise RowError(f"work_s {h.work_s} is not a whole, non-negative number of seconds")
    if h.runs and h.runs[-1].start + h.min_runtime_s * 1_000_000 >= LATEST_US:
        raise RowError(f"the protected window of a run starting {ev.from_us(h.runs[-1].start).isoformat()} "
                       f"ends after {ev.LATEST:%Y}")  # fmt: skip


def history_records(h: History, cluster: str, source: str, out: list[Record]) -> None:
    """Append the records a checked history (``check_history``) stands for to ``out``, in the order they happened."""
    base = f"{cluster}/{source}/{h.workload_id}/"
    wid = h.workload_id
    out.append(
        (
            "WorkloadSubmitted",
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
    )
    if h.runs:
        allocated = h.min_runtime_s > 0
        protect = h.min_runtime_s * 1_000_000
        last = len(h.runs)
        for n, run in enumerate(h.runs, 1):
            out.append(
                (
                    "WorkloadStarted",
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
                (
                    "WorkloadPreempted",
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
                    (
                        "WorkloadRequeued",
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
            (
                "WorkloadCompleted",
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


def add_history(res: ImportResult, h: History, cluster: str, source: str) -> None:
    """Add a history's events to ``res`` (made into records or bytes when asked for); RowError if out of bounds."""
    check_history(h)
    res.add_history(h, cluster, source)


def add_histories(res: ImportResult, rows: Iterable[tuple[int, History | None]], cluster: str, source: str) -> None:
    """Add one workload per (line, history) to ``res``: None counts as a 0-GPU row, a repeated id is rejected.

    The loop the CSV and Philly adapters share: ``rows`` parses lazily and reports its own
    malformed lines to ``res``; this adds the records of every good one, in time order.
    """
    with paused_gc():
        kept = keep_histories(res, rows, cluster, source)
        res.add_histories(kept)
        res.workloads += len(kept)
        res.sort_events()


def keep_histories(
    res: ImportResult, rows: Iterable[tuple[int, History | None]], cluster: str, source: str
) -> list[tuple[History, str, str]]:
    """Return the (history, cluster, source) of every good row; count and reject the rest."""
    seen: dict[str, int] = {}
    kept: list[tuple[History, str, str]] = []
    zero_gpu = 0
    for line, h in rows:
        if h is None:
            zero_gpu += 1
            continue
        first = seen.setdefault(h.workload_id, line)
        if first != line:
            res.reject(line, f"workload_id {h.workload_id!r} already on line {first}")
            continue
        try:
            check_history(h)
        except RowError as exc:
            res.reject(line, str(exc))
            continue
        kept.append((h, cluster, source))
    if zero_gpu:
        res.skipped["0 GPUs (not a GPU workload)"] += zero_gpu
    return kept
