"""Resolve what an audit reads: a run directory, an embedded log directory, or records in memory."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ledger.errors import InputError
from ledger.events import Event

Record = tuple[str, dict[str, Any]]


def _as_records(items: Iterable[Any]) -> Iterator[Record]:
    for item in items:
        if isinstance(item, Event):
            yield item.type_name, dict(item.__dict__)
        else:
            yield item


def open_records(source: str | Path | Iterable[Any]) -> Iterable[Record]:
    """Return ``(type_name, record)`` pairs from a run/log directory, or from events or pairs in memory."""
    if not isinstance(source, str | Path):
        return _as_records(source)
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: no such run directory or event log")
    from ledger.log import open_log

    log = open_log(path)
    records: Iterable[Record] = log.records()
    return records


__all__ = ["Record", "open_records"]
