"""The room each host could offer a waiter: its free GPUs plus the GPUs of the possible victims on it.

Hosts are kept in buckets by that room (0..gpus_per_node; unhealthy hosts in none), recounted
only for the hosts that changed since the last look (a placement, a release, a health or pool
change on them: ``Hosts.touched``), so a look is O(changed hosts); the victim pool keeps them
(``pool.VictimPool.rooms``). The buckets answer, before
any victim is sorted or judged:

* ``refused_from``: the smallest size for which no host (narrow) or too few hosts (wide) could
  make the room even if every possible victim went, so every larger size is refused too:
  O(gpus_per_node), and a preemption walk skips those sizes (or the whole walk) without trying;
* ``room_possible``: whether the victims a waiter may actually preempt (``reachable``) could make
  the room, asked only of the hosts whose bucket reaches the size and of the work on them,
  instead of sorting and scanning the whole pool. It answers exactly what the cheapest-first scan
  of ``preemption.make_room`` would find (that some host is made ready), so a refusal here is the
  scan's refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ledger.core.contract import Workload
from ledger.core.placement import Hosts, hosts_needed

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["RoomBuckets", "refused_from", "room_possible"]


class RoomBuckets:
    """Per host its room (-1 when unhealthy), and the hosts by room: counts and members."""

    __slots__ = ("counts", "members", "rooms")

    def __init__(self, hosts: int, per_node: int) -> None:
        self.rooms = [-1] * hosts
        self.counts = [0] * (per_node + 1)  # counts[k]: hosts that could offer exactly k GPUs
        self.members: list[dict[int, None]] = [{} for _ in range(per_node + 1)]  # the same hosts, by index

    def recount(self, hosts: Hosts, on_host: dict[int, int], dirty: Iterable[int]) -> None:
        """Move the ``dirty`` hosts to the buckets of the room they could offer now (``on_host``: victims' GPUs)."""
        rooms, counts, members = self.rooms, self.counts, self.members
        for i in dirty:
            room = hosts.room(i, on_host.get(i, 0))
            old = rooms[i]
            if old != room:
                if old >= 0:
                    counts[old] -= 1
                    del members[old][i]
                if room >= 0:
                    counts[room] += 1
                    members[room][i] = None
                rooms[i] = room


def refused_from(buckets: RoomBuckets, per: int) -> int:
    """Return the smallest size no attempt can make room for, every possible victim gone. O(gpus_per_node).

    A narrow size needs one host whose room reaches it, a wide one (whole hosts, ``hosts_needed``)
    as many hosts that could be wholly freed: both monotone in the size, so every size at or above
    the one returned is refused and every smaller one may not be.
    """
    counts = buckets.counts
    best = per
    while best >= 0 and not counts[best]:
        best -= 1
    if best < per:
        return best + 1  # no host could be wholly freed: no wide size either
    return counts[per] * per + 1  # hosts_needed(size) > counts[per] exactly when size > counts[per] × per


def room_possible(
    core: DecisionCore, buckets: RoomBuckets, size: int, reachable: Callable[[Workload], bool]
) -> bool:
    """Return whether the victims ``reachable`` admits would make room for ``size`` GPUs (the scan's answer).

    Narrow: some host holding at least one reachable victim has free GPUs plus reachable victims'
    GPUs on it of at least ``size`` (the scan stops at the first such host). Wide: the wholly free
    hosts plus the full-size hosts all of whose work is reachable are at least the hosts needed.
    Only hosts in the buckets that reach the size are looked at (a host's room bounds what its
    reachable victims free), and on them only the work they hold: O(work on those hosts).
    """
    hosts = core.hosts
    hl = hosts.hosts
    pool = core.pool
    workloads = core.workloads
    per = hosts.per_node
    if size <= per:
        for k in range(size, per + 1):
            for i in buckets.members[k]:
                h = hl[i]
                room = h.gpus - h.used
                for wid, gpus in h.workloads.items():
                    if pool.has(wid) and reachable(workloads[wid]):
                        room += gpus
                        if room >= size:
                            return True  # the scan would stop here: this host is made ready
        return False
    need = hosts_needed(size, per)
    ready = 0
    for i in buckets.members[per]:
        h = hl[i]
        if h.gpus != per:
            continue
        if h.used and not all(pool.has(wid) and reachable(workloads[wid]) for wid in h.workloads):
            continue
        ready += 1  # wholly free, or every workload on it may be preempted
        if ready >= need:
            return True
    return False
