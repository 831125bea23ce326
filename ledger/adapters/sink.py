"""Where imported events go: the embedded event log (a log directory or a run directory's ``events/``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.events import Event

if TYPE_CHECKING:
    from ledger.adapters.common import ImportResult

__all__ = ["append_imports_to_log", "append_records_to_log", "append_to_log", "log_dir"]


def log_dir(out: str | Path) -> Path:
    """Return the log directory ``out`` names: ``out/events`` for a run directory, else ``out`` itself."""
    path = Path(out)
    return path / "events" if (path / "events").is_dir() else path


def append_to_log(out: str | Path, events: Sequence[Event]) -> int:
    """Append events to the embedded log at ``out`` as one durable batch; return how many were new."""
    from ledger.log import EventLog

    with EventLog(log_dir(out)) as log:
        return log.append(events)


def append_records_to_log(out: str | Path, records: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """Append an import's checked records to the log at ``out`` as one durable batch; return how many were new."""
    from ledger.gcpause import paused_gc
    from ledger.log import EventLog

    with paused_gc(), EventLog(log_dir(out)) as log:  # encoding a big batch would wake the collector often
        return log.append_records(records)


def append_imports_to_log(out: str | Path, results: Sequence[ImportResult]) -> int:
    """Append the events of import results to the log at ``out`` as one durable batch; return how many were new."""
    return append_records_to_log(out, [r for res in results for r in res.records])
