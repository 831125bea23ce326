"""Where imported events go: the embedded event log (a log directory or a run directory's ``events/``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ledger.errors import LogError
from ledger.events import Event

__all__ = ["append_to_log", "log_dir"]


def log_dir(out: str | Path) -> Path:
    """Return the log directory ``out`` names: ``out/events`` for a run directory, else ``out`` itself."""
    path = Path(out)
    return path / "events" if (path / "events").is_dir() else path


def append_to_log(out: str | Path, events: Sequence[Event]) -> int:
    """Append events to the embedded log at ``out`` as one durable batch; return how many were new."""
    import importlib

    event_log = getattr(importlib.import_module("ledger.log"), "EventLog", None)
    if event_log is None:  # the log package is built separately; say so plainly
        raise LogError("the embedded event log is not available in this build")
    log = event_log(log_dir(out))
    try:
        added: int = log.append(list(events))
        return added
    finally:
        close = getattr(log, "close", None)
        if close is not None:
            close()
