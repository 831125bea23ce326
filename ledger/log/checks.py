"""Check a batch before any of it is written: every item a valid event (the models bound ints to Avro's ranges).

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

from ledger.errors import EventValidationError
from ledger.events import EVENT_TYPES, Event, parse_event
from ledger.log.avro_encode import UnencodableValue

__all__ = ["FULL_NAMES", "SHORT_NAMES", "check_batch", "explain_unencodable"]

_NAMESPACE = "gpuledger"
# Container files name union branches by full name; the rest of gpuledger uses the short one.
FULL_NAMES: dict[str, str] = {name: f"{_NAMESPACE}.{name}" for name in EVENT_TYPES}
SHORT_NAMES: dict[str, str] = {full: name for name, full in FULL_NAMES.items()}


def _where(index: int, data: dict[str, Any]) -> str:
    event_id = data.get("event_id")
    return f"batch item {index} (event {event_id!r})" if isinstance(event_id, str) else f"batch item {index}"


def _not_an_event(index: int, item: object) -> EventValidationError:
    return EventValidationError(
        f"batch item {index}: expected a gpuledger event, got {type(item).__name__} {item!r:.80}",
        field="event",
        value=item,
    )


_Spec = tuple[Callable[[Any], Any], str]


@lru_cache(maxsize=1)
def _specs() -> dict[type, _Spec]:
    """Map each event class to (its pydantic validator, its full record name)."""
    return {cls: (cls.__pydantic_validator__.validate_python, FULL_NAMES[name]) for name, cls in EVENT_TYPES.items()}


def check_batch(events: Iterable[Event], *, start: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """Validate every event; return (full record name, Avro-ready record) pairs or raise EventValidationError.

    Errors name the batch item by its index, counted from ``start`` (a part of a larger batch).

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
            raise _not_an_event(start + len(out), event)
        validate, full = spec
        data = event.__dict__
        try:
            validate(data)
        except ValidationError:
            # Again through parse_event, for its message naming field and value (len(out) is this item's index).
            parse_event(type(event).__name__, data, where=_where(start + len(out), data))
            raise
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
    if isinstance(exc, UnencodableValue):  # the block encoder already found the record and field
        where = None if exc.event_id is None else f"event {exc.event_id!r}"
        return EventValidationError(str(exc), field=exc.field, value=exc.value, where=where)
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
