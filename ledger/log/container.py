"""Avro object container framing for log segments: header, blocks, and finding where a torn tail starts.

A segment is a standard Avro object container file (readable by any Avro tool): a header
(magic ``Obj\\x01``, metadata with the writer schema, a 16-byte sync marker) followed by blocks,
each ``count, size, <size bytes of records>, sync marker``. The log writes exactly one block per
appended batch, so "the end of the last complete block" is "the end of the last durable batch".
"""

from __future__ import annotations

import io
import json
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.read import HEADER_SCHEMA, MAGIC, SYNC_SIZE
from fastavro.types import Schema

from ledger.errors import LogCorruptError
from ledger.log.avro_encode import union_encoder, varint

__all__ = [
    "SYNC_SIZE",
    "BlockEncoder",
    "Header",
    "Walk",
    "damage_is_torn_tail",
    "new_header",
    "read_header",
    "schema_key",
    "walk_blocks",
    "write_all",
]

_HEADER_LIMIT = 1 << 20

# Segment bytes: read into memory, or memory-mapped when only block headers are needed.
Buffer = bytes | mmap.mmap


@dataclass(frozen=True)
class Header:
    """What a segment's header says: where blocks start, the sync marker, and the writer schema."""

    end: int
    sync: bytes
    schema: Any  # the writer schema as JSON (a union of event records)


@dataclass(frozen=True)
class Walk:
    """Result of walking a segment's blocks: the end of the last complete block and the records before it."""

    valid_end: int
    count: int
    blocks: int
    damage: str | None  # why the walk stopped before the end of the data, or None if it reached it
    last_start: int = -1  # where the last complete block starts (-1: no block)
    last_count: int = 0  # how many records it holds


def schema_key(schema: Any) -> str:
    """Return the Parsing Canonical Form of a (JSON) schema: equal keys mean byte-compatible writers."""
    return str(fastavro.schema.to_parsing_canonical_form(schema))


def new_header(schema: Schema, sync: bytes) -> bytes:
    """Return the header bytes of an empty container file with this schema and sync marker.

    Written here rather than by ``fastavro.writer``, whose schema JSON orders keys differently
    from one process to the next (it follows string hashing): a segment's bytes must depend on
    its events alone, so the schema goes in as key-sorted compact JSON.
    """
    meta = {
        "avro.codec": b"null",
        "avro.schema": json.dumps(schema, sort_keys=True, separators=(",", ":")).encode(),
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, HEADER_SCHEMA, {"magic": MAGIC, "meta": meta, "sync": sync})
    return buf.getvalue()


def read_header(data: Buffer, where: str) -> Header:
    """Parse a segment header; raise LogCorruptError naming the segment if it is not one."""
    if bytes(data[:4]) != MAGIC:
        raise LogCorruptError(f"{where}: not an Avro container file (starts with {bytes(data[:4]).hex() or 'nothing'})")
    # Parse from a bounded prefix: data may be a memory map of a large segment, and a header
    # (magic, two metadata entries, the schema as JSON, the sync marker) is a few kilobytes.
    buf = io.BytesIO(data[:_HEADER_LIMIT])
    try:
        raw = fastavro.schemaless_reader(buf, HEADER_SCHEMA)
        assert isinstance(raw, dict)
        meta = raw["meta"]
        codec = meta.get("avro.codec", b"null")
        schema = json.loads(meta["avro.schema"])
    except Exception as exc:  # garbage headers make fastavro and json raise many types
        raise LogCorruptError(f"{where}: damaged segment header ({type(exc).__name__}: {exc})") from None
    if codec != b"null":
        raise LogCorruptError(f"{where}: segment uses codec {codec!r}; the log writes uncompressed blocks only")
    return Header(end=buf.tell(), sync=bytes(raw["sync"]), schema=schema)


def _varint(data: Buffer, pos: int, end: int) -> tuple[int, int] | None:
    """Decode one zig-zag varint (Avro long) at pos; return (value, next pos), or None if it runs past end."""
    shift = 0
    acc = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        acc |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (acc >> 1) ^ -(acc & 1), pos
        shift += 7
        if shift > 63:
            return -1, pos  # longer than any Avro long: reported as a bad block header by the caller
    return None


def walk_blocks(data: Buffer, header: Header, *, start: int | None = None, count: int = 0) -> Walk:
    """Walk the blocks from ``start`` (default: just after the header) to the end of ``data``.

    Reads only block headers and sync markers, never records, so it costs per block, not per event.
    Stops at the first block that is incomplete or malformed and says why in ``damage``.
    """
    pos = header.end if start is None else start
    end = len(data)
    blocks = 0
    sync = header.sync
    last_start, last_count = -1, 0
    damage = None
    while pos < end:
        first = _varint(data, pos, end)
        second = None if first is None else _varint(data, first[1], end)
        if first is None or second is None:
            damage = f"block header cut short at byte {pos}"
            break
        n, size = first[0], second[0]
        body = second[1]
        if n <= 0 or size < 0:
            damage = f"bad block header at byte {pos} (count {n}, size {size})"
            break
        stop = body + size + SYNC_SIZE
        if stop > end:
            damage = f"block at byte {pos} cut short ({end - pos} of {stop - pos} bytes)"
            break
        if bytes(data[stop - SYNC_SIZE : stop]) != sync:
            damage = f"block at byte {pos} does not end with the segment's sync marker"
            break
        count += n
        blocks += 1
        last_start, last_count = pos, n
        pos = stop
    return Walk(pos, count, blocks, damage, last_start, last_count)


def damage_is_torn_tail(data: Buffer, header: Header, walk: Walk) -> bool:
    """Tell a torn last batch (safe to cut) from damage in the middle of acknowledged data (not safe).

    A crash mid-append leaves at most one unfinished block: its bytes may be cut short or, when
    pages reached the disk out of order, partly zero, but no *complete* later block can follow it.
    So the damage is a torn tail unless a sync marker appears after it anywhere but as the very
    last bytes of the file (which the unfinished block itself may have reached).
    """
    tail = bytes(data[walk.valid_end :])
    found = tail.find(header.sync)
    return found == -1 or found == len(tail) - SYNC_SIZE


class BlockEncoder:
    """Encode a batch of (full record name, record) pairs into one container block for a given segment.

    Records are written by encoders compiled from the schema (``ledger.log.avro_encode``), about
    three times faster than fastavro's Writer and byte for byte the same, into memory: a batch is
    encoded completely before a byte reaches the file, so an encoding failure (``UnencodableValue``,
    naming the record, field and value) leaves the segment untouched.
    """

    def __init__(self, schema: Schema, sync: bytes) -> None:
        self._encoder = union_encoder(schema)  # type: ignore[arg-type]  # the log's schema is a union (a list)
        self._sync = sync

    def encode(self, records: Sequence[tuple[str, dict[str, Any]]]) -> bytes:
        """Return the bytes of one block holding ``records`` (count, size, data, sync marker)."""
        if not records:
            return b""  # as fastavro: an empty batch is no block at all
        body = bytearray()
        self._encoder.encode_into(records, body)
        n, size = len(records), len(body)
        return b"".join((varint(n << 1), varint(size << 1), body, self._sync))  # counts are positive: zig-zag is << 1


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of data to fd (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
