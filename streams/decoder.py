"""Decode ``gpuledger.events`` records on the worker's hot path: one fastavro reader per writer schema.

Same result and the same errors as ``ledger.codec.decode`` (the reference, used everywhere else), minus
two costs that matter at thousands of records per second: a record written with the *current* schema
is read without Avro schema resolution (resolving a schema against itself only costs time), and the
body is read in place instead of being copied out of the record first. Older writers' records are
still resolved into the current model. Every event is validated (``ledger.codec.from_record``).
"""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

import fastavro

from ledger.codec import MAGIC, fingerprint, from_record, history_schemas, parsed_schemas, raw_schemas
from ledger.errors import DecodeError
from ledger.events import Event

__all__ = ["decode_record"]

_HEADER = len(MAGIC) + 8


@lru_cache(maxsize=1)
def _readers() -> dict[bytes, tuple[str, Any, Any]]:
    """Map each known fingerprint to (record name, writer schema, reader schema or None when they are one)."""
    current = parsed_schemas()
    readers: dict[bytes, tuple[str, Any, Any]] = {}
    for schema in history_schemas():
        parsed = fastavro.parse_schema(schema, _write_hint=False, _force=True)
        readers[fingerprint(schema)] = (schema["name"], parsed, current[schema["name"]])
    for name, schema in raw_schemas().items():
        readers[fingerprint(schema)] = (name, current[name], None)
    return readers


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
