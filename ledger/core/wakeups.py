"""The wake-ups the decision core schedules for itself: a heap of (time, seq, kind, workload id, epoch).

A workload's wake-up is stale (skipped) once the workload's epoch has moved on; the core's own
(``TIMED``) carry no workload. ``seq`` orders the wake-ups of one time as they were asked for.
"""

from __future__ import annotations

import heapq
from typing import Final

from ledger.core.contract import Workload

__all__ = ["CYCLE", "DRAIN", "EXIT", "HOLD", "PROTECT", "RECHECK", "SPARED", "START", "TIMED", "Wake", "Wakeups"]

PROTECT: Final = 0  # a protected window ends
EXIT: Final = 1  # a victim's grace period ends: it leaves
START: Final = 2  # a delayed start (after its victims' grace) is due
DRAIN: Final = 3  # a workload on a draining host has run out its protected window
CYCLE: Final = 4  # the next full preemption walk may run
SPARED: Final = 5  # a resumable run without a checkpoint is no longer spared
RECHECK: Final = 6  # a standing check (see ``progress.queue_recheck``)
HOLD: Final = 7  # a hold's time comes (see ``holds``)
TIMED: Final = (CYCLE, RECHECK, HOLD)  # the core's own wake-ups, not a workload's

Wake = tuple[int, int, int, str, int]  # (time µs, seq, kind, workload id or "", epoch)


class Wakeups:
    """The heap of wake-ups, its sequence counter, and which of the core's own kinds are queued (at most one each)."""

    def __init__(self) -> None:
        self.heap: list[Wake] = []
        self.seq = 0
        self.queued: list[bool] = [False] * (HOLD + 1)  # by kind: a ``once`` wake-up of that kind is queued

    def snapshot(self) -> dict[str, object]:
        """Return the wake-ups' state for a snapshot."""
        return {"heap": self.heap, "seq": self.seq, "queued": self.queued}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        heap, seq, queued = state["heap"], state["seq"], state["queued"]
        assert isinstance(heap, list) and isinstance(seq, int) and isinstance(queued, list)
        self.heap, self.seq, self.queued = heap, seq, queued

    def workload(self, t: int, kind: int, w: Workload) -> None:
        """Wake ``w`` at ``t`` for ``kind``, unless its epoch has moved on by then. O(log w)."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, w.wid, w.epoch))

    def timed(self, t: int, kind: int) -> None:
        """Wake the core itself at ``t`` for ``kind`` (a ``TIMED`` wake-up, which carries no workload)."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, "", 0))

    def once(self, t: int, kind: int) -> None:
        """Wake the core at ``t`` for ``kind`` unless a wake-up of that kind is queued already (until it is popped)."""
        if not self.queued[kind]:
            self.queued[kind] = True
            self.timed(t, kind)

    def is_queued(self, kind: int) -> bool:
        """Return whether a ``once`` wake-up of ``kind`` is queued."""
        return self.queued[kind]

    def due(self, t: int) -> bool:
        """Return whether a wake-up is due at or before ``t``."""
        heap = self.heap
        return bool(heap) and heap[0][0] <= t

    def next_time(self) -> int:
        """Return the time (µs) of the earliest wake-up, or -1 when none is queued."""
        heap = self.heap
        return heap[0][0] if heap else -1

    def peek(self) -> Wake:
        """Return the earliest wake-up without taking it (one must be queued)."""
        return self.heap[0]  # a plain tuple, not an optional one: compiled, it is returned unboxed

    def pop(self) -> Wake:
        """Take the earliest wake-up (one of its kind may be queued ``once`` again)."""
        wake = heapq.heappop(self.heap)
        self.queued[wake[2]] = False
        return wake
