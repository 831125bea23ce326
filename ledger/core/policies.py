"""Baseline policies behind the same interface as fair share, for what-if comparisons.

``priority`` — the old world the budgets replaced:

* one global queue ordered by priority (higher first), then submit time, then id;
* a workload with minimum runtime > 0 has opted out of preemption: it is *non-preemptible*
  and is never preempted for priority (host failure still ends it; a draining host waits for
  it to finish, as on-call engineers used to);
* each team (budget node) has a concurrent-GPU limit for non-preemptible work, derived from
  its budget as ``max(gpus_per_node, floor(fraction × capacity))`` — its share of the cluster,
  at least one host. A non-preemptible request beyond the limit still runs, but preemptible
  (as preemptible work could use idle capacity beyond the limit); it remains *allocated* work,
  charged to its budget: allocated or not is what a workload declares, under every policy;
* preemptible work (minimum runtime 0, or beyond the limit) may be preempted by any waiting
  workload of strictly higher priority;
* nothing is charged up front and there is no protected window beyond "non-preemptible".

``fifo`` — first come, first served by submit time, with the same backfill (anything that fits
starts), no preemption except by host failure; draining works as under fair share.

Both keep one sorted queue (``SizedQueue``): picking the best workload that fits is
O(distinct sizes), independent of queue length.
"""

from __future__ import annotations

from ledger.core.contract import Workload
from ledger.core.fairshare import Pick
from ledger.core.pickling import field_state, set_fields
from ledger.core.placement import Fits
from ledger.core.queues import SizedQueue

__all__ = ["FlatOrder", "team_limit"]


def team_limit(fraction: float, capacity: int, per_node: int) -> int:
    """Return a team's concurrent GPU limit for non-preemptible work under the priority policy."""
    return max(per_node, int(fraction * capacity))


class FlatOrder:
    """One global queue (priority or fifo order)."""

    def __init__(self, by_priority: bool = False) -> None:
        self.by_priority = by_priority
        self.queue = SizedQueue()

    def __getstate__(self) -> dict[str, object]:
        return field_state(self, ("by_priority", "queue"))

    def __setstate__(self, state: object) -> None:
        set_fields(self, state)

    def key_for(self, w: Workload) -> tuple[int, int, str]:
        """Return the queue key of a workload under this policy."""
        return (-w.priority if self.by_priority else 0, w.submit_us, w.wid)

    def add(self, w: Workload) -> None:
        """Queue a waiting workload. O(log n)."""
        self.queue.add(w.key, w.size)

    def remove(self, w: Workload) -> None:
        """Take a workload out of the queue. O(log n)."""
        self.queue.remove(w.key, w.size)

    def waiting(self) -> int:
        """Return how many workloads wait."""
        return len(self.queue)

    def next_start(
        self, t: int, fits: Fits, allocated_only: bool = False, fill_fits: Fits | None = None,
    ) -> Pick | None:
        """Return the first waiting workload that fits, or None. O(distinct sizes + log n).

        One queue for every tier: ``allocated_only`` and ``fill_fits`` (the fill headroom is a
        fair-share rule) do not apply.
        """
        key = self.queue.best(fits)
        if key is None:
            return None
        return Pick(key, self.queue.position(key) + 1, 0)

    def position_of(self, w: Workload, t: int) -> int:
        """Return a waiting workload's 1-based place in the queue. O(log n)."""
        return self.queue.position(w.key) + 1
