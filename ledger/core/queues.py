"""Sorted queues of waiting workloads, indexed by size so "the best one that fits" is cheap.

A queue keeps its keys sorted (best first) twice: all together (for a workload's place in the
queue, O(log n) by bisection) and split by GPU count (a handful of distinct sizes). The best
waiting workload that fits the free room is the smallest head among the sizes that fit:
O(distinct sizes). Adding or removing is O(log n) search plus a list shift.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from ledger.core.pickling import field_state, set_fields
from ledger.core.placement import Fits

__all__ = ["Key", "SizedQueue", "least"]

Key = tuple[int, int, str]  # (-priority or 0, submit time µs, workload id)


def least(sizes: dict[int, int]) -> int:
    """Return the smallest size of a non-empty count of waiting work by size (``min`` of its keys).

    A loop rather than ``min``: compiled, the builtin is reached through the generic call (its
    arguments parsed at every call), and the picks and walks ask this at every level they look at.
    """
    best = 0
    for size in sizes:
        if best == 0 or size < best:
            best = size
    return best


class SizedQueue:
    """Waiting workloads of one group, best first; each key ends with the workload id."""

    __slots__ = ("by_size", "heads_cache", "keys")

    def __init__(self) -> None:
        self.keys: list[Key] = []
        self.by_size: dict[int, list[Key]] = {}
        # derived, never in a snapshot: ``heads()`` as last returned, until a key is added or removed
        self.heads_cache: list[tuple[Key, int]] | None = None

    def __getstate__(self) -> dict[str, object]:
        return field_state(self, ("by_size", "keys"))

    def __setstate__(self, state: object) -> None:
        set_fields(self, state)
        self.heads_cache = None

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: Key, size: int) -> None:
        """Insert a waiting workload."""
        insort(self.keys, key)
        insort(self.by_size.setdefault(size, []), key)
        self.heads_cache = None

    def remove(self, key: Key, size: int) -> None:
        """Remove a waiting workload (it must be present)."""
        del self.keys[bisect_left(self.keys, key)]
        lst = self.by_size[size]
        del lst[bisect_left(lst, key)]
        if not lst:
            del self.by_size[size]
        self.heads_cache = None

    def best(self, fits: Fits) -> Key | None:
        """Return the best key whose size fits, or None. O(distinct sizes)."""
        best: Key | None = None
        for size, lst in self.by_size.items():
            if (best is None or lst[0] < best) and fits.ok(size):
                best = lst[0]
        return best

    def position(self, key: Key) -> int:
        """Return how many keys sort before ``key``. O(log n)."""
        return bisect_left(self.keys, key)

    def heads(self) -> list[tuple[Key, int]]:
        """Return the first key of every size with its size, best first; do not modify the list.

        O(sizes log sizes) once after a change, then O(1): the walks of every pass ask each queue they
        reach, and most queues have not changed since the last pass.
        """
        heads = self.heads_cache
        if heads is None:
            heads = self.heads_cache = sorted((lst[0], size) for size, lst in self.by_size.items())
        return heads
