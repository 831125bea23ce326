"""Segment files of a log directory: naming, atomic creation, a checked view of one, its records and ids.

``00000001.avro``, ``00000002.avro``, ... are Avro object container files read in number order.
A sealed segment (one with a successor) may also have ``00000001.ids``: its event_ids, so that
a writer reopening the log need not decode every sealed record just to learn which ids exist.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.types import Schema

from ledger.codec import from_record, union_schema
from ledger.errors import EventValidationError, LogCorruptError, LogError
from ledger.log.checks import SHORT_NAMES
from ledger.log.container import (
    Header,
    Walk,
    damage_is_torn_tail,
    new_header,
    read_header,
    schema_key,
    walk_blocks,
)

__all__ = [
    "DECODE_ERRORS",
    "SegmentView",
    "corrupt_block",
    "count_segment",
    "create_segment",
    "current_schema_key",
    "fsync_dir",
    "list_segments",
    "load_ids",
    "open_reader",
    "remove_leftovers",
    "save_ids",
    "scan_ids",
    "segment_path",
    "view_segment",
]

_SEGMENT = re.compile(r"^(\d{8,})\.avro$")
_TMP_SUFFIX = ".tmp"


def segment_path(directory: Path, number: int) -> Path:
    """Return the path of segment ``number`` in a log directory."""
    return directory / f"{number:08d}.avro"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """Return (number, path) of every segment, in append order."""
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise LogError(f"{directory}: cannot list the event log ({exc.strerror})") from None
    found = [(int(m.group(1)), directory / name) for name in names if (m := _SEGMENT.match(name))]
    return sorted(found)


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (new or renamed files) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _durable_replace(path: Path, data: bytes) -> None:
    """Write data to a temporary file, fsync it, rename it over path, fsync the directory."""
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def remove_leftovers(directory: Path) -> None:
    """Delete temporary files a crash left behind (they were never renamed into place, so hold nothing)."""
    for name in os.listdir(directory):
        if name.endswith(_TMP_SUFFIX):
            os.unlink(directory / name)


def create_segment(directory: Path, number: int, sync: bytes) -> Path:
    """Create segment ``number`` holding only a header; atomic, so a segment never has a torn header."""
    path = segment_path(directory, number)
    if path.exists():
        raise LogError(f"{path}: segment already exists; is another writer using this log?")
    _durable_replace(path, new_header(union_schema(), sync))
    return path


@lru_cache(maxsize=1)
def current_schema_key() -> str:
    """Return the canonical form of the union schema this version of gpuledger writes."""
    # Compare with what a header written now would hold, so both sides went through the same writer.
    return schema_key(read_header(new_header(union_schema(), bytes(16)), "a new segment").schema)


@dataclass(frozen=True)
class SegmentView:
    """A segment's bytes up to the end of its last complete block, with what its blocks hold."""

    path: Path
    data: bytes
    header: Header
    valid_end: int
    count: int
    torn_bytes: int  # bytes after valid_end: an unfinished (or crashed) append, never acknowledged

    @property
    def current_schema(self) -> bool:
        """Tell whether the segment was written with this version's schema (no resolution needed)."""
        return schema_key(self.header.schema) == current_schema_key()


def _last_block_is_whole(data: bytes | mmap.mmap, header: Header, walk: Walk) -> bool:
    """Tell whether the last complete-looking block decodes to exactly its count of valid events.

    Framing alone cannot tell a finished block from one a power cut left with a hole: pages may
    reach the disk out of order, so the block's end (and sync marker) can be there while part of
    its middle is zeros. Only the last block can be unfinished (batches are fsynced one at a time),
    so it alone is decoded, checked to fill its byte size exactly, and validated event by event.
    """
    alone = bytes(data[: header.end]) + bytes(data[walk.last_start : walk.valid_end])
    reader_schema = None if schema_key(header.schema) == current_schema_key() else union_schema()
    try:
        blocks: Iterator[Any] = fastavro.block_reader(
            io.BytesIO(alone), reader_schema=reader_schema, return_record_name=True
        )
        (block,) = blocks
        for full, record in block:
            from_record(SHORT_NAMES[full], record)
        body = block.bytes_  # the block's record bytes, positioned after the last record decoded
        return bool(body.tell() == len(body.getvalue()))
    except (*DECODE_ERRORS, UnicodeDecodeError, EventValidationError):
        return False


def _check(path: Path, data: bytes | mmap.mmap, last: bool) -> tuple[Header, Walk]:
    header = read_header(data, str(path))
    walk = walk_blocks(data, header)
    if walk.damage is not None and not (last and damage_is_torn_tail(data, header, walk)):
        reason = (
            "complete batches follow the damage, so it is not an unfinished append"
            if last
            else "a sealed segment (one with a newer segment after it) must end with a complete batch"
        )
        raise LogCorruptError(
            f"{path}: {walk.damage}; {reason}. The {walk.count} event(s) before byte {walk.valid_end} "
            "are intact; refusing to cut acknowledged data"
        )
    if last and walk.blocks and not _last_block_is_whole(data, header, walk):
        damage = f"the last block (at byte {walk.last_start}) does not decode to {walk.last_count} whole valid events"
        walk = Walk(walk.last_start, walk.count - walk.last_count, walk.blocks - 1, damage)
    return header, walk


def view_segment(path: Path, *, last: bool) -> SegmentView:
    """Read and check one segment; a torn tail is allowed only on the last segment and is left out."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: cannot read segment ({exc.strerror})") from None
    header, walk = _check(path, data, last)
    return SegmentView(path, data, header, walk.valid_end, walk.count, len(data) - walk.valid_end)


def count_segment(path: Path, *, last: bool) -> int:
    """Return how many events a segment holds, reading block headers through a memory map.

    Only the last segment's last block is decoded (see ``_last_block_is_whole``).
    """
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                raise LogCorruptError(f"{path}: empty file, not a segment")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _check(path, data, last)[1].count
    except OSError as exc:
        raise LogError(f"{path}: cannot read segment ({exc.strerror})") from None


DECODE_ERRORS = (ValueError, EOFError, KeyError, IndexError, TypeError, OverflowError)
"""What fastavro raises on bytes inside a well-framed block that do not decode."""


def corrupt_block(view: SegmentView, exc: Exception) -> LogCorruptError:
    """Describe a block whose framing is intact but whose records do not decode (Avro null codec has no checksum)."""
    return LogCorruptError(f"{view.path}: a block does not decode ({type(exc).__name__}: {exc})")


def open_reader(view: SegmentView, *, names: bool = True) -> Iterator[Any]:
    """Return fastavro's reader over a segment's complete batches: (full record name, record) if names, else records.

    The caller wraps iteration in ``except DECODE_ERRORS`` (see ``corrupt_block``); doing it
    there rather than in a wrapping generator saves a generator hop per event on the read path.
    """
    body = view.data if view.torn_bytes == 0 else view.data[: view.valid_end]
    # Resolution (an older writer's schema) is slower, so it is used only for segments that need it.
    reader_schema: Schema | None = None if view.current_schema else union_schema()
    try:
        reader: Iterator[Any] = fastavro.reader(io.BytesIO(body), reader_schema=reader_schema, return_record_name=names)
    except Exception as exc:
        raise LogError(f"{view.path}: cannot read with this version's schemas ({type(exc).__name__}: {exc})") from None
    return reader


def scan_ids(view: SegmentView) -> list[str]:
    """Return the event_ids of a segment, in order, by decoding its records."""
    try:
        return [record["event_id"] for record in open_reader(view, names=False)]
    except DECODE_ERRORS as exc:
        raise corrupt_block(view, exc) from None


def _ids_path(segment: Path) -> Path:
    return segment.with_suffix(".ids")


def load_ids(segment: Path, size: int) -> list[str] | None:
    """Return a sealed segment's event_ids from its .ids file, or None if missing or not for these bytes."""
    try:
        with open(_ids_path(segment), encoding="utf-8") as fh:
            saved = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("bytes") != size:
        return None
    ids = saved.get("ids")
    if not isinstance(ids, list) or len(ids) != saved.get("count"):
        return None
    return ids


def save_ids(segment: Path, size: int, ids: list[str]) -> None:
    """Write a sealed segment's event_ids beside it (durably; a later open trusts it only for these bytes)."""
    payload = {"segment": segment.name, "bytes": size, "count": len(ids), "ids": ids}
    _durable_replace(_ids_path(segment), json.dumps(payload, ensure_ascii=False).encode("utf-8"))
