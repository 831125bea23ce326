"""Many single-run workload histories held as columns, and their events' Avro bytes written a column at a time.

The fast path of the file adapters turns the rows it can decide column-wise into a
``HistoryBatch``: one entry per workload with at most one run (nearly every sacct job and CSV
row), each field a column. ``HistoryBatch.history(i)`` is the very ``History`` the per-row reader
would have made for entry i, so ``history_records`` stays the one definition of the events; the
bytes written here for a batch are those ``HistoryWriter`` (``ledger.adapters.wire``) writes for
those histories, field for field (``tests/adapters/test_fast_path.py`` checks both against the
per-row path on files mixing every kind of row).

Order: an import's events are sorted by time, stably, from its workloads in the order the
per-row reader made them, each workload's events in their own order. Every workload carries that
place as (line, sub): the line that made it and, for the several tasks one pending array record
stands for, their rank. ``merge`` sorts all events by (time, line, sub, rank in the workload).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.columns import Bools, Ints, avro_strings, bools, join, varints, zigzag
from ledger.adapters.history import History, Run
from ledger.adapters.wire import HistoryWriter, wire_layout
from ledger.log.avro_encode import string_bytes, zigzag_bytes

__all__ = [
    "KINDS",
    "OUTCOMES",
    "REASONS",
    "TYPES",
    "HistoryBatch",
    "WireColumns",
    "added_columns",
    "history_columns",
    "merge",
    "wire_columns",
]

KINDS: tuple[ev.WorkloadKind, ...] = get_args(ev.WorkloadKind)
REASONS: tuple[ev.PreemptReason, ...] = get_args(ev.PreemptReason)
OUTCOMES: tuple[ev.Outcome, ...] = get_args(ev.Outcome)
TYPES: tuple[str, ...] = tuple(ev.EVENT_TYPES)
_TYPE_INDEX = {name: k for k, name in enumerate(TYPES)}
_AFTER_ALL = 1 << 39  # the line of events added whole: after every workload's (lines are fewer)


@dataclass
class HistoryBatch:
    """Histories of workloads with at most one run, as columns (times in µs since the epoch)."""

    source: str
    line: Ints  # where the workload sits in the per-row reader's order
    cluster: pa.Array
    workload_id: pa.Array
    submit: Ints
    budget: pa.Array
    user: pa.Array
    gpus: Ints
    min_runtime_s: Ints
    resumable: Bools
    nodes: Ints
    priority: Ints
    kind: Ints  # index into KINDS
    work_s: Ints
    has_work: Bools
    ran: Bools
    start: Ints
    hosts: Ints  # index into host_lists
    host_lists: list[tuple[str, ...]]
    end: Ints  # the run's end, and the completion's time when there is an outcome
    has_end: Bools
    preempted: Ints  # index into REASONS; -1: not preempted
    requeued: Bools
    outcome: Ints  # index into OUTCOMES; -1: not ended

    def __len__(self) -> int:
        return len(self.line)

    def history(self, i: int) -> tuple[History, str]:
        """Return entry i as the History the per-row reader makes, with its cluster."""
        end = int(self.end[i]) if self.has_end[i] else None
        runs: list[Run] = []
        if self.ran[i]:
            run = Run(int(self.start[i]), end, self.host_lists[int(self.hosts[i])])
            if end is not None and self.preempted[i] >= 0:
                run.preempted = REASONS[int(self.preempted[i])]
                run.requeued = bool(self.requeued[i])
            runs.append(run)
        outcome = OUTCOMES[int(self.outcome[i])] if self.outcome[i] >= 0 else None
        h = History(
            str(self.workload_id[i]),
            int(self.submit[i]),
            str(self.budget[i]),
            str(self.user[i]),
            int(self.gpus[i]),
            int(self.min_runtime_s[i]),
            bool(self.resumable[i]),
            runs,
            outcome,
            end if outcome is not None else None,
            int(self.nodes[i]),
            int(self.priority[i]),
            KINDS[int(self.kind[i])],
            int(self.work_s[i]) if self.has_work[i] else None,
        )
        return h, str(self.cluster[i])


@dataclass
class WireColumns:
    """Events as columns: time, place (line, sub, rank in the workload), type (index into TYPES), id, bytes."""

    time: Ints
    line: Ints
    sub: Ints
    rank: Ints
    type: Ints
    ids: pa.Array
    data: pa.Array


def _ints(values: Ints) -> pa.Array:
    return varints(zigzag(values))


def _take(values: Sequence[bytes], codes: Ints) -> pa.Array:
    return pa.array(values, pa.binary()).take(pa.array(codes))


class _Pieces:
    """What every event of a batch's workloads starts with, made once for all of them.

    Fewer, longer parts make ``join`` cheaper: constant bytes ride on the varint next to them
    (``varints``' prefix and suffix), and fields that repeat together across workloads (a
    submission's budget-to-kind run, a start's nodes-gpus-allocated run) are written once per
    distinct combination, as ``HistoryWriter`` caches them.
    """

    def __init__(self, b: HistoryBatch) -> None:
        self.b = b
        self.base = pc.binary_join_element_wise(
            b.cluster, pa.scalar(b.source), b.workload_id, pa.scalar(""), pa.scalar("/")
        )  # '{cluster}/{source}/{workload_id}/': every event id but its last word
        self.base_len = np.asarray(pc.binary_length(self.base).to_numpy(zero_copy_only=False), np.int64)
        self.base_bytes = pc.cast(self.base, pa.binary())
        clusters = pc.unique(b.cluster).to_pylist()
        # One cluster (the common file): its bytes are a constant, written with each event id's last word.
        self.cluster: bytes | None = string_bytes(clusters[0]) if len(clusters) == 1 else None
        self.cluster_col = avro_strings(b.cluster) if self.cluster is None else None
        self.ws = avro_strings(b.workload_id)

    def head(
        self, mask: Bools, what: str, type_name: str, rank: int, time: Ints, head: bytes, version: bytes
    ) -> tuple[WireColumns, list[Any]]:
        """Return the columns of one kind of event for the entries in ``mask``, and its bytes to the workload id's."""
        sel = bools(mask)
        all_rows = bool(mask.all())
        base = self.base if all_rows else self.base.filter(sel)
        ids = pc.binary_join_element_wise(base, pa.scalar(what), pa.scalar(""))
        t = time[mask]
        n = len(t)
        cols = WireColumns(
            t, self.b.line[mask], np.zeros(n, np.int64), np.full(n, rank, np.int64),
            np.full(n, _TYPE_INDEX[type_name], np.int64), ids, ids,
        )  # fmt: skip
        word = what.encode()
        id_len = varints(zigzag(self.base_len[mask] + len(word)), prefix=head)  # union index, id's length
        base_bytes = self.base_bytes if all_rows else self.base_bytes.filter(sel)
        ws = self.ws if all_rows else self.ws.filter(sel)
        if self.cluster is not None:
            parts: list[Any] = [id_len, base_bytes, varints(zigzag(t), word + self.cluster, version), ws]
        else:
            assert self.cluster_col is not None
            cluster = self.cluster_col if all_rows else self.cluster_col.filter(sel)
            parts = [id_len, base_bytes, word, cluster, varints(zigzag(t), suffix=version), ws]
        return cols, parts


def _codes(values: pa.Array | Ints) -> tuple[Ints, list[Any]]:
    """Return each row's code and each code's value, for a string column or an integer one."""
    if isinstance(values, np.ndarray):
        v = values.astype(np.int64)
        lo, hi = (int(v.min()), int(v.max())) if len(v) else (0, 0)
        if hi - lo < 1 << 16:  # a small range (GPU counts, flags, limits): the value is the code, no sort
            out: Ints = v - lo
            return out, list(range(lo, hi + 1))
        uniq, inverse = np.unique(v, return_inverse=True)
        return inverse.reshape(-1).astype(np.int64), uniq.tolist()
    encoded = pc.dictionary_encode(values)
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64), encoded.dictionary.to_pylist()


def by_combination(columns: Sequence[pa.Array | Ints], write: Callable[..., bytes]) -> pa.Array:
    """Return ``write(*values)`` for each row's values of ``columns``, called once per distinct combination."""
    n = len(columns[0])
    coded = [_codes(c) for c in columns]
    key = np.zeros(n, np.int64)
    space = 1
    for codes, values in coded:
        space *= max(len(values), 1)
        if space >= 1 << 62:  # too many combinations to number: each row is its own
            rows = zip(*(np.asarray(v, dtype=object)[c] for c, v in coded), strict=True)
            return pa.array([write(*row) for row in rows], pa.binary())
        key = key * max(len(values), 1) + codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    made = [write(*(values[codes[r]] for codes, values in coded)) for r in first.tolist()]
    return pa.array(made, pa.binary()).take(pa.array(inverse.reshape(-1)))


def wire_columns(b: HistoryBatch) -> list[WireColumns] | None:
    """Return the events of a batch as columns, bytes included; None if the schema is not what the writer writes."""
    layout = wire_layout()
    if layout is None:
        return None
    if not len(b):
        return []
    heads = layout.heads
    out = []
    p = _Pieces(b)
    everyone = np.ones(len(b), np.bool_)
    cols, parts = p.head(everyone, "submit", "WorkloadSubmitted", 0, b.submit, heads["WorkloadSubmitted"], b"\x04")
    kinds = layout.enums["WorkloadSubmitted", "kind"]

    def middle(
        budget: str, user: str, gpus: int, nodes: int, min_rt: int, resumable: bool, prio: int, kind: int
    ) -> bytes:
        return b"".join(
            (
                string_bytes(budget), string_bytes(user), zigzag_bytes(gpus), zigzag_bytes(nodes), zigzag_bytes(min_rt),
                b"\x01" if resumable else b"\x00", zigzag_bytes(prio), kinds[KINDS[kind]],
            )
        )  # fmt: skip

    fields = (b.budget, b.user, b.gpus, b.nodes, b.min_runtime_s, b.resumable, b.priority, b.kind)
    # work_s (null or a long), then checkpoint_interval_s and restart_s: null
    work = varints(zigzag(b.work_s), prefix=b"\x02", suffix=b"\x00\x00")
    work = pc.if_else(bools(b.has_work), work, pa.scalar(b"\x00\x00\x00", pa.binary()))
    cols.data = join(*parts, by_combination(fields, middle), work)
    out.append(cols)
    ran = b.ran
    if ran.any():
        cols, parts = p.head(ran, "start1", "WorkloadStarted", 1, b.start, heads["WorkloadStarted"], b"\x02")

        def where(hosts: int, gpus: int, allocated: bool) -> bytes:
            data = HistoryWriter.hosts_bytes(b.host_lists[hosts])
            return data + b"\x00" + zigzag_bytes(gpus) + (b"\x01" if allocated else b"\x00")

        nodes = by_combination((b.hosts[ran], b.gpus[ran], b.min_runtime_s[ran] > 0), where)
        protected = varints(zigzag(b.start[ran] + b.min_runtime_s[ran] * 1_000_000), suffix=b"\x02")  # attempt 1
        cols.data = join(*parts, nodes, protected)
        out.append(cols)
    preempted = ran & b.has_end & (b.preempted >= 0)
    if preempted.any():
        cols, parts = p.head(preempted, "preempt1", "WorkloadPreempted", 2, b.end, heads["WorkloadPreempted"], b"\x02")
        reasons = [layout.enums["WorkloadPreempted", "reason"][r] + b"\x00" for r in REASONS]  # preempted_by: null
        cols.data = join(*parts, _take(reasons, b.preempted[preempted]))
        out.append(cols)
        requeued = preempted & b.requeued
        if requeued.any():
            cols, parts = p.head(requeued, "requeue1", "WorkloadRequeued", 3, b.end, heads["WorkloadRequeued"], b"\x02")
            cols.data = join(*parts)
            out.append(cols)
    ended = (b.outcome >= 0) & b.has_end
    if ended.any():
        cols, parts = p.head(ended, "end", "WorkloadCompleted", 4, b.end, heads["WorkloadCompleted"], b"\x02")
        outcomes = [layout.enums["WorkloadCompleted", "outcome"][o] for o in OUTCOMES]
        cols.data = join(*parts, _take(outcomes, b.outcome[ended]))
        out.append(cols)
    return out


def history_columns(
    histories: Sequence[tuple[History, str, str]], places: Sequence[tuple[int, int]]
) -> WireColumns | None:
    """Return the events of histories read row by row, each at its (line, sub), as columns; None if not writable."""
    writers: dict[tuple[str, str], HistoryWriter] = {}
    items: list[tuple[int, str, str, bytes]] = []
    lines: list[int] = []
    subs: list[int] = []
    ranks: list[int] = []
    try:
        for (h, cluster, source), (line, sub) in zip(histories, places, strict=True):
            writer = writers.get((cluster, source))
            if writer is None:
                layout = wire_layout()
                if layout is None:
                    return None
                writer = writers[cluster, source] = HistoryWriter(cluster, source, layout)
            before = len(items)
            writer.write(h, items)
            made = len(items) - before
            lines += [line] * made
            subs += [sub] * made
            ranks += range(made)
    except (ValueError, KeyError, TypeError, OverflowError):  # as ``wire_items``: the log's encoder says why
        return None
    return WireColumns(
        np.array([t for t, *_ in items], np.int64),
        np.array(lines, np.int64),
        np.array(subs, np.int64),
        np.array(ranks, np.int64),
        np.array([_TYPE_INDEX[name] for _, name, _, _ in items], np.int64),
        pa.array([eid for _, _, eid, _ in items], pa.string()),
        pa.array([data for *_, data in items], pa.binary()),
    )


def added_columns(items: Sequence[tuple[int, str, str, bytes]]) -> WireColumns:
    """Return events added whole (time, type, id, bytes) as columns placed after every workload's, in their order."""
    n = len(items)
    return WireColumns(
        np.array([t for t, *_ in items], np.int64),
        _AFTER_ALL + np.arange(n, dtype=np.int64),
        np.zeros(n, np.int64),
        np.zeros(n, np.int64),
        np.array([_TYPE_INDEX[name] for _, name, _, _ in items], np.int64),
        pa.array([eid for _, _, eid, _ in items], pa.string()),
        pa.array([data for *_, data in items], pa.binary()),
    )


def merge(parts: Sequence[WireColumns], by_time: bool = True) -> tuple[list[int], list[str], list[str], list[bytes]]:
    """Return (times, type names, ids, bytes) of all events, sorted by time (if ``by_time``), then place, then rank."""
    parts = [p for p in parts if len(p.time)]
    if not parts:
        return [], [], [], []
    time = np.concatenate([p.time for p in parts])
    line, sub, rank = (np.concatenate([getattr(p, k) for p in parts]) for k in ("line", "sub", "rank"))
    if line.max() < 1 << 40 and sub.max() < 1 << 16 and rank.max() < 1 << 7:
        keys = [(line << 23) | (sub << 7) | rank]  # one key sorts faster than three
    else:
        keys = [rank, sub, line]
    order = np.lexsort((*keys, time) if by_time else tuple(keys))
    # Python objects in the end (the log takes lists): made per part, then put in order by numpy.
    ids = np.empty(len(time), dtype=object)
    data = np.empty(len(time), dtype=object)
    at = 0
    for p in parts:
        ids[at : at + len(p.time)] = p.ids.to_pylist()
        data[at : at + len(p.time)] = p.data.to_pylist()
        at += len(p.time)
    names = np.array(TYPES, dtype=object)[np.concatenate([p.type for p in parts])[order]]
    return time[order].tolist(), names.tolist(), ids[order].tolist(), data[order].tolist()
