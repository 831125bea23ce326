"""Check a batch before any of it is written: every item a valid event whose values Avro can represent.

The log validates every event it is given, even ones built by a model constructor, because
readers rebuild events from the log without validating them again (``trusted_from_record``):
that shortcut is only sound if nothing unvalidated ever reaches a segment. Events made with
``model_construct`` or ``model_copy(update=...)`` skip pydantic's checks; this is where they meet them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ledger.codec import raw_schemas
from ledger.errors import EventValidationError
from ledger.events import EVENT_TYPES, Event, parse_event

__all__ = ["FULL_NAMES", "SHORT_NAMES", "check_batch", "explain_unencodable"]

_NAMESPACE = "gpuledger"
# Container files name union branches by full name; the rest of gpuledger uses the short one.
FULL_NAMES: dict[str, str] = {name: f"{_NAMESPACE}.{name}" for name in EVENT_TYPES}
SHORT_NAMES: dict[str, str] = {full: name for name, full in FULL_NAMES.items()}

# Avro "int" is 32-bit and "long" 64-bit; pydantic ints are unbounded. fastavro writes an
# out-of-range "int" as a longer varint without complaint (other Avro readers then fail), so the
# bound is checked here rather than trusted to the encoder.
_BOUNDS = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _integer_kind(avro_type: Any) -> str | None:
    if isinstance(avro_type, list):
        kinds = [_integer_kind(t) for t in avro_type if t != "null"]
        return kinds[0] if len(kinds) == 1 else None
    if isinstance(avro_type, str):
        return avro_type if avro_type in _BOUNDS else None
    if isinstance(avro_type, dict) and "logicalType" not in avro_type:
        return _integer_kind(avro_type.get("type"))
    return None  # timestamps are longs too, but their validated range (2000..2100) always fits


@lru_cache(maxsize=1)
def _integer_fields() -> dict[str, tuple[tuple[str, str, int, int], ...]]:
    """Map each event type to its integer fields: (field, Avro kind, lowest, highest)."""
    out: dict[str, tuple[tuple[str, str, int, int], ...]] = {}
    for name, schema in raw_schemas().items():
        fields = []
        for field in schema["fields"]:
            kind = _integer_kind(field["type"])
            if kind is not None:
                fields.append((field["name"], kind, *_BOUNDS[kind]))
        out[name] = tuple(fields)
    return out


def _where(index: int, data: dict[str, Any]) -> str:
    event_id = data.get("event_id")
    return f"batch item {index} (event {event_id!r})" if isinstance(event_id, str) else f"batch item {index}"


def check_batch(events: Iterable[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Validate every event; return (full record name, Avro-ready record) pairs or raise EventValidationError.

    The records are the ``__dict__`` of freshly validated copies: what passed the checks is
    exactly what gets written. Nothing is written by this function.
    """
    integer_fields = _integer_fields()
    out: list[tuple[str, dict[str, Any]]] = []
    for index, event in enumerate(events):
        cls = type(event)
        name = cls.__name__
        if EVENT_TYPES.get(name) is not cls:
            raise EventValidationError(
                f"batch item {index}: expected a gpuledger event, got {cls.__name__} {event!r:.80}",
                field="event",
                value=event,
            )
        data = event.__dict__
        record = parse_event(name, data, where=_where(index, data)).__dict__
        for field, kind, low, high in integer_fields[name]:
            value = record[field]
            if value is not None and not low <= value <= high:
                raise EventValidationError(
                    f"{name}.{field}: does not fit an Avro {kind} ({low}..{high}); value {value!r}",
                    field=field,
                    value=value,
                    where=_where(index, record),
                )
        out.append((FULL_NAMES[name], record))
    return out


def _unencodable_text(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, tuple | list):
        return any(_unencodable_text(v) for v in value)
    return False


def explain_unencodable(records: list[tuple[str, dict[str, Any]]], exc: Exception) -> EventValidationError:
    """Name the event, field and value that made Avro encoding of a validated batch fail."""
    for full, record in records:
        for field, value in record.items():
            if _unencodable_text(value):
                return EventValidationError(
                    f"{SHORT_NAMES[full]}.{field}: text that UTF-8 cannot encode; value {value!r}",
                    field=field,
                    value=value,
                    where=f"event {record.get('event_id')!r}",
                )
    return EventValidationError(f"batch does not encode as Avro ({type(exc).__name__}: {exc})")
