"""Workloads' histories as a scheduler recorded them, as columns, and the columns of the ledger events they stand for.

Every file adapter (Slurm, Philly, CSV) reads its records into ``Histories``: one row per workload
(with the cluster, budget, size and outcome a record gives) and one row per run of it (``Runs``),
each field a column. ``events`` turns them into the columns of ``WorkloadSubmitted`` /
``WorkloadStarted`` / ``WorkloadPreempted`` / ``WorkloadRequeued`` / ``WorkloadCompleted``, so the
mapping from "runs and how they ended" to events lives in one place:

* submitted at ``submit``;
* each run starts (``attempt`` 1, 2, ...); a run that was interrupted (``Runs.reason`` set)
  ends in a preemption, followed by a requeue when the workload ran again or was put back in
  the queue (``Runs.requeued``);
* the workload completes with ``outcome`` at ``end`` (a preempted last run that was not requeued
  is a preemption followed by ``cancelled``, the project's non-resumable rule);
* no ``outcome`` means the record has not ended yet (pending or running).

Event ids are ``{cluster}/{source}/{workload_id}/{what}``, derived from the source record only,
so importing the same file twice yields the same ids and the log drops the repeats. Each event
carries its sort keys: its time, its workload's ``rank`` (the order the file gives the workloads),
then its place in the workload's story; so an import's events are in time order, a workload's own
in the order they happened, whichever part of the file they were read from.

Columns, not event objects: the adapters have checked every value (``checked`` adds the bounds of
the Avro types), so the events go to the log's trusted batch path as they are
(``ledger.log.batch.EventBatch``, which encodes them a column at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.common import INT_MAX, LATEST_US, LONG_MAX
from ledger.log.avro_columns import Coded

__all__ = [
    "KINDS",
    "OUTCOMES",
    "REASONS",
    "EventPart",
    "Histories",
    "Runs",
    "checked",
    "events",
]

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Text = Any  # a column of strings: pyarrow, or a numpy array of Python strings (text UTF-8 cannot hold)

OUTCOMES: tuple[ev.Outcome, ...] = ("succeeded", "failed", "cancelled")
REASONS: tuple[ev.PreemptReason | None, ...] = (None, "fair_share", "host_failure", "user")
KINDS: tuple[ev.WorkloadKind, ...] = ("batch", "training", "debug", "interactive", "other")
_EVENTS_PER_RUN = 3  # a run's start, preemption and requeue: the place of each in its workload's story


@dataclass
class Runs:
    """The runs of workloads, one row each: a workload's runs one after the other, in the order they ran."""

    of: Ints  # the workload (row of ``Histories``) each run is of
    start: Ints  # µs since the epoch
    end: Ints  # µs, where ``ended``
    ended: Bools
    hosts: Coded  # tuples of host names
    reason: Ints  # index in REASONS: why the run was interrupted (0: it was not)
    requeued: Bools  # the interrupted workload went back to the queue

    def __len__(self) -> int:
        return len(self.of)

    @staticmethod
    def of_none(n: int, hosts: tuple[str, ...] = ()) -> Runs:
        """Return ``n`` runs of no workload yet (to be filled in), all on ``hosts``."""
        zeros = np.zeros(n, np.int64)
        return Runs(zeros, zeros, zeros, np.zeros(n, np.bool_), Coded(zeros, [hosts]), zeros, np.zeros(n, np.bool_))


@dataclass
class Histories:
    """Checked workload histories, one row each: what a source record says happened to a workload."""

    cluster: Coded
    workload_id: Text
    submit: Ints  # µs since the epoch
    budget: Coded
    user: Text | Coded
    gpus: Ints
    min_runtime_s: Ints
    resumable: Bools
    outcome: Ints  # index in OUTCOMES; -1: not ended yet
    end: Ints  # µs: when it completed (where ``outcome`` is set; also for one cancelled before it ran)
    nodes: Ints
    priority: Ints
    kind: Ints  # index in KINDS
    work_s: Ints  # -1: none given
    rank: Ints  # the order of the workloads in the file: ties in time are broken by it
    runs: Runs

    def __len__(self) -> int:
        return len(self.submit)

    def take(self, rows: Ints) -> Histories:
        """Return the histories at ``rows`` (in that order), with their runs."""
        taken = {f.name: _take(getattr(self, f.name), rows) for f in fields(self) if f.name != "runs"}
        where = np.full(len(self), -1, np.int64)
        where[rows] = np.arange(len(rows))
        runs = self.runs
        if len(runs):
            moved = where[runs.of]
            keep = np.flatnonzero(moved >= 0)
            keep = keep[np.argsort(moved[keep], kind="stable")]  # a workload's runs stay in their order
            runs = Runs(
                moved[keep], runs.start[keep], runs.end[keep], runs.ended[keep],
                Coded(runs.hosts.codes[keep], runs.hosts.values), runs.reason[keep], runs.requeued[keep],
            )  # fmt: skip
        return Histories(**taken, runs=runs)


def _take(column: Any, rows: Ints) -> Any:
    if isinstance(column, Coded):
        return Coded(np.asarray(column.codes)[rows], column.values)
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column.take(pa.array(rows, pa.int64()))
    return column[rows]


_TEN_YEARS_S = 10 * 366 * 86_400


def checked(h: Histories) -> tuple[Histories, list[tuple[int, str]]]:
    """Return the histories whose values the event schema can hold, and (row, reason) of the others.

    The parsers check each field's form, this the bounds of the Avro types. Whole numbers may come
    as Python integers of any size (numpy object arrays); the histories returned hold int64 columns.
    """
    bad, reasons = _refused(h)
    kept = h.take(np.flatnonzero(~bad))
    for name in ("gpus", "nodes", "priority", "min_runtime_s", "work_s"):
        setattr(kept, name, np.asarray(getattr(kept, name), np.int64))
    return kept, list(zip(np.flatnonzero(bad).tolist(), reasons, strict=True))


def _refused(h: Histories) -> tuple[Bools, list[str]]:
    """Return where a history holds a value the event schema cannot, with the reason of each, in row order."""
    last_start = np.full(len(h), -1, np.int64)
    if len(h.runs):
        last_start[h.runs.of] = h.runs.start  # (runs in order: the last one of a workload wins)
    has_run = last_start >= 0
    bad: Bools = ~np.asarray(
        (h.gpus > 0) & (h.gpus <= INT_MAX) & (h.nodes >= 0) & (h.nodes <= INT_MAX)
        & (h.priority >= -INT_MAX - 1) & (h.priority <= INT_MAX)
        & (h.min_runtime_s >= 0) & (h.min_runtime_s < _TEN_YEARS_S)
        & ((h.work_s < 0) | (h.work_s <= LONG_MAX))
        & (~has_run | (last_start + h.min_runtime_s * 1_000_000 < LATEST_US)),
        np.bool_,
    )  # fmt: skip
    reasons = [
        _reason(int(h.gpus[r]), int(h.nodes[r]), int(h.priority[r]), int(h.min_runtime_s[r]), int(last_start[r]))
        for r in np.flatnonzero(bad).tolist()
    ]
    return bad, reasons


def _reason(gpus: int, nodes: int, priority: int, min_runtime_s: int, last_start: int) -> str:
    if not 1 <= gpus <= INT_MAX:
        return f"gpus {gpus} is not between 1 and {INT_MAX}"
    if not 0 <= nodes <= INT_MAX:
        return f"nodes {nodes} is not between 0 and {INT_MAX}"
    if not -INT_MAX - 1 <= priority <= INT_MAX:
        return f"priority {priority} does not fit a 32-bit integer"
    if not 0 <= min_runtime_s <= LONG_MAX:
        return f"min_runtime {min_runtime_s} is not a whole, non-negative number of seconds"
    return (f"the protected window of a run starting {ev.from_us(last_start).isoformat()} "
            f"ends after {ev.LATEST:%Y}")  # fmt: skip


@dataclass(frozen=True)
class EventPart:
    """Events of one type as columns, with their sort keys: (time, the workload's rank, place in its story)."""

    type_name: str
    columns: dict[str, Any]
    n: int
    keys: tuple[Ints, Ints, Ints]

    def with_budget(self, budget: Coded) -> EventPart:
        """Return the part with another budget column (a submission charged to the budget tree)."""
        return replace(self, columns={**self.columns, "budget": budget})


def events(h: Histories, source: str) -> list[EventPart]:
    """Return the events the histories stand for, by type, each with its sort keys."""
    n = len(h)
    if not n:
        return []
    prefix = _cluster_prefix(h.cluster, source)  # {cluster}/{source}/: an id is {prefix}{wid}/{what}
    wid = h.workload_id
    parts = [
        EventPart("WorkloadSubmitted", {
            "event_id": _join(prefix, wid, "/submit"), "cluster": h.cluster, "time": h.submit, "schema_version": 2,
            "workload_id": wid, "budget": h.budget, "user": h.user, "gpus": h.gpus, "nodes": h.nodes,
            "min_runtime_s": h.min_runtime_s, "resumable": h.resumable, "priority": h.priority,
            "kind": Coded(h.kind, KINDS), "work_s": _maybe(h.work_s), "checkpoint_interval_s": None,
            "restart_s": None,
        }, n, (h.submit, h.rank, np.zeros(n, np.int64))),
    ]  # fmt: skip
    runs = h.runs
    story = np.zeros(n, np.int64)  # each workload's events so far (its submission)
    if len(runs):
        of = runs.of
        first = np.searchsorted(of, np.arange(n))  # (runs are grouped by workload, in workload order)
        attempt = np.arange(len(runs)) - first[of] + 1
        count = np.bincount(of, minlength=n)
        at = _EVENTS_PER_RUN * (attempt - 1) + 1
        prefix_r, wid_r, cluster_r, rank_r = _take(prefix, of), _take(wid, of), _take(h.cluster, of), h.rank[of]
        number = pc.cast(pa.array(attempt), pa.string())
        parts.append(EventPart("WorkloadStarted", {
            "event_id": _join(prefix_r, wid_r, "/start", number), "cluster": cluster_r, "time": runs.start,
            "schema_version": 1, "workload_id": wid_r, "nodes": runs.hosts, "gpus": h.gpus[of],
            "allocated": h.min_runtime_s[of] > 0, "protected_until": runs.start + h.min_runtime_s[of] * 1_000_000,
            "attempt": attempt,
        }, len(runs), (runs.start, rank_r, at)))  # fmt: skip
        stopped = np.flatnonzero(runs.ended & (runs.reason > 0))
        if len(stopped):
            s = pa.array(stopped, pa.int64())
            parts.append(EventPart("WorkloadPreempted", {
                "event_id": _join(_take(prefix_r, stopped), _take(wid_r, stopped), "/preempt", number.take(s)),
                "cluster": _take(cluster_r, stopped), "time": runs.end[stopped], "schema_version": 1,
                "workload_id": _take(wid_r, stopped), "reason": Coded(runs.reason[stopped], REASONS),
                "preempted_by": None,
            }, len(stopped), (runs.end[stopped], rank_r[stopped], at[stopped] + 1)))  # fmt: skip
            again = stopped[runs.requeued[stopped] | (attempt[stopped] < count[of[stopped]])]
            if len(again):
                a = pa.array(again, pa.int64())
                parts.append(EventPart("WorkloadRequeued", {
                    "event_id": _join(_take(prefix_r, again), _take(wid_r, again), "/requeue", number.take(a)),
                    "cluster": _take(cluster_r, again), "time": runs.end[again], "schema_version": 1,
                    "workload_id": _take(wid_r, again),
                }, len(again), (runs.end[again], rank_r[again], at[again] + 2)))  # fmt: skip
        story += _EVENTS_PER_RUN * count
    done = np.flatnonzero(h.outcome >= 0)
    if len(done):
        parts.append(EventPart("WorkloadCompleted", {
            "event_id": _join(_take(prefix, done), _take(wid, done), "/end"), "cluster": _take(h.cluster, done),
            "time": h.end[done], "schema_version": 1, "workload_id": _take(wid, done),
            "outcome": Coded(h.outcome[done], OUTCOMES),
        }, len(done), (h.end[done], h.rank[done], story[done] + 1)))  # fmt: skip
    return parts


def _cluster_prefix(cluster: Coded, source: str) -> Coded:
    return Coded(cluster.codes, [f"{c}/{source}/" for c in cluster.values])


def _maybe(numbers: Ints) -> Any:
    """Return a column of whole numbers where -1 stands for none, as a nullable column."""
    return np.ma.MaskedArray(numbers, mask=numbers < 0) if (numbers < 0).any() else numbers


def _join(*parts: Any) -> Text:
    """Return the strings of several columns (coded, or constants) joined row by row."""
    n = next(len(p.codes) if isinstance(p, Coded) else len(p) for p in parts if not isinstance(p, str))
    if any(isinstance(p, np.ndarray) for p in parts):  # text UTF-8 cannot hold: Python strings, row by row
        columns = [_strings_of(p, n) for p in parts]
        return np.array(["".join(row) for row in zip(*columns, strict=True)], dtype=object)
    args = [_arrow_text(p) for p in parts]
    return pc.binary_join_element_wise(*args, "")


def _arrow_text(part: Any) -> Any:
    if isinstance(part, Coded):
        return pa.array(list(part.values), pa.string()).take(pa.array(np.asarray(part.codes), pa.int64()))
    return part


def _strings_of(part: Any, n: int) -> Sequence[str]:
    if isinstance(part, str):
        return [part] * n
    if isinstance(part, Coded):
        return [part.values[c] for c in np.asarray(part.codes).tolist()]
    if isinstance(part, np.ndarray):
        return [str(v) for v in part.tolist()]
    return [str(v) for v in part.to_pylist()]
