"""The debug runs submitted over the last day: the demand the debug partition is sized from (``lanes``)."""

from __future__ import annotations

__all__ = ["DAY_S", "DebugDemand"]

_US = 1_000_000
DAY_S = 86_400  # the demand the partition is sized from: the debug runs submitted over the last day


class DebugDemand:
    """The debug runs submitted over the last day, each as GPUs × protected window: what sizes the partition."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int]] = []  # (submitted, µs; GPU-seconds protected), oldest first
        self.total = 0  # GPU-seconds of the entries
        self.sized_at = -1  # µs: when the partition was last sized from it
        self.sizes: list[tuple[int, int]] = []  # (from, µs; hosts): every size it was given, for ``explain``

    def snapshot(self) -> dict[str, object]:
        """Return the demand's state for a snapshot."""
        return {"log": self.log, "total": self.total, "sized_at": self.sized_at, "sizes": self.sizes}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        log, total, sized_at, sizes = state["log"], state["total"], state["sized_at"], state["sizes"]
        assert isinstance(log, list) and isinstance(total, int) and isinstance(sized_at, int)
        assert isinstance(sizes, list)
        self.log, self.total, self.sized_at, self.sizes = log, total, sized_at, sizes

    def submitted(self, t: int, gpu_s: int) -> None:
        """Count a debug run submitted at ``t`` (µs) asking for ``gpu_s`` protected GPU-seconds. O(1)."""
        self.log.append((t, gpu_s))
        self.total += gpu_s

    def mean_gpus(self, t: int) -> float:
        """Return the GPUs the debug runs submitted over the day before ``t`` keep busy on average.

        O(entries expired) plus one shift of the list when any expired: it is asked once per ``RESIZE_S``.
        """
        log, i = self.log, 0
        while i < len(log) and log[i][0] <= t - DAY_S * _US:
            self.total -= log[i][1]
            i += 1
        if i:
            del log[:i]
        return self.total / DAY_S
