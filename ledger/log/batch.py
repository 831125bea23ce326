"""A batch of events given as columns, kept in sort-key order, ready to be appended as one container block.

``EventBatch`` is what the file importers and the replay hand the log (``EventLog.append_batch``)
instead of one record object per event. Each ``add`` gives the events of one type as columns
(``ledger.log.avro_columns``: numpy or pyarrow arrays, ``Coded`` columns, constants, or an Arrow
table, record batch reader or DuckDB relation whose columns are named after the fields), which
are encoded at once, and optionally sort keys: the block holds the events ordered by their keys,
ties in the order they were added (``keys=0``: simply in the order added). Events made one by one
as objects come already encoded by the per-record encoder (``add_encoded``: the replay's).

A batch larger than ``memory`` bytes of encoded events (and their keys) does not stay in memory:
its events are sorted and written to a temporary file (a *run*) in ``spill`` (default: the
system's temporary directory) whenever that much has gathered, their event_ids to another in
the order added, and ``append_batch`` merges the runs while it writes the block. So a batch of
any size needs about ``memory`` bytes and 9 bytes an event (a hash of its event_id, to find
repeats, and whether to write it), and the block is written exactly as if it had been encoded in
one go. Nothing reaches the log before ``append_batch``: a value that cannot be encoded raises
``EventValidationError`` from ``add``, naming the event, field and value.
"""

from __future__ import annotations

import bisect
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from ledger.codec import union_schema
from ledger.errors import EventValidationError
from ledger.log.avro_columns import Coded, ColumnEncoder, column_value
from ledger.log.avro_encode import UnencodableValue, union_encoder
from ledger.log.checks import FULL_NAMES

__all__ = ["MEMORY", "REMEMBERED", "EventBatch", "Plan", "column_encoder"]

MEMORY = 512 << 20
"""Bytes of encoded events (and their sort keys) a batch keeps in memory before it sorts them into a run on disk."""

REMEMBERED = 1 << 18
"""Events a batch may hold for the log to remember their ids as strings once written (more: read back if needed)."""
_SLICE = 1 << 18  # rows encoded in one call: bounds the temporaries (and a call's 2 GiB of records)
_WINDOW = 1 << 16  # rows of each run read at a time while merging (and ids while looking for repeats)


@lru_cache(maxsize=1)
def column_encoder() -> ColumnEncoder:
    """Return the column encoder of the log's union schema (made once per process)."""
    return ColumnEncoder(union_encoder(union_schema()))  # type: ignore[arg-type]  # the log's schema is a union


class _Memory:
    """The encoded events of a batch since its last run: its parts as they were added, each sorted by its keys."""

    def __init__(self, keys: int) -> None:
        self.keys = keys
        self.records: list[pa.BinaryArray] = []
        self.key_parts: list[list[npt.NDArray[np.int64]]] = []
        self.seqs: list[npt.NDArray[np.int64]] = []
        self.bytes = 0  # records, and the sort keys and sequence of each

    @property
    def parts(self) -> int:
        return len(self.seqs)

    def add(self, records: pa.BinaryArray, keys: list[npt.NDArray[np.int64]], seq: npt.NDArray[np.int64]) -> None:
        self.records.append(records)
        self.key_parts.append(keys)
        self.seqs.append(seq)
        self.bytes += records.nbytes + 8 * (self.keys + 1) * len(seq)

    def clear(self) -> None:
        """Forget the events."""
        self.records, self.key_parts, self.seqs = [], [], []
        self.bytes = 0


class _Run:
    """Events in key order: what is in memory seen through the order of its keys, or a run on disk.

    Read a window at a time: ``window(i)`` gives a window's sort keys, seq and record lengths,
    ``records(a, b)`` the records of rows ``a:b``, from the parts in memory (each sorted, so a
    window reads each in order) or from the run's files (read, not mapped: mapped pages would count
    as the process's memory), so a run on disk is never held whole.
    """

    def __init__(self, keys: int, memory: _Memory | None = None, path: Path | None = None) -> None:
        self.order: npt.NDArray[np.int64] | None = None  # rows of the parts in key order (None: one part, in order)
        self._file: Any = None
        self._keys: list[npt.NDArray[np.int64]] | None = None
        self.seq = np.zeros(0, np.int64)
        if path is not None:  # a run on disk: its keys and records read a window at a time when asked for
            self._file = ipc.open_file(pa.OSFile(str(path)))
            self._key_file = ipc.open_file(pa.OSFile(str(path.with_suffix(".keys"))))
            self.num_rows = int(self._key_file.schema.metadata[b"rows"])
            self._starts = np.arange(0, self.num_rows + _WINDOW, _WINDOW)  # (both are written a window a batch)
            self._cached: tuple[int, pa.RecordBatch] | None = None
            self._key_cache: dict[int, list[npt.NDArray[np.int64]]] = {}
            self._nkeys = keys
            return
        assert memory is not None
        none = np.zeros(0, np.int64)
        self._parts = memory.records
        self._part_starts = np.cumsum([0] + [len(r) for r in memory.records])
        self._keys_added = [np.concatenate([p[k] for p in memory.key_parts]) if memory.key_parts else none
                            for k in range(keys)]  # fmt: skip
        if keys and len(memory.records) > 1:  # (one part alone was sorted when added)
            columns = pa.table({f"k{k}": self._keys_added[k] for k in range(keys)})
            by = [(c, "ascending") for c in columns.column_names]
            self.order = np.asarray(pc.sort_indices(columns, sort_keys=by), np.int64)
        self.seq = self._ordered(np.concatenate(memory.seqs) if memory.seqs else none)
        self._lengths_added = np.concatenate(
            [np.diff(np.frombuffer(r.buffers()[1], np.int32, count=len(r) + 1, offset=r.offset * 4))
             for r in memory.records]
        ).astype(np.int64) if memory.records else none  # fmt: skip
        self.num_rows = len(self.seq)

    def _ordered(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return values if self.order is None else values[self.order]

    def window(self, i: int) -> list[npt.NDArray[np.int64]]:
        """Return window ``i``'s sort keys, then its seq and its records' lengths (in key order)."""
        a, b = i * _WINDOW, min(self.num_rows, (i + 1) * _WINDOW)
        if self._file is None:
            if self._keys is None:  # (only a merge or a spill needs them in key order: made when first asked for)
                self._keys = [self._ordered(k) for k in self._keys_added]
                self._keys.append(self._ordered(self._lengths_added))
            return [*(k[a:b] for k in self._keys[:-1]), self.seq[a:b], self._keys[-1][a:b]]
        got = self._key_cache.get(i)
        if got is None:
            if len(self._key_cache) > 2:
                self._key_cache.clear()
            batch = self._key_file.get_batch(i)
            got = self._key_cache[i] = [np.asarray(c.to_numpy(), np.int64) for c in batch.columns]
        return got

    def windows(self) -> Iterator[list[npt.NDArray[np.int64]]]:
        """Yield every window's sort keys, seq and lengths, in key order."""
        for i in range((self.num_rows + _WINDOW - 1) // _WINDOW):
            yield self.window(i)

    def keys_of(self, a: int, b: int) -> list[npt.NDArray[np.int64]]:
        """Return the sort keys of rows a:b (in key order)."""
        if a >= b:
            return [np.zeros(0, np.int64)] * self._key_count
        first, last = a // _WINDOW, (b - 1) // _WINDOW
        pieces = [self.window(i) for i in range(first, last + 1)]
        lo, hi = a - first * _WINDOW, b - first * _WINDOW
        return [np.concatenate([p[k] for p in pieces])[lo:hi] for k in range(self._key_count)]

    def key_at(self, row: int) -> tuple[int, ...]:
        """Return the sort keys of one row, as a tuple (for comparing rows of different runs)."""
        w = self.window(row // _WINDOW)
        return tuple(int(w[k][row % _WINDOW]) for k in range(self._key_count))

    @property
    def _key_count(self) -> int:
        return self._nkeys if self._file is not None else len(self._keys_added)

    def kept_bytes(self, keep: npt.NDArray[np.bool_]) -> int:
        """Return the bytes of the records ``keep`` (in key order) marks."""
        if self._file is not None:
            return sum(int(w[-1][keep[i * _WINDOW : i * _WINDOW + len(w[-1])]].sum()) for i, w in
                       enumerate(self.windows()))  # fmt: skip
        dropped = np.flatnonzero(~keep)
        if self.order is not None:
            dropped = self.order[dropped]
        return int(self._lengths_added.sum() - self._lengths_added[dropped].sum())

    def seq_of(self) -> Iterator[npt.NDArray[np.int64]]:
        """Yield the seq of the rows, a window at a time, in key order."""
        if self._file is None:
            yield self.seq
            return
        for w in self.windows():
            yield w[-2]

    def records(self, a: int, b: int) -> pa.BinaryArray:
        """Return the records of rows a:b (in key order)."""
        if self._file is not None:
            return self._read(a, b)
        if self.order is None:
            if not self._parts:
                return pa.array([], pa.binary())
            return pa.concat_arrays(self._parts).slice(a, b - a) if len(self._parts) > 1 else self._parts[0].slice(
                a, b - a)  # fmt: skip
        rows = self.order[a:b]
        part = np.searchsorted(self._part_starts, rows, side="right") - 1
        grouped = np.argsort(part, kind="stable")  # the window's rows part by part, each part's in order
        pieces, at = [], 0
        for p, count in zip(*np.unique(part[grouped], return_counts=True), strict=True):
            local = rows[grouped[at : at + count]] - self._part_starts[p]
            pieces.append(self._parts[p].take(pa.array(local)))
            at += count
        back = np.empty(len(rows), np.int64)
        back[grouped] = np.arange(len(rows))
        together = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
        return together.take(pa.array(back))

    def _read(self, a: int, b: int) -> pa.BinaryArray:
        """Return rows a:b of the run on disk, reading the windows they lie in."""
        pieces = []
        first = int(np.searchsorted(self._starts, a, side="right")) - 1
        last = int(np.searchsorted(self._starts, b - 1, side="right")) - 1 if b > a else first
        for i in range(first, last + 1):
            if self._cached is None or self._cached[0] != i:
                self._cached = (i, self._file.get_batch(i))
            batch, start = self._cached[1], int(self._starts[i])
            lo, hi = max(a, start) - start, min(b, start + batch.num_rows) - start
            pieces.append(batch.column(0).slice(lo, hi - lo))
        return pa.concat_arrays(pieces) if len(pieces) != 1 else pieces[0]


class Plan:
    """What appending a batch writes: the runs in key order, which of their events to write, how many and bytes."""

    def __init__(self, runs: list[_Run], keep: list[npt.NDArray[np.bool_]], ids: list[str] | None) -> None:
        self.runs = runs
        self.keep = keep
        self.ids = ids  # the event_ids written, in block order; None when the batch was too big to keep them
        self.count = sum(int(k.sum()) for k in keep)
        self.size = sum(run.kept_bytes(k) for run, k in zip(runs, keep, strict=True))


class EventBatch:
    """Events of any types as columns, ordered by sort keys, to be appended to a log as one block."""

    def __init__(
        self, keys: int = 0, *, memory: int | None = None, spill: str | os.PathLike[str] | None = None
    ) -> None:
        self.keys = keys
        self.memory = memory or MEMORY
        self.counts: Counter[str] = Counter()  # events added, by type
        self._spill_dir = spill
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._encoder = column_encoder()
        self._memory = _Memory(keys)  # added since the last run was written, each part sorted
        self._runs: list[Path] = []
        self._ids: list[pa.Array | list[str]] = []  # event_ids, in the order added, while they are in memory
        self._ids_file: Any = None  # ... and once the batch spilled, on disk
        self._hashes: list[npt.NDArray[np.uint64]] = []  # of the event_ids, in the order added
        self._seq = 0
        self._hasher: Any = None

    def __len__(self) -> int:
        """Return how many events were added (repeats included: the log drops them when appending)."""
        return self._seq

    @property
    def spilled(self) -> bool:
        """Tell whether part of the batch waits on disk (it outgrew ``memory``)."""
        return bool(self._runs)

    def add(self, type_name: str, columns: Any, n: int | None = None, keys: Sequence[Any] = ()) -> None:
        """Add events of one type: ``columns`` by field name (``n`` rows), or an Arrow table / stream of them.

        ``keys``: ``self.keys`` sort keys, each a column of ``n`` whole numbers or one number for all
        rows. Raises EventValidationError naming the first event whose value cannot be encoded.
        """
        if len(keys) != self.keys:
            raise ValueError(f"{len(keys)} sort keys for a batch ordered by {self.keys}")
        full = FULL_NAMES.get(type_name)
        if full is None:
            raise EventValidationError(f"unknown event type {type_name!r}", field="type", value=type_name)
        if not isinstance(columns, Mapping):
            self._add_stream(type_name, columns, keys)
            return
        if n is None:
            raise ValueError("n, the number of rows, is needed with a mapping of columns")
        for start in range(0, n, _SLICE):
            stop = min(n, start + _SLICE)
            part = columns if (start, stop) == (0, n) else {k: _slice(v, start, stop) for k, v in columns.items()}
            rows = [k if isinstance(k, int | np.integer) else _slice(k, start, stop) for k in keys]
            self._add(type_name, full, part, stop - start, rows)

    def _add_stream(self, type_name: str, source: Any, keys: Sequence[Any]) -> None:
        """Add the record batches of an Arrow table, record batch reader, or anything with an Arrow C stream."""
        if isinstance(source, pa.RecordBatch):
            batches: Any = [source]
        elif isinstance(source, pa.Table):
            batches = source.to_batches()
        elif isinstance(source, pa.RecordBatchReader):
            batches = source
        else:
            batches = pa.RecordBatchReader.from_stream(source)  # a DuckDB relation, a polars frame...
        at = 0
        for record_batch in batches:
            rows = record_batch.num_rows
            columns = dict(zip(record_batch.schema.names, record_batch.columns, strict=True))
            key_rows = [k if isinstance(k, int | np.integer) else _slice(k, at, at + rows) for k in keys]
            self.add(type_name, columns, rows, key_rows)
            at += rows

    def _add(self, type_name: str, full: str, columns: Mapping[str, Any], n: int, keys: list[Any]) -> None:
        if n == 0:
            return
        try:
            records = self._encoder.encode(full, columns, n)
        except UnencodableValue as exc:
            where = None if exc.event_id is None else f"event {exc.event_id!r}"
            raise EventValidationError(str(exc), field=exc.field, value=exc.value, where=where) from None
        self.counts[type_name] += n
        self._take(records, _ids(columns.get("event_id"), n), keys)

    def add_encoded(self, records: pa.BinaryArray, ids: list[str], keys: Sequence[Any] = ()) -> None:
        """Add events already encoded, each a branch of the log's union, as the per-record encoder writes it.

        For events made one by one as objects (the replay's): the generated per-record encoder is the
        cheapest way from an object to its bytes, and the batch still writes them as one block, in
        key order, without repeats. ``ids``: each record's event_id. Not counted by type.
        """
        if len(keys) != self.keys:
            raise ValueError(f"{len(keys)} sort keys for a batch ordered by {self.keys}")
        if len(ids) != len(records):
            raise ValueError(f"{len(ids)} event ids for {len(records)} encoded records")
        if len(records):
            self._take(records, ids, list(keys))

    def _take(self, records: pa.BinaryArray, ids: pa.Array | list[str], keys: Sequence[Any]) -> None:
        """Keep encoded records (each part sorted by its keys) with their ids; spill when memory is full."""
        n = len(records)
        columns_of_keys = [np.full(n, key, np.int64) if isinstance(key, int | np.integer) else _int64(key, n)
                           for key in keys]  # fmt: skip
        seq = np.arange(self._seq, self._seq + n, dtype=np.int64)
        if self.keys and not _in_order(columns_of_keys):
            # sorted now, while it is small: the sort of everything in memory then reads each part in
            # order, one after the other, several times faster than gathering records from anywhere
            order = np.lexsort(columns_of_keys[::-1])
            records, seq = records.take(pa.array(order)), seq[order]
            columns_of_keys = [k[order] for k in columns_of_keys]
        self._ids.append(ids)
        self._seq += n
        self._memory.add(records, columns_of_keys, seq)
        if self._memory.bytes >= self.memory:
            self._spill()

    def _hash_ids(self) -> None:
        """Keep a 64-bit hash of each event_id not hashed yet, in the order added (DuckDB's hash function)."""
        done = sum(len(h) for h in self._hashes)
        fresh = pa.chunked_array([_arrow(i) for i in self._ids], pa.string()).slice(done - self._ids_written)
        if len(fresh):
            self._hashes.append(self._hash(fresh))

    def _hash(self, ids: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.uint64]:
        if self._hasher is None:
            import duckdb

            self._hasher = duckdb.connect()
        self._hasher.register("batch_ids", pa.table({"id": ids}))
        try:
            got = self._hasher.execute("SELECT hash(id) AS h FROM batch_ids").fetchnumpy()["h"]
        finally:
            self._hasher.unregister("batch_ids")
        return np.asarray(got, np.uint64)

    @property
    def _ids_written(self) -> int:
        return 0 if self._ids_file is None else self._ids_file[1]

    # --- in key order ---------------------------------------------------------------------------------

    def _pending_run(self, hash_ids: bool = True) -> _Run:
        """Return what is in memory as a run in key order (a stable sort: ties in the order added), and forget it.

        Each part was sorted when it was added, so the rows are read one part after the other.
        """
        if hash_ids:
            self._hash_ids()
        run = _Run(self.keys, memory=self._memory)
        self._memory = _Memory(self.keys)
        return run

    def _spill(self) -> None:
        """Write what is in memory to a new run on disk, in key order; move the ids met so far to disk."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gpuledger-batch-", dir=self._spill_dir)
        run = self._pending_run()
        folder = Path(self._tmp.name)
        path = folder / f"run{len(self._runs):05d}.arrow"
        schema = pa.schema([("record", pa.binary())])
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, schema) as out:
            for a in range(0, run.num_rows, _WINDOW):
                out.write_batch(pa.record_batch([run.records(a, min(run.num_rows, a + _WINDOW))], schema=schema))
        schema = pa.schema([*((f"k{k}", pa.int64()) for k in range(self.keys)), ("seq", pa.int64()),
                            ("length", pa.int64())], metadata={"rows": str(run.num_rows)})  # fmt: skip
        with pa.OSFile(str(path.with_suffix(".keys")), "wb") as sink, ipc.new_file(sink, schema) as out:
            for window in run.windows():
                out.write_batch(pa.record_batch([pa.array(c) for c in window], schema=schema))
        self._runs.append(path)
        if self._ids_file is None:
            self._ids_file = (ipc.new_stream(str(folder / "ids.arrow"), pa.schema([("id", pa.string())])), 0)
        writer, written = self._ids_file
        for ids in self._ids:
            writer.write_batch(pa.record_batch([_arrow(ids)], names=["id"]))
            written += len(ids)
        self._ids_file, self._ids = (writer, written), []

    def _all_ids(self) -> Iterator[pa.Array]:
        """Yield the event_ids in the order added, a piece at a time (those on disk first)."""
        if self._ids_file is not None:
            assert self._tmp is not None
            self._ids_file[0].close()
            self._ids_file = (_Closed(), self._ids_file[1])
            with pa.OSFile(str(Path(self._tmp.name) / "ids.arrow")) as source:
                for record_batch in ipc.open_stream(source):
                    yield record_batch.column(0)
        yield from map(_arrow, self._ids)

    def plan(self, known: set[str]) -> Plan:
        """Return what appending the batch writes: its events less those in ``known`` and repeats.

        An event_id repeated in the batch is kept where it comes first in the block (key order, ties
        in the order added). A small batch compares its ids as strings; a large one finds repeats by
        the ids' hashes first, then compares the ids that share one.
        """
        runs = [_Run(self.keys, path=path) for path in self._runs]
        if self._memory.parts or not runs:
            runs.append(self._pending_run(hash_ids=self._seq > REMEMBERED))
        if not self.spilled and self._seq <= REMEMBERED:
            every: list[str] = []
            for ids in self._ids:
                every += ids if isinstance(ids, list) else ids.to_pylist()
            in_order = [every[at] for at in runs[0].seq.tolist()]  # block order (what is in memory: one run)
            write_in_order = _first_of_each_id(in_order, known)
            keep = [write_in_order]
            return Plan(runs, keep, [i for i, w in zip(in_order, write_in_order.tolist(), strict=True) if w])
        self._hash_ids()
        write = np.ones(self._seq, np.bool_)  # in the order added
        if known:  # ids already in the log (Python strings: checked a window at a time)
            at = 0
            for ids in self._all_ids():
                for start in range(0, len(ids), _WINDOW):
                    chunk = ids.slice(start, _WINDOW).to_pylist()
                    if not known.isdisjoint(chunk):
                        write[at + start : at + start + len(chunk)] &= [i not in known for i in chunk]
                at += len(ids)
        ordered = np.concatenate(self._hashes) if self._hashes else np.zeros(0, np.uint64)
        self._hashes = []
        ordered.sort()  # (in place: the hashes in the order added are made again in the rare case they are needed)
        twice = ordered[1:][ordered[1:] == ordered[:-1]]
        del ordered
        if len(twice):  # rows that share a hash with another: compare their ids
            again = np.concatenate([self._hash(ids) for ids in self._all_ids()])
            self._first_of_each(runs, np.flatnonzero(np.isin(again, twice) & write), write)
        keep = [np.concatenate([write[seq] for seq in run.seq_of()]) if run.num_rows else np.zeros(0, np.bool_)
                for run in runs]  # fmt: skip
        ids = None
        return Plan(runs, keep, ids)

    def _first_of_each(self, runs: list[_Run], suspects: npt.NDArray[np.int64], write: npt.NDArray[np.bool_]) -> None:
        """Write only the first (in block order) of the ``suspects`` (by seq) that share an event_id."""
        ids: dict[int, str] = {}
        at = 0
        for piece in self._all_ids():
            inside = suspects[(suspects >= at) & (suspects < at + len(piece))]
            for seq, event_id in zip(inside.tolist(), piece.take(pa.array(inside - at)).to_pylist(), strict=True):
                ids[seq] = event_id
            at += len(piece)
        first: dict[str, tuple[tuple[int, ...], int]] = {}
        for at_run, run in enumerate(runs):
            for i, window in enumerate(run.windows()):
                for row in np.flatnonzero(np.isin(window[-2], suspects)).tolist():
                    seq = int(window[-2][row])
                    place = (*(int(k[row]) for k in window[: self.keys]), at_run, i * _WINDOW + row)
                    seen = first.get(ids[seq])
                    if seen is None or place < seen[0]:
                        if seen is not None:
                            write[seen[1]] = False
                        first[ids[seq]] = (place, seq)
                    else:
                        write[seq] = False

    def close(self) -> None:
        """Drop the events and remove the runs on disk."""
        self._memory.clear()
        self._runs, self._hashes, self._ids = [], [], []
        if self._ids_file is not None:
            self._ids_file[0].close()
            self._ids_file = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self._hasher is not None:
            self._hasher.close()
            self._hasher = None

    def __enter__(self) -> EventBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Closed:
    def close(self) -> None:
        """Nothing left to close."""


def merged(plan: Plan) -> Iterator[pa.Buffer | bytes]:
    """Yield the kept records' bytes of the plan's runs in key order (ties in run order), a window at a time."""
    runs, keep = plan.runs, plan.keep
    if len(runs) == 1:
        run, mask = runs[0], keep[0]
        for a in range(0, run.num_rows, _WINDOW):
            b = min(run.num_rows, a + _WINDOW)
            piece = run.records(a, b)
            wanted = mask[a:b]
            if not wanted.all():
                piece = piece.filter(pa.array(wanted))
            yield _body(piece)
        return
    at = [0] * len(runs)
    ends = [run.num_rows for run in runs]
    while True:
        live = [r for r in range(len(runs)) if at[r] < ends[r]]
        if not live:
            return
        # everything up to the first of the windows' last rows (by key, then run) can be written now
        last = [(runs[r].key_at(at[r] + _WINDOW - 1), r) for r in live if at[r] + _WINDOW < ends[r]]
        limit, first = min(last) if last else ((), len(runs))
        picked: list[tuple[int, int, int]] = []
        for r in live:
            stop = min(at[r] + _WINDOW, ends[r])
            if last and r != first:
                # a run before the first one may give rows of the limit's key, one after it only lower keys
                find = bisect.bisect_right if r < first else bisect.bisect_left
                run = runs[r]
                stop = at[r] + find(range(at[r], stop), limit, key=run.key_at)
            if stop > at[r]:
                picked.append((r, at[r], stop))
        pieces = [runs[r].keys_of(a, b) for r, a, b in picked]
        gathered = {f"k{k}": np.concatenate([p[k] for p in pieces]) for k in range(len(pieces[0]))}
        sort = np.asarray(pc.sort_indices(pa.table(gathered), sort_keys=[(c, "ascending") for c in gathered]))
        wanted = np.concatenate([keep[r][a:b] for r, a, b in picked])
        records = pa.chunked_array([runs[r].records(a, b) for r, a, b in picked], pa.binary())
        yield _body(records.take(pa.array(sort[wanted[sort]])))
        for r, _, b in picked:
            at[r] = b


def _first_of_each_id(ids: list[str], known: set[str]) -> npt.NDArray[np.bool_]:
    """Return which ids (in block order) to write: not in ``known``, and the first of each (set operations in C)."""
    if known.isdisjoint(ids) and len(set(ids)) == len(ids):
        return np.ones(len(ids), np.bool_)
    seen: set[str] = set()
    write = np.zeros(len(ids), np.bool_)
    for at, event_id in enumerate(ids):
        if event_id not in known and event_id not in seen:
            seen.add(event_id)
            write[at] = True
    return write


def _in_order(keys: list[npt.NDArray[np.int64]]) -> bool:
    """Tell whether rows are already in the order of their keys (the first key, then the next on a tie...)."""
    ahead = np.ones(len(keys[0]) - 1, np.bool_) if len(keys[0]) else np.zeros(0, np.bool_)
    tied = np.ones_like(ahead)
    for key in keys:
        before, after = key[:-1], key[1:]
        ahead &= ~tied | (before <= after)
        if not ahead.all():
            return False
        tied &= before == after
        if not tied.any():
            return True
    return bool(ahead.all())


def _body(records: pa.BinaryArray | pa.ChunkedArray) -> pa.Buffer | bytes:
    """Return the bytes of records one after the other (the value buffer of a binary column)."""
    if isinstance(records, pa.ChunkedArray):
        records = records.combine_chunks()
    if len(records) == 0:
        return b""
    offsets = np.frombuffer(records.buffers()[1], np.int32, count=len(records) + 1, offset=records.offset * 4)
    start, stop = int(offsets[0]), int(offsets[-1])
    data: pa.Buffer = records.buffers()[2]
    return data.slice(start, stop - start)


def _ids(column: Any, n: int) -> pa.Array:
    """Return the event_id column as pyarrow strings (a coded or constant one materialised)."""
    if column is None:
        raise EventValidationError("events without an event_id column", field="event_id", value=None)
    if isinstance(column, Coded):
        return pa.array(list(column.values), pa.string()).take(pa.array(np.asarray(column.codes)))
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, pa.Array):
        return column.cast(pa.string())
    if isinstance(column, np.ndarray):
        return pa.array([column_value(column, r) for r in range(n)], pa.string())
    return pa.array([column] * n, pa.string())


def _arrow(ids: pa.Array | list[str]) -> pa.Array:
    return pa.array(ids, pa.string()) if isinstance(ids, list) else ids.cast(pa.string())


def _int64(column: Any, n: int) -> npt.NDArray[np.int64]:
    array = np.asarray(column.to_numpy() if isinstance(column, pa.Array | pa.ChunkedArray) else column, np.int64)
    if array.shape != (n,):
        raise ValueError(f"a sort key of {array.shape} for {n} rows")
    return array


def _slice(column: Any, start: int, stop: int) -> Any:
    """Return rows start:stop of a column (a constant stays one)."""
    if isinstance(column, Coded):
        return Coded(column.codes[start:stop], column.values)
    if isinstance(column, np.ndarray):
        return column[start:stop]
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column.slice(start, stop - start)
    return column
