"""Check a batch before any of it is written: every item a valid event whose values Avro can represent.

The log validates every event it is given, even ones built by a model constructor, because
readers rebuild events from the log without validating them again (``trusted_from_record``):
that shortcut is only sound if nothing unvalidated ever reaches a segment. Events made with
``model_construct`` or ``model_copy(update=...)`` skip pydantic's checks; this is where they meet them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

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


@lru_cache(maxsize=1)
def _range_checks() -> dict[str, Callable[[dict[str, Any]], bool]]:
    """Map each event type to one expression testing all its integer fields at once.

    Built from the schema as source text because a Python loop over the fields costs several
    times more per event than one flat boolean expression; the field names come from our own
    schemas and are embedded with repr().
    """
    checks: dict[str, Callable[[dict[str, Any]], bool]] = {}
    for name, fields in _integer_fields().items():
        terms = [f"(r[{f!r}] is None or {low} <= r[{f!r}] <= {high})" for f, _, low, high in fields]
        checks[name] = eval("lambda r: " + (" and ".join(terms) or "True"))
    return checks


def _where(index: int, data: dict[str, Any]) -> str:
    event_id = data.get("event_id")
    return f"batch item {index} (event {event_id!r})" if isinstance(event_id, str) else f"batch item {index}"


def _out_of_range(index: int, name: str, record: dict[str, Any]) -> EventValidationError:
    for field, kind, low, high in _integer_fields()[name]:
        value = record[field]
        if value is not None and not low <= value <= high:
            return EventValidationError(
                f"{name}.{field}: does not fit an Avro {kind} ({low}..{high}); value {value!r}",
                field=field,
                value=value,
                where=_where(index, record),
            )
    raise AssertionError(f"{name}: range check failed but no field is out of range")


def _not_an_event(index: int, item: object) -> EventValidationError:
    return EventValidationError(
        f"batch item {index}: expected a gpuledger event, got {type(item).__name__} {item!r:.80}",
        field="event",
        value=item,
    )


_Spec = tuple[Callable[[Any], Any], str, Callable[[dict[str, Any]], bool]]


@lru_cache(maxsize=1)
def _specs() -> dict[type, _Spec]:
    """Map each event class to (its pydantic validator, its full record name, its integer range check)."""
    checks = _range_checks()
    return {
        cls: (cls.__pydantic_validator__.validate_python, FULL_NAMES[name], checks[name])
        for name, cls in EVENT_TYPES.items()
    }


def check_batch(events: Iterable[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Validate every event; return (full record name, Avro-ready record) pairs or raise EventValidationError.

    The records are the events' own ``__dict__``, which is what was validated. (pydantic's validated
    copy differs at most by normalisation that Avro encodes identically: a list for a tuple, an
    aware time in another zone for the same instant in UTC; it is dropped at once because keeping
    a second object per event doubled the garbage collector's work.) Nothing is written here.
    """
    specs = _specs()
    out: list[tuple[str, dict[str, Any]]] = []
    append = out.append
    for event in events:
        spec = specs.get(type(event))
        if spec is None:
            raise _not_an_event(len(out), event)
        validate, full, in_range = spec
        data = event.__dict__
        try:
            validate(data)
        except ValidationError:
            # Again through parse_event, for its message naming field and value (len(out) is this item's index).
            parse_event(type(event).__name__, data, where=_where(len(out), data))
            raise
        if not in_range(data):
            raise _out_of_range(len(out), type(event).__name__, data)
        append((full, data))
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
