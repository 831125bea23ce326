"""The debug partition (``Knobs.debug_hosts``): a few hosts where only debug runs and free fill start.

Rules (fair share; docs/rules.md, "The debug partition"):

* **Which hosts.** The last ``debug_hosts`` hosts of the cluster that are not retired (the highest
  host indexes; ``placement``), never all of them; by default (``None``) 3 % of those hosts, to the
  nearest host (``knobs.debug_partition_size``). A draining or failed one is not replaced; when
  the capacity changes the partition moves to the new last hosts, and work running on a host that
  joins or leaves it runs on.
* **Who starts there.** A *debug run*: allocated work whose protected minimum runtime (the declared
  one, capped) is at most ``DEBUG_RUNTIME_S`` (15 min) on at most one host
  (``FairShareOrder.is_debug``). Debug runs are tried there first, in fair-share order among debug
  runs (``start_debug``), so they do not wait behind the order's non-debug work; they may also
  start anywhere else, as any allocated work. Free fill soaks the partition as any host
  (``fill_lane``) and is preempted for a debug run as for any allocated request.
* **Preemption.** A debug run that fits no free room preempts on the partition first
  (``preempt_debug``): the victims the fair-share rules admit (``preemption.eligibility``) on
  partition hosts only. Non-debug allocated work never starts on, nor preempts for room on, a
  partition host: the room every other start, preemption and hold sees leaves the partition out.
* **Too wide for the rest.** A run needing more hosts than there are outside the partition
  (``Hosts.outside_hosts``) can only start through a hold, and its hold may take partition hosts
  (``holds``); a held partition host is held like any other until the holder starts. So the
  *No starvation* bound (``contract.start_bound``) holds with a partition: such a run is neither
  refused nor left waiting for room it can never see.

Costs: the partition's hosts have buckets of their own, so a start there is O(gpus_per_node) plus
one fair-share descent over the debug runs' own counts; a preemption attempt there scans the
victim pool once (as ``preemption.make_room``), at most once per size a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ledger.core.contract import Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick
from ledger.core.placement import Fits
from ledger.core.preemption import eligibility, make_room
from ledger.core.reasons import start_reason
from ledger.events import Event

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["fill_into", "fill_lane", "preempt_debug", "start_debug"]


def start_debug(core: DecisionCore, t: int, out: list[Event]) -> None:
    """Start debug runs, in fair-share order among them, on the debug partition's free room."""
    order = core.order
    assert isinstance(order, FairShareOrder)
    hosts = core.hosts
    while True:
        fits = hosts.lane_fitting()
        if not fits.most:
            return
        pick = order.next_debug(t, fits)
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        chosen = hosts.lane_choose(w.size)
        assert chosen is not None
        position = order.position_of(w, t)
        why = start_reason(core, w, Pick(w.key, position, ALLOCATED), chosen, t, lane=True)
        core._start(w, chosen, t, position, out, why)


def preempt_debug(core: DecisionCore, t: int, out: list[Event]) -> bool:
    """Make room on the debug partition for the first debug run that fits no free room; return whether one was made.

    Debug runs are tried in fair-share order, the first of each size only, and once a size failed
    every larger one is skipped (as the preemption walk does): at most ``gpus_per_node`` attempts.
    """
    order = core.order
    assert isinstance(order, FairShareOrder)
    if not core.pool.any():
        return False
    hosts = core.hosts
    hl = hosts.hosts
    on_host = core.pool.on_host
    # the most room a partition host could offer, every possible victim on it gone: no attempt beyond it
    cap = 0
    for i in hosts.lane_hosts:
        if hosts.in_lane(i):
            cap = max(cap, hl[i].gpus - hl[i].used + on_host.get(i, 0))
    cap = min(cap, hosts.per_node)
    while cap > 0:
        pick = order.next_debug(t, Fits(hosts.per_node, cap, 0))
        if pick is None:
            return False
        w = core.workloads[pick.key[2]]
        if make_room(core, w, eligibility(core, w, t), t, out, partial(order.position_of, w, t), lane=True):
            return True
        cap = w.size - 1
    return False


def fill_lane(core: DecisionCore, t: int, out: list[Event]) -> None:
    """Start free fill (unallocated work) on the debug partition's free room, in the order's fill tiers."""
    hosts = core.hosts
    fill_into(core, t, out, hosts.lane_fitting, hosts.lane_choose, _DebugWords())


class _DebugWords:
    """The words of a fill start on the debug partition (a class: a compiled closure forms a reference cycle)."""

    def __call__(self, core: DecisionCore, w: Workload, pick: Pick, hosts: list[int], t: int) -> str:
        return start_reason(core, w, pick, hosts, t, lane=True)


def fill_into(
    core: DecisionCore, t: int, out: list[Event], fitting: Callable[[], Fits],
    choose: Callable[[int], list[int] | None], words: Callable[[DecisionCore, Workload, Pick, list[int], int], str],
) -> None:
    """Start free fill, in the order's fill tiers, on a room apart (``fitting``: what fits, ``choose``: where)."""
    order = core.order
    nothing = Fits(core.hosts.per_node, 0, 0)  # no allocated work starts here
    while True:
        fits = fitting()
        if not fits.most:
            return
        pick = order.next_start(t, nothing, False, fits)
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        chosen = choose(w.size)
        assert chosen is not None
        core._start(w, chosen, t, pick.position, out, words(core, w, pick, chosen, t))
