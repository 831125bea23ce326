"""Hosts and placement: which hosts have room, packing narrow work, whole hosts for wide work.

Healthy hosts are kept in buckets by free GPUs (0..gpus_per_node), each bucket a sorted list
of host indexes, so the questions a scheduling pass asks are cheap:

* does a workload of g GPUs fit? narrow (g <= gpus_per_node): the largest non-empty
  bucket >= g, O(gpus_per_node); wide: enough hosts in the "all free" bucket, O(1);
* where does it go? narrow: the fullest host that already runs work of the same budget and still
  has room, else best fit: the fullest host that still has room (smallest bucket >= g, lowest
  index) — packing limits fragmentation, and packing a budget's runs together leaves hosts whose
  runs all stand or fall with one budget's standing, which one preemption can free; wide: the
  lowest-indexed wholly free hosts;
* placing or freeing a workload moves each of its hosts between buckets, O(hosts × log n).

The debug partition (``Knobs.debug_hosts``, docs/rules.md "The debug partition"): the last
``debug_hosts`` hosts that are not retired (the highest indexes; hosts are retired from the top,
so the live hosts are always the first ones), never all of them: at least one host stays outside.
Their free room is kept in buckets of its own (``lane_buckets``), out of the room every question
above answers, so work placed by those questions never lands there; ``lane_fitting`` and
``lane_choose`` ask the same of the partition alone. ``healthy`` is the room outside the
partition, ``open`` a host that takes work at all (healthy and not held). The partition follows
the cluster's size (``resize``): a host that leaves it, or joins it, keeps the work it runs; a
draining or failed partition host is not replaced by another.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

from ledger.core.pickling import field_state, rebuilt_from_fields, set_fields

__all__ = ["Fits", "Host", "Hosts", "hosts_needed"]

_STATE = (
    "cluster", "per_node", "hosts", "by_name", "buckets", "capacity", "healthy", "budget_hosts", "lane_size",
    "lane", "lane_buckets", "open", "lane_hosts",
)


def hosts_needed(gpus: int, per_node: int) -> int:
    """Return how many whole hosts a wide workload takes (1 for a narrow one)."""
    return max(1, -(-gpus // per_node))


class Fits:
    """Which request sizes fit the free room as it is now, up to ``at_most`` GPUs: monotone in the size.

    A native class, not a closure: compiled, ``fits.ok(g)`` is a direct call, where a closure is
    called through the generic convention (its argument boxed and parsed at every call).
    """

    __slots__ = ("at_most", "most", "per", "whole")

    def __init__(self, per: int, most: int, whole: int, at_most: int = 1 << 30) -> None:
        self.per, self.most, self.whole, self.at_most = per, most, whole, at_most

    def ok(self, g: int) -> bool:
        """Return whether ``g`` GPUs fit: narrow on one host's free GPUs, wide on wholly free hosts."""
        return g <= self.at_most and (g <= self.most if g <= self.per else -(-g // self.per) <= self.whole)


@dataclass(slots=True)
class Host:
    """One host: capacity, GPUs in use, health and the workloads on it (id -> GPUs)."""

    name: str
    index: int
    gpus: int
    used: int = 0
    state: str = "healthy"  # healthy | unhealthy (draining) | failed | retired
    workloads: dict[str, int] = field(default_factory=dict)
    held: bool = False  # held for the head of the fair-share order (``holds``): out of the free room others see

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)

    @property
    def free(self) -> int:
        """GPUs not in use."""
        return self.gpus - self.used


class Hosts:
    """All hosts of the cluster, with free-GPU buckets over the schedulable (healthy) ones."""

    budget_hosts: dict[str, dict[int, int]]  # budget node -> {host index: its runs there}

    def __init__(self, cluster: str = "", per_node: int = 8, debug_hosts: int = 0) -> None:
        self._setup(cluster, per_node)
        self.lane_size = debug_hosts  # the debug partition's hosts wanted (``set_partition``; fewer if fewer live)
        self.dirty_cache: set[int] = set()  # derived: hosts whose free GPUs or health changed since a reader looked

    def __getstate__(self) -> dict[str, object]:
        # every field but ``dirty_cache`` (derived: never part of a snapshot), in the order ``_setup`` sets them
        return field_state(self, _STATE)

    def __setstate__(self, state: dict[str, object]) -> None:
        set_fields(self, state)
        self.dirty_cache = set()

    def _setup(self, cluster: str, per_node: int) -> None:
        self.cluster = cluster
        self.per_node = per_node
        self.hosts: list[Host] = []
        self.by_name: dict[str, int] = {}
        self.buckets: list[list[int]] = [[] for _ in range(per_node + 1)]
        self.capacity = 0  # GPUs on hosts that are not retired
        self.healthy: list[bool] = []  # by host index: takes new work outside the debug partition
        self.budget_hosts = {}
        self.lane_size = 0  # ``__init__`` sets it (kept here: the snapshot's fields follow this order)
        self.lane: list[bool] = []  # by host index: in the debug partition
        self.lane_buckets: list[list[int]] = [[] for _ in range(per_node + 1)]  # the partition's hosts by free GPUs
        self.open: list[bool] = []  # by host index: takes new work (healthy and not held), partition or not
        self.lane_hosts: list[int] = []  # the partition's host indexes, ascending

    # ---- shape of the cluster ------------------------------------------------------------
    def resize(self, gpus: int, per_node: int) -> list[int]:
        """Set total capacity; add hosts, or retire the highest-indexed ones; return retired indexes."""
        if not self.hosts and per_node != self.per_node:
            self.per_node = per_node
            self.buckets = [[] for _ in range(per_node + 1)]
            self.lane_buckets = [[] for _ in range(per_node + 1)]
        per_node = self.per_node
        want = -(-gpus // per_node) if gpus else 0
        sizes = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
        retired: list[int] = []
        for i, size in enumerate(sizes):
            if i < len(self.hosts):
                h = self.hosts[i]
                if h.state == "retired":
                    h.state = "healthy"
                    self._opened(i, not h.held)
                    if not h.held:
                        self._bucket_add(h)
                continue
            h = Host(f"{self.cluster}-n{i:03d}", i, size)
            self.hosts.append(h)
            self.healthy.append(True)
            self.open.append(True)
            self.lane.append(False)
            self.by_name[h.name] = i
            self._bucket_add(h)
        for h in self.hosts[want:]:
            if h.state != "retired":
                if self.open[h.index]:  # a draining, failed or held host is in no bucket
                    self._bucket_remove(h)
                h.state = "retired"
                self._opened(h.index, False)
                retired.append(h.index)
        self.capacity = sum(h.gpus for h in self.hosts if h.state != "retired")
        if self.lane_size or self.lane_hosts:
            self._partition(want, min(self.lane_size, max(want - 1, 0)))
        return retired

    def live_hosts(self) -> int:
        """Return how many hosts are not retired (the first ones: hosts are retired from the top). O(hosts)."""
        return sum(1 for h in self.hosts if h.state != "retired")

    def set_partition(self, size: int) -> None:
        """Make the last ``size`` live hosts the debug partition (never every host); hosts keep what they run."""
        self.lane_size = size
        live = self.live_hosts()
        size = min(size, max(live - 1, 0))
        if size != len(self.lane_hosts) or (self.lane_hosts and self.lane_hosts[-1] != live - 1):
            self._partition(live, size)

    def _partition(self, live: int, size: int) -> None:
        """Make the last ``size`` of the ``live`` hosts the debug partition (``lane_hosts``)."""
        first = live - size
        for h in self.hosts:
            i = h.index
            want = first <= i < live
            if self.lane[i] == want:
                continue
            if self.open[i]:
                self._bucket_remove(h)
            self.lane[i] = want
            self._opened(i, self.open[i])
            if self.open[i]:
                self._bucket_add(h)
        self.lane_hosts = list(range(first, live))

    def _opened(self, i: int, takes: bool) -> None:
        """Set whether host ``i`` takes new work, and so whether it is room outside the partition."""
        self.open[i] = takes
        self.healthy[i] = takes and not self.lane[i]

    def set_state(self, index: int, state: str) -> None:
        """Change a host's health; only healthy hosts take new work."""
        h = self.hosts[index]
        if self.open[index]:
            self._bucket_remove(h)
        h.state = state
        self._opened(index, state == "healthy" and not h.held)
        if self.open[index]:
            self._bucket_add(h)

    def set_held(self, index: int, held: bool) -> None:
        """Hold a host for one waiter (out of the free room every other start sees), or give it back."""
        h = self.hosts[index]
        if h.held == held:
            return
        if self.open[index]:
            self._bucket_remove(h)
        h.held = held
        self._opened(index, h.state == "healthy" and not held)
        if self.open[index]:
            self._bucket_add(h)
        self.dirty_cache.add(index)

    # ---- questions ------------------------------------------------------------------------
    def any_held(self, indexes: list[int]) -> bool:
        """Return whether any of these hosts is held (``holds``)."""
        hosts = self.hosts
        return any(hosts[i].held for i in indexes)

    def count(self) -> int:
        """Return how many hosts there are (retired ones included: indexes are never reused)."""
        return len(self.hosts)

    def gpus_of(self, index: int, wid: str) -> int:
        """Return the GPUs workload ``wid`` holds on host ``index`` (it must hold some)."""
        return self.hosts[index].workloads[wid]

    def room(self, index: int, extra: int) -> int:
        """Return the room host ``index`` could offer with ``extra`` GPUs freed on it, or -1 when it takes no work."""
        if not self.healthy[index]:
            return -1
        h = self.hosts[index]
        return min(h.gpus - h.used + extra, self.per_node)

    def touch(self, index: int) -> None:
        """Note that what host ``index`` could offer changed (``touched``)."""
        self.dirty_cache.add(index)

    def touched(self) -> set[int]:
        """Return the hosts whose free GPUs, health or victims changed since the last call, and forget them."""
        touched = self.dirty_cache
        self.dirty_cache = set()
        return touched

    def max_free(self) -> int:
        """Return the most free GPUs on one schedulable host. O(gpus_per_node)."""
        for k in range(self.per_node, 0, -1):
            if self.buckets[k]:
                return k
        return 0

    def free_gpus(self) -> int:
        """Return the free GPUs of all schedulable hosts. O(gpus_per_node)."""
        return sum(k * len(b) for k, b in enumerate(self.buckets))

    def whole_free(self) -> int:
        """Return how many schedulable hosts are wholly free. O(1)."""
        return len(self.buckets[self.per_node])

    def fitting(self, at_most: int = 1 << 30) -> Fits:
        """Return which sizes fit the free room now, taking at most ``at_most`` GPUs. O(gpus_per_node)."""
        return Fits(self.per_node, self.max_free(), self.whole_free(), at_most)

    def choose(self, gpus: int, budget: str | None = None) -> list[int] | None:
        """Return host indexes for a workload: narrow, its budget's fullest host or else best fit; wide, whole hosts."""
        per = self.per_node
        if gpus < per and budget is not None:
            best, room = -1, per
            for i in self.budget_hosts.get(budget, ()):  # O(hosts the budget runs on)
                h = self.hosts[i]
                free = h.gpus - h.used
                if self.healthy[i] and gpus <= free <= room and (free < room or i < best):
                    best, room = i, free
            if best >= 0:
                return [best]
        return self._best_fit(self.buckets, gpus)

    def _best_fit(self, buckets: list[list[int]], gpus: int) -> list[int] | None:
        """Return the fullest host with room (narrow) or the lowest wholly free hosts (wide) among ``buckets``."""
        per = self.per_node
        if gpus <= per:
            for k in range(gpus, per + 1):
                if buckets[k]:
                    return [buckets[k][0]]
            return None
        n = hosts_needed(gpus, per)
        whole = buckets[per]
        return list(whole[:n]) if len(whole) >= n else None

    # ---- the debug partition ----------------------------------------------------------------
    def lane_fitting(self) -> Fits:
        """Return which sizes fit the free room of the debug partition (wide: its wholly free hosts)."""
        buckets = self.lane_buckets
        most = 0
        for k in range(self.per_node, 0, -1):
            if buckets[k]:
                most = k
                break
        return Fits(self.per_node, most, len(buckets[self.per_node]))

    def lane_choose(self, gpus: int) -> list[int] | None:
        """Return debug-partition hosts for a workload: the fullest with room (narrow), wholly free ones (wide)."""
        return self._best_fit(self.lane_buckets, gpus)

    def lane_open(self) -> list[bool]:
        """Return by host index whether it is a debug-partition host that takes new work. O(hosts)."""
        lane, open_ = self.lane, self.open
        return [lane[i] and open_[i] for i in range(len(lane))]

    def in_lane(self, index: int) -> bool:
        """Return whether host ``index`` is in the debug partition and takes new work."""
        return self.lane[index] and self.open[index]

    def outside_hosts(self) -> int:
        """Return how many full-size hosts outside the debug partition are not retired (whatever their health)."""
        return sum(1 for h in self.hosts if h.state != "retired" and not self.lane[h.index] and h.gpus == self.per_node)

    def share_on(self, gpus: int, n_hosts: int) -> list[int]:
        """Return how many GPUs a workload holds on each of its hosts (whole hosts when wide)."""
        return [gpus] if gpus <= self.per_node else [self.per_node] * n_hosts

    # ---- changes --------------------------------------------------------------------------
    def place(self, wid: str, indexes: list[int], gpus: int, budget: str | None) -> None:
        """Put a workload (charged to ``budget``, if any) on hosts. O(hosts × log n)."""
        for i, g in zip(indexes, self.share_on(gpus, len(indexes)), strict=True):
            h = self.hosts[i]
            healthy = self.open[i]
            if healthy:
                self._bucket_remove(h)
            h.used += g
            h.workloads[wid] = g
            self._count(budget, i, 1)
            if healthy:
                self._bucket_add(h)

    def keep(self, wid: str, indexes: list[int], gpus: int, budget: str | None) -> None:
        """Let a leaving workload hold again what it still uses: up to its share of each host, as far as it is free."""
        for i, share in zip(indexes, self.share_on(gpus, len(indexes)), strict=True):
            h = self.hosts[i]
            held = h.workloads.get(wid, 0)
            g = min(share - held, h.gpus - h.used)
            if g <= 0:
                continue
            healthy = self.open[i]
            if healthy:
                self._bucket_remove(h)
            h.used += g
            h.workloads[wid] = held + g
            if not held:
                self._count(budget, i, 1)
            if healthy:
                self._bucket_add(h)

    def holds(self, wid: str, indexes: list[int]) -> bool:
        """Return whether a workload still holds GPUs on any of these hosts."""
        return any(wid in self.hosts[i].workloads for i in indexes)

    def release(self, wid: str, indexes: list[int], budget: str | None) -> None:
        """Take a workload (charged to ``budget``, if any) off its hosts. O(hosts × log n)."""
        for i in indexes:
            h = self.hosts[i]
            g = h.workloads.pop(wid, -1)
            if g < 0:
                continue
            self._count(budget, i, -1)
            healthy = self.open[i]
            if healthy:
                self._bucket_remove(h)
            h.used -= g
            if healthy:
                self._bucket_add(h)

    def names(self, indexes: list[int]) -> tuple[str, ...]:
        """Return host names for indexes."""
        hosts = self.hosts
        if len(indexes) == 1:  # most work holds one host: no generator
            return (hosts[indexes[0]].name,)
        return tuple(hosts[i].name for i in indexes)

    def _count(self, budget: str | None, i: int, runs: int) -> None:
        if budget is None:
            return
        on = self.budget_hosts.setdefault(budget, {})
        n = on.get(i, 0) + runs
        if n > 0:
            on[i] = n
        else:
            on.pop(i, None)
            if not on:
                del self.budget_hosts[budget]

    def _bucket_add(self, h: Host) -> None:
        self.dirty_cache.add(h.index)
        insort((self.lane_buckets if self.lane[h.index] else self.buckets)[h.gpus - h.used], h.index)

    def _bucket_remove(self, h: Host) -> None:
        self.dirty_cache.add(h.index)
        b = (self.lane_buckets if self.lane[h.index] else self.buckets)[h.gpus - h.used]
        del b[bisect_left(b, h.index)]
