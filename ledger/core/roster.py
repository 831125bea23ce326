"""The workloads the core knows, by id, and the finished ones, forgotten one window after they end."""

from __future__ import annotations

from collections import deque
from collections.abc import ValuesView

from ledger.core.contract import DONE, EXITING, Workload

__all__ = ["Roster"]


class Roster:
    """Every known workload by id (submit order), and the finished ones in the order they finished."""

    def __init__(self) -> None:
        self.by_id: dict[str, Workload] = {}
        self.finished: deque[tuple[int, str]] = deque()  # (when µs, workload id)

    def snapshot(self) -> dict[str, object]:
        """Return the roster's state for a snapshot."""
        return {"by_id": self.by_id, "finished": self.finished}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        by_id, finished = state["by_id"], state["finished"]
        assert isinstance(by_id, dict) and isinstance(finished, deque)
        self.by_id, self.finished = by_id, finished

    def get(self, wid: str | None) -> Workload | None:
        """Return the workload of this id, or None."""
        return self.by_id.get(wid) if wid is not None else None

    def __getitem__(self, wid: str) -> Workload:
        return self.by_id[wid]

    def values(self) -> ValuesView[Workload]:
        """Return every known workload, in submit order."""
        return self.by_id.values()

    def add(self, w: Workload) -> None:
        """Know ``w`` (a submission, or a finished workload submitted again under its id)."""
        self.by_id[w.wid] = w

    def finish(self, w: Workload, t: int) -> None:
        """Mark ``w`` done at ``t``; it is forgotten a window later (``forget``)."""
        w.state = DONE
        self.finished.append((t, w.wid))

    def forget(self, horizon: int) -> None:
        """Drop workloads finished before ``horizon`` (amortised O(1)): the state stays bounded.

        A duplicate of their submission arriving later than that would be taken as new.
        """
        finished = self.finished
        by_id = self.by_id
        while finished and finished[0][0] < horizon:
            _, wid = finished.popleft()
            w = by_id.get(wid)
            if w is not None and w.state == DONE:
                del by_id[wid]

    def exiting_for(self, waiter: str) -> list[Workload]:
        """Return the victims still running out their grace period for ``waiter``. O(workloads)."""
        return [v for v in self.by_id.values() if v.state == EXITING and v.exit_by == waiter]

    def exiting_on(self, hosts: list[int]) -> list[Workload]:
        """Return the victims running out their grace period on any of ``hosts``. O(workloads)."""
        mine = set(hosts)
        return [v for v in self.by_id.values() if v.state == EXITING and not mine.isdisjoint(v.hosts)]
