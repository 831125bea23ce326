"""The embedded event log: an append-only directory of Avro segments, durable batch by batch.

Guarantees:

* **Durable appends.** A batch is validated, encoded into one container block in memory, written
  with one ``write`` and fsynced before ``append`` returns; creating a segment also fsyncs the
  directory. What ``append`` acknowledged survives a crash or power loss.
* **Crash recovery.** A crash mid-append leaves at most a torn last block. Readers stop at the
  last complete block; the next writer cuts the torn bytes off (``recovered_bytes``). Damage with
  complete blocks after it is not a crash but corruption: it raises LogCorruptError, never truncates.
* **All or nothing.** Every event of a batch is validated first; one bad event raises
  EventValidationError and nothing of the batch is written.
* **Trusted records.** ``append_batch`` takes events as columns (``ledger.log.batch.EventBatch``)
  from a producer that has checked every value itself (the file importers, the replay) and
  ``append_records`` Avro-ready records; both skip the per-event model validation. Everything
  else above holds for them too, and a value Avro cannot encode still refuses the batch.
* **Idempotent.** An event whose ``event_id`` is already in the log (or earlier in the batch) is
  skipped; ``append`` returns how many were written.
* **Single writer.** The process that appends holds an advisory lock on ``LOCK``; any number of
  readers (in any process) read without it and see every acknowledged batch.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ledger.codec import trusted_from_record, union_schema
from ledger.errors import ConfigError, EventValidationError, LogError
from ledger.events import Event
from ledger.log.avro_encode import union_encoder, varint
from ledger.log.batch import EventBatch, merged
from ledger.log.checks import FULL_NAMES, SHORT_NAMES, check_batch, explain_unencodable
from ledger.log.container import SYNC_SIZE, write_all
from ledger.log.lockfile import LOCK_NAME, WriterLock
from ledger.log.segments import (
    DECODE_ERRORS,
    SegmentView,
    corrupt_block,
    count_segment,
    create_segment,
    list_segments,
    load_ids,
    open_reader,
    remove_leftovers,
    save_ids,
    scan_ids,
    view_segment,
)

__all__ = ["SEGMENT_BYTES", "EventLog", "open_log"]

SEGMENT_BYTES = 16 * 1024 * 1024
"""Roll over to a new segment once the active one reaches this size (a batch is never split)."""


def _sync_marker(number: int) -> bytes:
    # Derived from the segment number instead of random so the same appends give the same bytes
    # (replays can be compared by hash); a 16-byte hash is as unlikely to occur in data as random bytes.
    return hashlib.blake2b(b"gpuledger segment %d" % number, digest_size=16).digest()


class _Writer:
    """What only the lock holder has: the active segment open for append, its encoder, the known ids."""

    def __init__(self, directory: Path, lock: WriterLock, segment_bytes: int) -> None:
        self.directory = directory
        self.lock = lock
        self.segment_bytes = segment_bytes
        self.number = 0  # number of the newest segment, 0 when there is none
        self.active: Path | None = None
        self.file: Any = None  # the active segment, opened for append (unbuffered)
        self.size = 0
        self.sync: bytes | None = None  # the active segment's sync marker, which ends each of its blocks
        self.records = union_encoder(union_schema())  # type: ignore[arg-type]  # (the log's schema is a union)
        self.ids: set[str] | None = None
        self.active_ids: list[str] | None = []  # None: not kept (a batch too big for memory); read from the segment
        self.recovered_bytes = 0
        self.broken: str | None = None

    def recover(self) -> None:
        """Cut a torn tail off the newest segment and open it for append if it can take more."""
        remove_leftovers(self.directory)
        segments = list_segments(self.directory)
        if not segments:
            return
        self.number, path = segments[-1]
        view = view_segment(path, last=True)
        if view.torn_bytes:
            with open(path, "r+b") as fh:
                fh.truncate(view.valid_end)
                fh.flush()
                os.fsync(fh.fileno())
            self.recovered_bytes = view.torn_bytes
        # A segment written with an older schema is left as it is; new batches go to a new one.
        if view.current_schema and view.valid_end < self.segment_bytes:
            self.active = path
            self.file = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open while writing
            self.size = view.valid_end
            self.sync = view.header.sync

    def known_ids(self) -> set[str]:
        """Return every event_id in the log, reading them once per writer.

        Deduplication needs the ids, and Avro records carry no length prefix, so learning them
        means decoding records: as slow as reading the events. Sealed segments never change, so
        their ids are saved beside them (``NNNNNNNN.ids``) when they are sealed and loaded here
        cheaply; only the active segment (at most ``segment_bytes``) is decoded. Readers never
        pay for any of this, and a writer pays only at its first append.
        """
        if self.ids is None:
            ids: set[str] = set()
            for _, path in list_segments(self.directory):
                if path == self.active:
                    self.active_ids = scan_ids(view_segment(path, last=True))
                    ids.update(self.active_ids)
                    continue
                size = path.stat().st_size
                saved = load_ids(path, size)
                if saved is None:  # sealed by a writer that crashed before saving them, or written elsewhere
                    saved = scan_ids(view_segment(path, last=False))
                    save_ids(path, size, saved)
                ids.update(saved)
            self.ids = ids
        return self.ids

    def _roll(self) -> None:
        """Seal the active segment (saving its ids) and start the next one; on failure keep the old one."""
        if self.active is not None:
            if self.active_ids is None:
                self.active_ids = scan_ids(view_segment(self.active, last=True))
            save_ids(self.active, self.size, self.active_ids)
        number = self.number + 1
        sync = _sync_marker(number)
        path = create_segment(self.directory, number, sync)
        new_file = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open while writing
        if self.file is not None:
            self.file.close()
        self.number, self.active, self.file = number, path, new_file
        self.size = path.stat().st_size
        self.sync = sync
        self.active_ids = []

    def write(self, records: list[tuple[str, dict[str, Any]]], ids: Sequence[str]) -> None:
        """Append one batch as one block and fsync it; on failure leave the segment as it was."""
        try:
            body = bytearray()
            self.records.encode_into(records, body)
        except (ValueError, TypeError, OverflowError) as exc:  # UnicodeEncodeError is a ValueError
            raise explain_unencodable(records, exc) from None
        self.write_pieces(len(records), len(body), iter((body,)), ids)

    def write_pieces(self, count: int, size: int, pieces: Iterator[Any], ids: Sequence[str] | None) -> None:
        """Append one block of ``count`` records given as pieces of ``size`` bytes in all, and fsync it.

        The block is written as it is read from ``pieces`` (a batch's runs, merged), so it need not
        fit in memory; on any failure, the segment is cut back to where it was. ``ids`` None: the
        block's ids are not kept in memory (they are read from the segment when needed).
        """
        if self.broken is not None:
            raise LogError(self.broken)
        if self.active is None or self.size >= self.segment_bytes:
            self._roll()
        assert self.sync is not None
        fd = self.file.fileno()
        head = varint(count << 1) + varint(size << 1)  # counts are positive: zig-zag is << 1
        written = 0
        try:
            write_all(fd, head)
            for piece in pieces:
                write_all(fd, piece)
                written += len(piece)
            if written != size:
                raise LogError(f"{self.active}: a block of {written} bytes where {size} were counted; not written")
            write_all(fd, self.sync)
            os.fsync(fd)
        except OSError as exc:
            self._undo(fd)
            raise LogError(f"{self.active}: append failed ({exc.strerror}); the batch was not written") from None
        except BaseException:
            self._undo(fd)
            raise
        self.size += len(head) + size + SYNC_SIZE
        if ids is None or self.active_ids is None:
            self.active_ids = None
            self.ids = None
        else:
            self.active_ids.extend(ids)

    def _undo(self, fd: int) -> None:
        try:
            os.ftruncate(fd, self.size)
            os.fsync(fd)
        except OSError as exc:
            # Appending after a half-written block would bury it under good ones (corruption).
            # Reopening the log cuts it off as a torn tail.
            self.broken = f"{self.active}: could not undo a failed append ({exc.strerror}); reopen the log to recover"

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self.lock.release()


class EventLog:
    """An append-only event log in a directory of Avro segments; see the module docstring for guarantees.

    ``EventLog(path)`` creates the directory if missing and, if no other writer holds the log,
    becomes its writer at once (cutting off a torn tail a crash left). ``readonly=True`` never
    writes, locks or creates anything. Iterating yields events in append order. An EventLog is
    safe to share between threads; one process at a time appends.
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, segment_bytes: int = SEGMENT_BYTES):
        if segment_bytes <= 0:
            raise ConfigError(f"segment_bytes must be positive; value {segment_bytes!r}")
        self._path = Path(path)
        self._readonly = readonly
        self._segment_bytes = segment_bytes
        self._writer: _Writer | None = None
        self._guard = threading.Lock()
        if readonly:
            if not self._path.is_dir():
                raise LogError(f"{self._path}: no event log here (not a directory)")
            return
        try:
            self._path.mkdir(parents=True, exist_ok=True)
            (self._path / LOCK_NAME).touch(exist_ok=True)
        except OSError as exc:
            raise LogError(f"{self._path}: cannot create the event log ({exc.strerror})") from None
        self._become_writer(required=False)

    @property
    def path(self) -> Path:
        """Return the log directory."""
        return self._path

    @property
    def recovered_bytes(self) -> int:
        """Return how many bytes of a torn last batch were cut off when this object became the writer."""
        return self._writer.recovered_bytes if self._writer is not None else 0

    def _become_writer(self, *, required: bool) -> _Writer | None:
        lock_path = self._path / LOCK_NAME
        lock = WriterLock.try_acquire(lock_path)
        if lock is None:
            if required:
                raise LogError(
                    f"{self._path}: the log is being appended to by {WriterLock.holder(lock_path)}; "
                    "one writer at a time"
                )
            return None
        writer = _Writer(self._path, lock, self._segment_bytes)
        try:
            writer.recover()
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        return writer

    def append(self, events: Iterable[Event]) -> int:
        """Append a batch durably; skip event_ids already present; return how many events were written."""
        if self._readonly:
            raise LogError(f"{self._path}: opened read-only")
        return self._append_checked(check_batch(events))  # validate everything before touching anything

    def append_records(self, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Append (event type name, Avro-ready record) pairs as one durable batch WITHOUT model validation.

        For producers that check every value themselves (the file importers, whose row checks
        name file, line, field and value); the records are those ``records()`` yields: times as
        integer microseconds (or aware datetimes), arrays as lists or tuples. Readers rebuild events
        from the log without validating them, so a record that breaks a model's rule (an empty
        id, 0 GPUs, a time outside 2000..2100) must never be passed here: use ``append``.
        Deduplication, atomicity and durability are as for ``append``; returns how many were written.
        """
        if self._readonly:
            raise LogError(f"{self._path}: opened read-only")
        full = FULL_NAMES
        try:
            batch = [(full[name], record) for name, record in records]
        except KeyError as exc:
            raise EventValidationError(f"unknown event type {exc.args[0]!r}", field="type", value=exc.args[0]) from None
        return self._append_checked(batch)

    def append_batch(self, batch: EventBatch) -> int:
        """Append a batch of events given as columns as one durable block; return how many were written.

        For producers that check every value themselves (the file importers, the replay's log
        writer), as for ``append_records``: the columns were encoded when added to the batch, so
        nothing is validated or encoded here. The block holds the batch's events in the order of
        its sort keys. Deduplication, atomicity and durability are as for ``append``. A batch that
        outgrew its memory (``EventBatch.spilled``) is merged from its runs while it is written. The
        ids of a large batch (more than ``ledger.log.batch.REMEMBERED`` events: an import) are not
        kept in memory afterwards: a later append by this object reads them back from the segment.
        """
        if self._readonly:
            raise LogError(f"{self._path}: opened read-only")
        if not len(batch):
            return 0
        with self._guard:
            writer = self._writer or self._become_writer(required=True)
            assert writer is not None
            known = writer.known_ids()
            plan = batch.plan(known)
            if not plan.count:
                return 0
            if plan.ids is not None:
                known.update(plan.ids)
            try:
                writer.write_pieces(plan.count, plan.size, merged(plan), plan.ids)
            except BaseException:
                if plan.ids is not None:
                    known.difference_update(plan.ids)  # a failed append leaves its ids unknown
                raise
            return plan.count

    def _append_checked(self, batch: list[tuple[str, dict[str, Any]]]) -> int:
        """Append a batch whose records are known valid: drop ids already present, write the rest as one block."""
        if not batch:
            return 0
        with self._guard:
            writer = self._writer or self._become_writer(required=True)
            assert writer is not None
            known = writer.known_ids()
            ids = [record["event_id"] for _, record in batch]
            if known.isdisjoint(ids) and len(set(ids)) == len(ids):
                fresh, fresh_ids = batch, ids  # the common case, checked with set operations in C
                known.update(ids)
            else:
                fresh, fresh_ids = [], []
                for item, event_id in zip(batch, ids, strict=True):
                    if event_id not in known:
                        known.add(event_id)  # also catches a repeat later in the same batch
                        fresh.append(item)
                        fresh_ids.append(event_id)
                if not fresh:
                    return 0
            try:
                writer.write(fresh, fresh_ids)
            except BaseException:
                known.difference_update(fresh_ids)
                raise
            return len(fresh)

    def _views(self) -> Iterator[SegmentView]:
        segments = list_segments(self._path)
        for index, (_, path) in enumerate(segments):
            yield view_segment(path, last=index == len(segments) - 1)

    def records(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield (event type name, Avro record dict) in append order: the fast path for projections."""
        short = SHORT_NAMES
        for view in self._views():
            try:
                for full, record in open_reader(view):
                    yield short[full], record
            except DECODE_ERRORS as exc:
                raise corrupt_block(view, exc) from None

    def __iter__(self) -> Iterator[Event]:
        """Yield the events in append order (rebuilt without re-validation: the log validated them)."""
        short = SHORT_NAMES
        build = trusted_from_record
        for view in self._views():
            try:
                for full, record in open_reader(view):
                    yield build(short[full], record)
            except DECODE_ERRORS as exc:
                raise corrupt_block(view, exc) from None

    def __len__(self) -> int:
        """Return how many events the log holds (reads block headers only)."""
        segments = list_segments(self._path)
        return sum(count_segment(path, last=i == len(segments) - 1) for i, (_, path) in enumerate(segments))

    def close(self) -> None:
        """Stop being the writer: close the active segment and release the lock (reading still works)."""
        with self._guard:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self._readonly else ("writer" if self._writer else "reader")
        return f"EventLog({str(self._path)!r}, {mode})"


def open_log(source: str | os.PathLike[str], *, readonly: bool = True) -> EventLog:
    """Open the event log of a run directory (``SOURCE/events``) or an event log directory itself."""
    path = Path(source)
    if (path / "events").is_dir():
        return EventLog(path / "events", readonly=readonly)
    if path.is_dir() and ((path / LOCK_NAME).exists() or list_segments(path)):
        return EventLog(path, readonly=readonly)
    if not path.exists():
        raise LogError(f"{source}: no such file or directory")
    raise LogError(f"{source}: neither a run directory (with events/) nor an event log directory")
