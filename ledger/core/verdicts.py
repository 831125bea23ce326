"""Who may be preempted for whom at one instant (``preemption.eligibility``): a cache, never in a snapshot."""

from __future__ import annotations

__all__ = ["Verdicts"]


class Verdicts:
    """Who may be preempted for whom, kept for an instant until a meter changes: never part of a snapshot.

    (t, meters version) -> {waiter node (and charge with the margin) -> {victim node -> verdict}}.
    """

    __slots__ = ("cache",)

    def __init__(self) -> None:
        self.cache: tuple[tuple[int, int], dict[object, dict[str, bool]]] | None = None

    def of(self, t: int, version: int, waiter: object) -> dict[str, bool]:
        """Return the verdicts kept for ``waiter`` (its node, with its charge under the margin) at ``t``."""
        state = (t, version)
        kept = self.cache
        if kept is None or kept[0] != state:
            kept = self.cache = (state, {})
        return kept[1].setdefault(waiter, {})

    def clear(self) -> None:
        """Forget every verdict: an allocation is worth something else now."""
        self.cache = None
