"""Shared helpers for the adapter tests: where the data slices live, and queue waits computed two ways."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from ledger import events as ev

DATA = Path(__file__).resolve().parent.parent / "data"
SIZES = ((1, 1, "1"), (2, 8, "2-8"), (9, 64, "9-64"), (65, 256, "65-256"), (257, 10**9, "257+"))


def size_bucket(gpus: int) -> str:
    """Return the audit's size bucket of a GPU count."""
    return next(name for lo, hi, name in SIZES if lo <= gpus <= hi)


def waits_from_events(events: Iterable[ev.Event]) -> dict[str, list[int]]:
    """Queue waits by size bucket as the ledger defines them: first start - submit, restart - preemption."""
    submitted: dict[str, tuple[datetime, int]] = {}
    waiting_since: dict[str, datetime] = {}
    out: dict[str, list[int]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.time):
        if isinstance(e, ev.WorkloadSubmitted):
            submitted[e.workload_id] = (e.time, e.gpus)
            waiting_since[e.workload_id] = e.time
        elif isinstance(e, ev.WorkloadPreempted):
            waiting_since[e.workload_id] = e.time
        elif isinstance(e, ev.WorkloadStarted):
            since = waiting_since.pop(e.workload_id)
            out[size_bucket(submitted[e.workload_id][1])].append(int((e.time - since).total_seconds()))
    return {k: sorted(v) for k, v in out.items()}


def event_counts(events: Iterable[ev.Event]) -> Counter[str]:
    """Count events by type, and completions by outcome as 'WorkloadCompleted:<outcome>'."""
    c: Counter[str] = Counter()
    for e in events:
        c[e.type_name] += 1
        if isinstance(e, ev.WorkloadCompleted):
            c[f"WorkloadCompleted:{e.outcome}"] += 1
        if isinstance(e, ev.WorkloadPreempted):
            c[f"WorkloadPreempted:{e.reason}"] += 1
    return c


def assert_all_valid(events: Iterable[ev.Event]) -> None:
    """Every event an adapter builds passes the models' full validation unchanged."""
    for e in events:
        again = ev.validated(e)
        assert again == e, (again, e)
