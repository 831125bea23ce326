"""The worker's hot-path codec: ``ledger.codec``'s single-object encoding, byte for byte, at half the cost.

Same bytes, results and errors as ``ledger.codec.encode``/``decode`` (the reference, used everywhere
else), minus three costs that matter at thousands of records per second:

* the schemas are parsed once *with* fastavro's "already parsed" mark: without it fastavro parses a
  schema again on every call (measured: 43 -> 20 us per encoded decision, 37 -> 17 us per read);
* a record written with the *current* schema is read without Avro schema resolution (resolving a
  schema against itself only costs time); older writers' records are still resolved;
* the body is read in place instead of being copied out of the record first.

Every decoded event is validated (``ledger.codec.from_record``).
"""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

import fastavro

from ledger.codec import MAGIC, fingerprint, from_record, history_schemas, raw_schemas, to_record
from ledger.errors import DecodeError
from ledger.events import Event

__all__ = ["decode_record", "encode_record"]

_HEADER = len(MAGIC) + 8


@lru_cache(maxsize=1)
def _current() -> dict[str, tuple[bytes, Any]]:
    """Map each record name to (single-object header, current schema parsed once and marked so)."""
    return {name: (MAGIC + fingerprint(s), fastavro.parse_schema(s, _force=True)) for name, s in raw_schemas().items()}


@lru_cache(maxsize=1)
def _readers() -> dict[bytes, tuple[str, Any, Any]]:
    """Map each known fingerprint to (record name, writer schema, reader schema or None when they are one)."""
    current = _current()
    readers: dict[bytes, tuple[str, Any, Any]] = {}
    for schema in history_schemas():
        parsed = fastavro.parse_schema(schema, _force=True)
        readers[fingerprint(schema)] = (schema["name"], parsed, current[schema["name"]][1])
    for name, (header, parsed) in current.items():
        readers[header[len(MAGIC) :]] = (name, parsed, None)
    return readers


def encode_record(event: Event) -> bytes:
    """Encode one event as an Avro single-object message (the bytes ``ledger.codec.encode`` gives)."""
    header, schema = _current()[event.type_name]
    buf = io.BytesIO()
    buf.write(header)
    fastavro.schemaless_writer(buf, schema, to_record(event))
    return buf.getvalue()


def decode_record(data: bytes) -> Event:
    """Decode one single-object message into a validated event; raise DecodeError or EventValidationError."""
    if len(data) < _HEADER or data[:2] != MAGIC:
        raise DecodeError(
            f"not an Avro single-object message: starts with {data[:2].hex() or 'nothing'}, expected c301"
        )
    reader = _readers().get(data[2:_HEADER])
    if reader is None:
        raise DecodeError(f"unknown schema fingerprint {data[2:_HEADER].hex()}: not a gpuledger event schema")
    name, writer_schema, reader_schema = reader
    buf = io.BytesIO(data)
    buf.seek(_HEADER)
    try:
        record = fastavro.schemaless_reader(buf, writer_schema, reader_schema)
    except Exception as exc:  # fastavro raises many types on garbage bodies
        raise DecodeError(f"{name}: body does not decode ({type(exc).__name__}: {exc})") from None
    if buf.tell() != len(data):
        raise DecodeError(f"{name}: {len(data) - buf.tell()} trailing byte(s) after the body")
    if not isinstance(record, dict):
        raise DecodeError(f"{name}: body is not a record")
    return from_record(name, record)
