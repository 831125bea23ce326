"""When scheduling passes run: the facts of an instant awaiting its pass, the last pass, the next preemption walk."""

from __future__ import annotations

from ledger.core.contract import Workload

__all__ = ["Passes"]


class Passes:
    """The facts applied and their pass not yet run, the submissions among them, the last pass and walk."""

    def __init__(self) -> None:
        self.pending = False  # facts of the core's instant applied and their scheduling pass not yet run
        self.fresh: list[Workload] = []  # submissions among those facts (tried at once between cycles)
        self.last = -1  # µs: the last scheduling pass
        self.walk_after = 0  # µs: no full preemption walk before this (one per preemption cycle)

    def snapshot(self) -> dict[str, object]:
        """Return the passes' state for a snapshot."""
        return {"pending": self.pending, "fresh": self.fresh, "last": self.last, "walk_after": self.walk_after}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        pending, fresh, last, walk_after = state["pending"], state["fresh"], state["last"], state["walk_after"]
        assert isinstance(pending, bool) and isinstance(fresh, list)
        assert isinstance(last, int) and isinstance(walk_after, int)
        self.pending, self.fresh, self.last, self.walk_after = pending, fresh, last, walk_after

    def fact(self, submitted: Workload | None) -> None:
        """Note a fact that calls for a pass (``submitted``: the workload it queued, if a submission)."""
        self.pending = True
        if submitted is not None:
            self.fresh.append(submitted)

    def take(self) -> list[Workload]:
        """Return the submissions awaiting the pass about to run, and clear what awaits it."""
        fresh = self.fresh
        self.pending = False
        self.fresh = []
        return fresh

    def ran(self, t: int) -> None:
        """Note a pass at ``t``."""
        self.last = t

    def walk_due(self, t: int) -> bool:
        """Return whether a full preemption walk may run at ``t`` (once per preemption cycle)."""
        return t >= self.walk_after

    def walked(self, t: int, cycle_us: int) -> None:
        """Note a full preemption walk at ``t``: the next one a cycle later."""
        self.walk_after = t + cycle_us
