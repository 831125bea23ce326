"""Where imported events go: the embedded event log (a log directory or a run directory's ``events/``).

An import hands the log one ``EventBatch``: the events of every file (each file a section of it,
in the order given; the budget tree, if any, first), sorted by time within a section, appended as
one durable block (``EventLog.append_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.events import Event

if TYPE_CHECKING:
    from ledger.adapters.common import ImportResult
    from ledger.log.batch import EventBatch

__all__ = ["SORT_KEYS", "append_batch_to_log", "append_imports_to_log", "append_to_log", "log_dir"]

SORT_KEYS = 3
"""An import batch's sort keys: the section (a file) and time, the workload's rank, the event's place in its story."""


def log_dir(out: str | Path) -> Path:
    """Return the log directory ``out`` names: ``out/events`` for a run directory, else ``out`` itself."""
    path = Path(out)
    return path / "events" if (path / "events").is_dir() else path


def append_to_log(out: str | Path, events: Sequence[Event]) -> int:
    """Append events to the embedded log at ``out`` as one durable batch; return how many were new."""
    from ledger.log import EventLog

    with EventLog(log_dir(out)) as log:
        return log.append(events)


def append_batch_to_log(out: str | Path, batch: EventBatch) -> int:
    """Append an import's batch to the log at ``out`` as one durable block; return how many events were new."""
    from ledger.log import EventLog

    with EventLog(log_dir(out)) as log:
        return log.append_batch(batch)


def append_imports_to_log(out: str | Path, results: Sequence[ImportResult]) -> int:
    """Append the events import results kept to the log at ``out`` as one durable batch; return how many were new."""
    from ledger.log.batch import EventBatch

    with EventBatch(SORT_KEYS) as batch:
        for section, res in enumerate(results):
            res.add_to(batch, section)
        return append_batch_to_log(out, batch)
