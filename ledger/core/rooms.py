"""The room each host could offer a waiter: its free GPUs plus the GPUs of the possible victims on it.

Hosts are kept in buckets by that room (0..gpus_per_node; unhealthy hosts in none), recounted
only for the hosts that changed since the last look (a placement, a release, a health or pool
change on them: ``Hosts.touched``), so a look is O(changed hosts); the victim pool keeps them
(``pool.VictimPool.rooms``). The buckets answer, before any victim is sorted or judged:

* ``refused_from``: the smallest size for which no host (narrow) or too few hosts (wide) could
  make the room even if every possible victim went, so every larger size is refused too:
  O(gpus_per_node), and a preemption walk skips those sizes (or the whole walk) without trying;
* which hosts could reach a size at all (``members``): ``preemption.room_possible`` asks only
  those whether the victims a waiter may actually preempt would make its room.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.core.placement import Hosts

__all__ = ["RoomBuckets", "refused_from"]


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
