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

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from ledger.adapters.history import History
from ledger.codec import union_schema
from ledger.log.avro_encode import string_bytes, varint, zigzag_bytes

__all__ = ["HistoryWriter", "WireItem", "wire_items", "wire_layout", "wire_writer"]

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
        self.cluster = string_bytes(cluster)
        heads = layout.heads
        v1 = zigzag_bytes(1)
        # each record's union index: what comes before its event_id
        self.h_sub = heads["WorkloadSubmitted"]
        self.h_start = heads["WorkloadStarted"]
        self.h_pre = heads["WorkloadPreempted"]
        self.h_req = heads["WorkloadRequeued"]
        self.h_end = heads["WorkloadCompleted"]
        self.v2 = zigzag_bytes(2)
        self.v1 = v1
        self.kinds = layout.enums["WorkloadSubmitted", "kind"]
        self.reasons = {k: v + b"\x00" for k, v in layout.enums["WorkloadPreempted", "reason"].items()}  # + by: null
        self.outcomes = layout.enums["WorkloadCompleted", "outcome"]
        self._middles: dict[tuple[Any, ...], bytes] = {}
        self._nodes: dict[tuple[tuple[str, ...], int, bool], bytes] = {}
        self._times: dict[int, bytes] = {}
        self._works: dict[int, bytes] = {}
        self._attempts: dict[tuple[str, int], tuple[str, bytes, bytes]] = {}
        self.submit_cluster = b"submit" + self.cluster
        self.end_cluster = b"end" + self.cluster
        self.write = self._make_write()

    def _time(self, us: int) -> bytes:
        """Return the bytes of a time not in the cache, and remember them (a start is often another event's end)."""
        if len(self._times) >= _CACHE_LIMIT:
            self._times.clear()
        data = self._times[us] = varint((us << 1) ^ (us >> 63))
        return data

    def _work(self, work_s: int) -> bytes:
        """Return the bytes of a non-null work_s (union branch 1, then the long)."""
        if len(self._works) >= _CACHE_LIMIT:
            self._works.clear()
        data = self._works[work_s] = b"\x02" + zigzag_bytes(work_s)
        return data

    def _middle(self, key: tuple[Any, ...]) -> bytes:
        """Return the bytes of a submission's fields from budget to kind, given as a tuple (they repeat a lot)."""
        if len(self._middles) >= _CACHE_LIMIT:
            self._middles.clear()
        budget, user, gpus, nodes, min_runtime_s, resumable, priority, kind = key
        data = self._middles[key] = b"".join(
            (
                string_bytes(budget),
                string_bytes(user),
                zigzag_bytes(gpus),
                zigzag_bytes(nodes),
                zigzag_bytes(min_runtime_s),
                _TRUE if resumable else _FALSE,
                zigzag_bytes(priority),
                self.kinds[kind],
            )
        )
        return data

    @staticmethod
    def hosts_bytes(hosts: tuple[str, ...]) -> bytes:
        """Return the bytes of a node list's items, without the array's closing zero."""
        return b"".join([varint(len(hosts) << 1), *map(string_bytes, hosts)]) if hosts else b""

    def _hosts(self, key: tuple[tuple[str, ...], int, bool]) -> bytes:
        """Return the bytes of a start's nodes, gpus and allocated fields, given as a tuple."""
        if len(self._nodes) >= _CACHE_LIMIT:
            self._nodes.clear()
        hosts, gpus, allocated = key
        parts = [self.hosts_bytes(hosts), b"\x00", zigzag_bytes(gpus), _TRUE if allocated else _FALSE]
        data = self._nodes[key] = b"".join(parts)
        return data

    def _make_write(self) -> Callable[[History, list[WireItem]], None]:
        """Return ``write``: a closure over the writer's pieces and caches (it runs once per workload)."""
        h_sub, h_start, h_pre, h_req, h_end = self.h_sub, self.h_start, self.h_pre, self.h_req, self.h_end
        v1, v2, submit_cluster, end_cluster = self.v1, self.v2, self.submit_cluster, self.end_cluster
        prefix, reasons, outcomes = self.prefix, self.reasons, self.outcomes
        times, middles, nodes, attempts = self._times, self._middles, self._nodes, self._attempts
        time_of, middle_of, nodes_of, attempt_of = self._time, self._middle, self._hosts, self._attempt
        lengths = _LEN
        works, work_of = self._works, self._work

        def write(h: History, out: list[WireItem]) -> None:
            """Append the items of one history's events to ``out`` in the order ``history_records`` gives them."""
            # An event_id is base + what; its bytes are the length of both, then base's, then what's
            # (with the cluster's after it: one constant piece per kind of event and attempt).
            wid = h.workload_id
            base = f"{prefix}{wid}/"
            bb = base.encode()
            nb = len(bb)
            wb = wid.encode()
            ws = lengths[len(wb)] + wb
            tail = v1 + ws  # schema_version 1, workload_id
            t = h.submit
            key = (h.budget, h.user, h.gpus, h.nodes, h.min_runtime_s, h.resumable, h.priority, h.kind)
            work = h.work_s
            out.append(
                (
                    t,
                    "WorkloadSubmitted",
                    base + "submit",
                    b"".join(
                        (
                            h_sub,
                            lengths[nb + 6],
                            bb,
                            submit_cluster,
                            times.get(t) or time_of(t),
                            v2,
                            ws,
                            middles.get(key) or middle_of(key),
                            b"\x00" if work is None else works.get(work) or work_of(work),
                            b"\x00\x00",  # checkpoint_interval_s, restart_s: null
                        )
                    ),
                )
            )
            runs = h.runs
            if runs:
                protect = h.min_runtime_s * 1_000_000
                gpus, allocated = h.gpus, h.min_runtime_s > 0
                last = len(runs)
                for n, run in enumerate(runs, 1):
                    what, what_cluster, attempt = attempts.get(("start", n)) or attempt_of("start", n)
                    t = run.start
                    where = (run.hosts, gpus, allocated)
                    out.append(
                        (
                            t,
                            "WorkloadStarted",
                            base + what,
                            b"".join(
                                (
                                    h_start,
                                    lengths[nb + len(what)],
                                    bb,
                                    what_cluster,
                                    times.get(t) or time_of(t),
                                    tail,
                                    nodes.get(where) or nodes_of(where),
                                    times.get(t + protect) or time_of(t + protect),
                                    attempt,
                                )
                            ),
                        )
                    )
                    if run.end is None or run.preempted is None:
                        continue
                    t = run.end
                    end = times.get(t) or time_of(t)
                    what, what_cluster, _ = attempts.get(("preempt", n)) or attempt_of("preempt", n)
                    out.append(
                        (
                            t,
                            "WorkloadPreempted",
                            base + what,
                            b"".join(
                                (h_pre, lengths[nb + len(what)], bb, what_cluster, end, tail, reasons[run.preempted])
                            ),
                        )
                    )
                    if run.requeued or n < last:
                        what, what_cluster, _ = attempts.get(("requeue", n)) or attempt_of("requeue", n)
                        out.append(
                            (
                                t,
                                "WorkloadRequeued",
                                base + what,
                                b"".join((h_req, lengths[nb + len(what)], bb, what_cluster, end, tail)),
                            )
                        )
            outcome = h.outcome
            if outcome is not None and h.end is not None:
                t = h.end
                out.append(
                    (
                        t,
                        "WorkloadCompleted",
                        base + "end",
                        b"".join(
                            (
                                h_end,
                                lengths[nb + 3],
                                bb,
                                end_cluster,
                                times.get(t) or time_of(t),
                                tail,
                                outcomes[outcome],
                            )
                        ),
                    )
                )

        return write

    def _attempt(self, what: str, n: int) -> tuple[str, bytes, bytes]:
        """Return ``what`` numbered (``start2``), its bytes followed by the cluster's, and the bytes of ``n``."""
        text = f"{what}{n}"
        found = self._attempts[what, n] = (text, text.encode() + self.cluster, zigzag_bytes(n))
        return found


def wire_layout() -> _Layout | None:
    """Return what the writers read from the schema (union indexes, enum symbols); None if it is not what they write."""
    return _layout()


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
