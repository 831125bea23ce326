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
    """Append the events of import results to the log at ``out`` as one durable batch; return how many were new.

    The events go as the Avro bytes the importers write directly (``ImportResult.wire``); if any
    result has none (a value the direct writer cannot write), all go as records through the
    log's own encoder, which names the value it refuses.
    """
    from ledger.gcpause import paused_gc
    from ledger.log import EventLog

    with paused_gc():
        wires = [res.wire_columns() for res in results]
        with EventLog(log_dir(out)) as log:
            if any(w is None for w in wires):
                return log.append_records([r for res in results for r in res.records])
            if len(wires) == 1 and wires[0] is not None:
                ids, data = wires[0][2], wires[0][3]
            else:
                ids = [eid for w in wires if w is not None for eid in w[2]]
                data = [d for w in wires if w is not None for d in w[3]]
            if not ids:
                return 0
            return log.append_encoded(ids, data)
