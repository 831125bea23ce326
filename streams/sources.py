"""Read the events a SOURCE names: an embedded log or run directory, or a JSON Lines file of events."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from ledger.errors import EventValidationError, InputError
from ledger.events import EVENT_TYPES, Event

__all__ = ["is_core_output", "read_events", "read_jsonl", "without_core_outputs"]


def is_core_output(event: Event) -> bool:
    """Return whether an event was emitted by the decision core (its ids are ``{cluster}/d{n}``)."""
    return re.fullmatch(rf"{re.escape(event.cluster)}/d\d+", event.event_id) is not None


def without_core_outputs(events: Iterable[Event]) -> Iterator[Event]:
    """Yield the facts that came from outside the core (what a worker needs to decide the rest itself)."""
    return (e for e in events if not is_core_output(e))


def read_jsonl(path: Path) -> Iterator[Event]:
    """Yield events from JSON Lines: one object per line, ``type`` naming the event, times in ISO 8601."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(data, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(data).__name__}")
            type_name = data.pop("type", None)
            cls = EVENT_TYPES.get(str(type_name))
            if cls is None:
                raise InputError(f"{where}: field 'type' = {type_name!r} is not an event type")
            try:
                yield cls.model_validate_json(json.dumps(data))
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                field = ".".join(str(p) for p in err["loc"])
                raise EventValidationError(
                    f"{type_name}.{field}: {err['msg']}; value {err.get('input')!r}",
                    field=field, value=err.get("input"), where=where,
                ) from None


def read_events(source: str | Path) -> Iterator[Event]:
    """Yield the events of a run directory, an embedded log directory or a ``.jsonl`` file, in order."""
    path = Path(source)
    if path.is_file():
        return read_jsonl(path)
    if path.is_dir():
        from ledger.log import open_log  # the embedded log; imported here so JSONL works without it

        return iter(open_log(path))
    raise InputError(f"{path}: no such file or directory (expected an event log, a run directory or a .jsonl file)")
