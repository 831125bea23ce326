"""The victim pool: running work some waiter may preempt, and the counts the preemption rules bound their search by.

It keeps, besides its members, their GPUs per host (the room a host could offer is its free GPUs
plus those: ``rooms``), the GPUs of running unallocated work, and (priority policy) the GPUs of
non-preemptible work per team. ``version`` moves whenever a member joins or leaves or a member's
checkpoint changes what preempting it costs, so the instant's partition of the pool by cost tier
(``tiers``) is kept until then.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.core.contract import Workload
from ledger.core.placement import Hosts
from ledger.core.rooms import RoomBuckets
from ledger.core.roster import Roster

__all__ = ["Tiers", "VictimPool"]

# the possible victims by cost tier (unallocated, resumable, non-resumable) and which tiers are sorted
Tiers = tuple[tuple[list[Workload], ...], list[bool]]


class VictimPool:
    """Running work a waiter may preempt, its GPUs per host, running unallocated GPUs, shielded GPUs per team."""

    def __init__(self) -> None:
        self.members: dict[str, None] = {}  # running work that some waiter may preempt
        self.on_host: dict[int, int] = {}  # host index -> GPUs of possible victims on it
        self.version = 0  # moves whenever the pool or a member's checkpoint changes
        self.unallocated = 0  # GPUs held by running unallocated work
        self.shielded: dict[str, int] = {}  # priority policy: GPUs of non-preemptible work per team
        # derived, never in a snapshot: ((t, version), victims by tier, which tiers are sorted)
        self.tiers_cache: tuple[tuple[int, int], tuple[list[Workload], ...], list[bool]] | None = None
        self.rooms_cache: RoomBuckets | None = None  # derived: see ``rooms``

    def snapshot(self) -> dict[str, object]:
        """Return the pool's state for a snapshot (its caches are rebuilt on demand)."""
        return {
            "members": self.members, "on_host": self.on_host, "version": self.version,
            "unallocated": self.unallocated, "shielded": self.shielded,
        }

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        members, on_host, version = state["members"], state["on_host"], state["version"]
        unallocated, shielded = state["unallocated"], state["shielded"]
        assert isinstance(members, dict) and isinstance(on_host, dict) and isinstance(version, int)
        assert isinstance(unallocated, int) and isinstance(shielded, dict)
        self.members, self.on_host, self.version = members, on_host, version
        self.unallocated, self.shielded = unallocated, shielded

    # ---- members ---------------------------------------------------------------------------
    def has(self, wid: str) -> bool:
        """Return whether the workload ``wid`` is a possible victim."""
        return wid in self.members

    def any(self) -> bool:
        """Return whether anything is a possible victim."""
        return bool(self.members)

    def add(self, w: Workload, hosts: Hosts) -> None:
        """Make a running workload a possible victim (and count its GPUs per host). O(hosts of w)."""
        self.members[w.wid] = None
        self.version += 1
        on = self.on_host
        for i in w.hosts:
            on[i] = on.get(i, 0) + hosts.gpus_of(i, w.wid)
            hosts.touch(i)

    def discard(self, w: Workload, hosts: Hosts) -> None:
        """Take ``w`` out of the pool if it is in it (before it leaves its hosts). O(hosts of w)."""
        if w.wid not in self.members:
            return
        del self.members[w.wid]
        self.version += 1
        on = self.on_host
        for i in w.hosts:
            on[i] -= hosts.gpus_of(i, w.wid)
            hosts.touch(i)

    def checkpointed(self) -> None:
        """Note that a run's checkpoint changed what preempting it costs."""
        self.version += 1

    # ---- counts ------------------------------------------------------------------------------
    def run_unallocated(self, gpus: int) -> None:
        """Count ``gpus`` more (or fewer, when negative) GPUs held by running unallocated work."""
        self.unallocated += gpus

    def unallocated_gpus(self) -> int:
        """Return the GPUs held by running unallocated work."""
        return self.unallocated

    def shield(self, team: str, gpus: int) -> None:
        """Count ``gpus`` more (or fewer) GPUs of ``team``'s non-preemptible work (priority policy)."""
        self.shielded[team] = self.shielded.get(team, 0) + gpus

    def shielded_gpus(self, team: str) -> int:
        """Return the GPUs of ``team``'s non-preemptible work (priority policy)."""
        return self.shielded.get(team, 0)

    # ---- views kept for the instant -----------------------------------------------------------
    def tiers(self, t: int, roster: Roster) -> Tiers:
        """Return the possible victims by cost tier (unallocated, resumable, non-resumable) and which tiers are sorted.

        O(p) to partition; kept for the rest of the instant while the pool is unchanged (``version``),
        so the failed attempts of one pass share one partition and one sort per tier instead of
        O(p log p) each.
        """
        key = (t, self.version)
        cached = self.tiers_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        tiers: tuple[list[Workload], list[Workload], list[Workload]] = ([], [], [])
        for wid in self.members:
            v = roster[wid]
            tiers[0 if not v.allocated else (1 if v.resumable else 2)].append(v)
        ready = [False, False, False]
        self.tiers_cache = (key, tiers, ready)
        return tiers, ready

    def rooms(self, hosts: Hosts) -> RoomBuckets:
        """Return the hosts bucketed by the room they could offer, recounting only hosts changed since the last call.

        A host's room is its free GPUs plus its possible victims' (``rooms``); ``counts[gpus_per_node]``
        is the number of whole hosts that could be wholly freed.
        """
        n = hosts.count()
        cached = self.rooms_cache
        dirty: Iterable[int]
        if cached is None or len(cached.rooms) != n:
            cached = self.rooms_cache = RoomBuckets(n, hosts.per_node)
            hosts.touched()
            dirty = range(n)
        else:
            dirty = hosts.touched()
        cached.recount(hosts, self.on_host, dirty)
        return cached
