"""What a replay starts from: the cluster, its setup events and its inputs in time order.

Every reader of a replay's inputs (a trace, an ITP raw trace, a log) makes them; ``run`` replays them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from ledger.budgets import Budgets
from ledger.events import Event
from ledger.replay.trace import RejectedRow

__all__ = ["ReplayInputs", "inputs_from_budgets"]


@dataclass
class ReplayInputs:
    """Everything a replay starts from: the cluster, its setup events and the inputs in time order."""

    cluster: str
    gpus: int
    gpus_per_node: int
    setup: list[Event]
    inputs: list[Event]
    rejected: list[RejectedRow] = field(default_factory=list)
    source: str = ""
    notes: list[str] = field(default_factory=list)  # how hints were derived, for the report


def inputs_from_budgets(budgets: Budgets, inputs: list[Event], *, start: datetime | None = None) -> ReplayInputs:
    """Return ReplayInputs for a budget tree and input events (setup at ``start`` or the first input)."""
    at = start or (min(e.time for e in inputs) if inputs else datetime(2026, 1, 1, tzinfo=UTC))
    return ReplayInputs(
        budgets.cluster, budgets.gpus, budgets.gpus_per_node, list(budgets.events(at)), sorted(inputs, key=_time)
    )


def _time(e: Event) -> datetime:
    return e.time
