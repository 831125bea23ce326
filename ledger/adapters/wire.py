"""The Avro bytes of imported histories, written directly: the importers' fast path into the log.

An imported workload yields up to five kinds of event (submitted, started, preempted, requeued,
completed) whose fields mostly repeat from one workload to the next: the cluster, the budget, the
user, the GPU count, the node list. Building a dict per event and encoding it field by field with
the log's compiled encoder cost more than reading the file. ``HistoryWriter`` instead writes each
event's bytes straight from the ``History``, in the schema's field order, from pieces it encodes
once and remembers (the cluster, a workload's "budget..kind" run of fields, a node list with its
GPU count), so an event costs a handful of joins. ``history_records`` (``ledger.adapters.history``)
remains the definition of what the events hold; the bytes here are exactly the log's encoder's
bytes for those records, which ``tests/adapters/test_wire.py`` checks for every pinned test file
and for generated histories.

The writer knows the field lists it writes; it reads the union indexes and enum symbols from the
schema, and if a schema's fields ever differ from what it writes, ``wire_writer`` returns None and
the import falls back to records and the log's encoder (slower, never wrong).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ledger.adapters.history import History
from ledger.codec import union_schema
from ledger.log.avro_encode import varint

__all__ = ["HistoryWriter", "WireItem", "wire_writer"]

WireItem = tuple[int, str, str, bytes]
"""(time in µs, event type name, event_id, the record's bytes as a branch of the log's union)."""

# The fields each record is written with, in order: if the schema says otherwise, no direct writing.
_WRITES = {
    "WorkloadSubmitted": (
        "event_id", "cluster", "time", "schema_version", "workload_id", "budget", "user", "gpus", "nodes",
        "min_runtime_s", "resumable", "priority", "kind", "work_s", "checkpoint_interval_s", "restart_s",
    ),
    "WorkloadStarted": (
        "event_id", "cluster", "time", "schema_version", "workload_id", "nodes", "gpus", "allocated",
        "protected_until", "attempt",
    ),
    "WorkloadPreempted": ("event_id", "cluster", "time", "schema_version", "workload_id", "reason", "preempted_by"),
    "WorkloadRequeued": ("event_id", "cluster", "time", "schema_version", "workload_id"),
    "WorkloadCompleted": ("event_id", "cluster", "time", "schema_version", "workload_id", "outcome"),
}  # fmt: skip
_ENUMS = {("WorkloadSubmitted", "kind"), ("WorkloadPreempted", "reason"), ("WorkloadCompleted", "outcome")}
_TRUE, _FALSE = b"\x01", b"\x00"


class _Lengths(dict[int, bytes]):
    """A string's length prefix by its length: a plain dict look-up for the common ones, computed for longer."""

    def __missing__(self, n: int) -> bytes:
        return varint(n << 1)


_LEN = _Lengths((n, varint(n << 1)) for n in range(1024))
_CACHE_LIMIT = 1 << 16


def _zigzag(n: int) -> bytes:
    """Return the Avro bytes of an int or long."""
    return varint((n << 1) ^ (n >> 63))


def _string(text: str) -> bytes:
    """Return the Avro bytes of a string (length, then UTF-8)."""
    data = text.encode()
    return _LEN[len(data)] + data


class _Layout:
    """What the writer reads from the schema: each record's union index, and its enums' symbol bytes."""

    def __init__(self, heads: dict[str, bytes], enums: dict[tuple[str, str], dict[str, bytes]]) -> None:
        self.heads = heads
        self.enums = enums


@lru_cache(maxsize=1)
def _layout() -> _Layout | None:
    heads: dict[str, bytes] = {}
    enums: dict[tuple[str, str], dict[str, bytes]] = {}
    for index, schema in enumerate(union_schema()):
        name = str(schema["name"]).rpartition(".")[2]
        if name not in _WRITES:
            continue
        fields = schema["fields"]
        if tuple(f["name"] for f in fields) != _WRITES[name]:
            return None
        heads[name] = varint(index << 1)
        for f in fields:
            if (name, f["name"]) in _ENUMS:
                symbols = f["type"]["symbols"]
                enums[name, f["name"]] = {s: varint(k << 1) for k, s in enumerate(symbols)}
    return _Layout(heads, enums) if len(heads) == len(_WRITES) else None


class HistoryWriter:
    """Write the events of histories of one cluster and source as (time, type, event_id, bytes) items."""

    def __init__(self, cluster: str, source: str, layout: _Layout) -> None:
        self.prefix = f"{cluster}/{source}/"
        self.cluster = _string(cluster)
        heads = layout.heads
        v1 = _zigzag(1)
        # everything of a record before its event_id, and from its cluster to its workload_id
        self.h_sub = heads["WorkloadSubmitted"]
        self.h_start = heads["WorkloadStarted"]
        self.h_pre = heads["WorkloadPreempted"]
        self.h_req = heads["WorkloadRequeued"]
        self.h_end = heads["WorkloadCompleted"]
        self.v2 = _zigzag(2)
        self.v1 = v1
        self.kinds = layout.enums["WorkloadSubmitted", "kind"]
        self.reasons = {k: v + b"\x00" for k, v in layout.enums["WorkloadPreempted", "reason"].items()}  # + by: null
        self.outcomes = layout.enums["WorkloadCompleted", "outcome"]
        self._middles: dict[tuple[Any, ...], bytes] = {}
        self._nodes: dict[tuple[tuple[str, ...], int, bool], bytes] = {}
        self._times: dict[int, bytes] = {}
        self._attempts: dict[tuple[str, int], tuple[str, bytes, bytes]] = {}
        self.submit_cluster = b"submit" + self.cluster
        self.end_cluster = b"end" + self.cluster

    def _time(self, us: int) -> bytes:
        data = self._times.get(us)
        if data is None:
            if len(self._times) >= _CACHE_LIMIT:
                self._times.clear()
            data = self._times[us] = varint((us << 1) ^ (us >> 63))
        return data

    def _middle(self, h: History) -> bytes:
        """Return the bytes of a submission's fields from budget to kind (they repeat across workloads)."""
        key = (h.budget, h.user, h.gpus, h.nodes, h.min_runtime_s, h.resumable, h.priority, h.kind)
        data = self._middles.get(key)
        if data is None:
            if len(self._middles) >= _CACHE_LIMIT:
                self._middles.clear()
            data = self._middles[key] = b"".join(
                (
                    _string(h.budget),
                    _string(h.user),
                    _zigzag(h.gpus),
                    _zigzag(h.nodes),
                    _zigzag(h.min_runtime_s),
                    _TRUE if h.resumable else _FALSE,
                    _zigzag(h.priority),
                    self.kinds[h.kind],
                )
            )
        return data

    def _hosts(self, hosts: tuple[str, ...], gpus: int, allocated: bool) -> bytes:
        """Return the bytes of a start's nodes, gpus and allocated fields."""
        key = (hosts, gpus, allocated)
        data = self._nodes.get(key)
        if data is None:
            if len(self._nodes) >= _CACHE_LIMIT:
                self._nodes.clear()
            parts = [varint(len(hosts) << 1), *map(_string, hosts)] if hosts else []
            parts += [b"\x00", _zigzag(gpus), _TRUE if allocated else _FALSE]
            data = self._nodes[key] = b"".join(parts)
        return data

    def write(self, h: History, out: list[WireItem]) -> None:
        """Append the items of one history's events to ``out`` in the order ``history_records`` gives them."""
        # An event_id is base + what; its bytes are the length of both, then base's, then what's
        # (with the cluster after it: one constant piece per kind of event).
        wid = h.workload_id
        base = f"{self.prefix}{wid}/"
        bb = base.encode()
        nb = len(bb)
        ws = _string(wid)
        tail = self.v1 + ws  # schema_version 1, workload_id
        times = self._times
        t = h.submit
        out.append(
            (
                t,
                "WorkloadSubmitted",
                base + "submit",
                b"".join(
                    (
                        self.h_sub,
                        _LEN[nb + 6],
                        bb,
                        self.submit_cluster,
                        times.get(t) or self._time(t),
                        self.v2,
                        ws,
                        self._middle(h),
                        b"\x00" if h.work_s is None else b"\x02" + _zigzag(h.work_s),
                        b"\x00\x00",  # checkpoint_interval_s, restart_s: null
                    )
                ),
            )
        )
        if h.runs:
            protect = h.min_runtime_s * 1_000_000
            gpus, allocated = h.gpus, h.min_runtime_s > 0
            last = len(h.runs)
            for n, run in enumerate(h.runs, 1):
                what, what_cluster, attempt = self._attempt("start", n)
                t = run.start
                key = (run.hosts, gpus, allocated)
                out.append(
                    (
                        t,
                        "WorkloadStarted",
                        base + what,
                        b"".join(
                            (
                                self.h_start,
                                _LEN[nb + len(what)],
                                bb,
                                what_cluster,
                                times.get(t) or self._time(t),
                                tail,
                                self._nodes.get(key) or self._hosts(*key),
                                times.get(t + protect) or self._time(t + protect),
                                attempt,
                            )
                        ),
                    )
                )
                if run.end is None or run.preempted is None:
                    continue
                t = run.end
                end = times.get(t) or self._time(t)
                what, what_cluster, _ = self._attempt("preempt", n)
                out.append(
                    (
                        t,
                        "WorkloadPreempted",
                        base + what,
                        b"".join(
                            (
                                self.h_pre,
                                _LEN[nb + len(what)],
                                bb,
                                what_cluster,
                                end,
                                tail,
                                self.reasons[run.preempted],
                            )
                        ),
                    )
                )
                if run.requeued or n < last:
                    what, what_cluster, _ = self._attempt("requeue", n)
                    out.append(
                        (
                            t,
                            "WorkloadRequeued",
                            base + what,
                            b"".join((self.h_req, _LEN[nb + len(what)], bb, what_cluster, end, tail)),
                        )
                    )
        if h.outcome is not None and h.end is not None:
            t = h.end
            out.append(
                (
                    t,
                    "WorkloadCompleted",
                    base + "end",
                    b"".join(
                        (
                            self.h_end,
                            _LEN[nb + 3],
                            bb,
                            self.end_cluster,
                            times.get(t) or self._time(t),
                            tail,
                            self.outcomes[h.outcome],
                        )
                    ),
                )
            )

    def _attempt(self, what: str, n: int) -> tuple[str, bytes, bytes]:
        """Return ``what`` numbered (``start2``), its bytes followed by the cluster's, and the bytes of ``n``."""
        key = (what, n)
        found = self._attempts.get(key)
        if found is None:
            text = f"{what}{n}"
            found = self._attempts[key] = (text, text.encode() + self.cluster, _zigzag(n))
        return found


def wire_writer(cluster: str, source: str) -> HistoryWriter | None:
    """Return a writer for histories of ``cluster`` read from ``source``; None if the schema is not what it writes."""
    layout = _layout()
    return None if layout is None else HistoryWriter(cluster, source, layout)


def wire_items(histories: Sequence[tuple[History, str, str]]) -> list[WireItem] | None:
    """Return the items of every (history, cluster, source) in turn; None if they cannot be written directly."""
    out: list[WireItem] = []
    writers: dict[tuple[str, str], HistoryWriter] = {}
    try:
        for h, cluster, source in histories:
            writer = writers.get((cluster, source))
            if writer is None:
                made = wire_writer(cluster, source)
                if made is None:
                    return None
                writer = writers[cluster, source] = made
            writer.write(h, out)
    except (ValueError, KeyError, TypeError, OverflowError):  # text UTF-8 cannot hold (a lone surrogate), ...
        return None  # ... so the log's own encoder gets the records, and says which value it cannot write
    return out
