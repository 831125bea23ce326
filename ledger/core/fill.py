"""The fill step: whatever waits and fits the free room starts, best first; free fill also on a room apart.

* ``fill``: while some waiting workload fits the free room of the healthy hosts that are not held
  (outside the debug partition), start the first such workload in the policy's order (backfill:
  whatever can start without preempting starts; nothing waits for a workload that cannot start).
  Allocated work is placed before unallocated work (``allocated_only``); under fair share free
  fill is kept out of the last ``Knobs.fill_headroom`` of the capacity (``fill_room``). One pick
  costs O(depth × b log b + distinct sizes) under fair share (``fairshare``), independent of the
  queue length; the loop ends as soon as nothing fits.
* ``fill_into``: free fill on a room apart, the debug partition (``lanes``) or held hosts (``holds``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ledger.core.contract import Workload
from ledger.core.fairshare import Pick
from ledger.core.placement import Fits
from ledger.core.progress import allocated_waiting
from ledger.core.reasons import start_reason
from ledger.core.state import CoreState
from ledger.events import Event

__all__ = ["fill", "fill_into", "fill_room"]


def fill(core: CoreState, t: int, out: list[Event], allocated_only: bool = False) -> None:
    """Start what waits and fits the free room, in the policy's order (``allocated_only``: allocated work only)."""
    order = core.order
    hosts = core.hosts
    while hosts.max_free():  # O(gpus_per_node): a full cluster fits nothing (every size >= 1 GPU)
        # free fill is picked among what fits the room it may take (the best fill that fits
        # the hosts, or when that one is too wide, the best narrower one: the same pick), and the
        # fill tiers are not descended at all when that room is gone
        fill_fits = None if allocated_only else _fill_fits(core)
        pick = order.next_start(t, hosts.fitting(), allocated_only, fill_fits)
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        # under fair share a narrow run joins its budget's runs (``placement``); the baselines pack by size alone
        chosen = hosts.choose(w.size, w.node if core.knobs.policy == "fairshare" else None)
        assert chosen is not None
        core.start_run(w, chosen, t, pick.position, out, start_reason(core, w, pick, chosen, t))


def _fill_fits(core: CoreState) -> Fits | None:
    """Return which sizes of free fill fit the room fill may take now, or None when that is all that fits."""
    free = core.hosts.free_gpus()
    room = fill_room(core, free)
    return None if room >= free else core.hosts.fitting(room)


def fill_room(core: CoreState, free: int) -> int:
    """Return how many of the ``free`` GPUs free fill may take now: all but the headroom kept for allocated work.

    Under fair share, fill is not started into the last ``fill_headroom`` of the capacity left
    free while allocated work runs or waits: that room is what the next allocated request
    takes, and fill started there would be preempted for it moments later (or make it wait out
    fill's protected window). With no allocated work in the cluster the headroom is not kept,
    so fill never waits for ever.
    """
    knobs = core.knobs
    if not knobs.fill_headroom or knobs.policy != "fairshare":
        return free
    if not core.occ.nodes[""].allocated.rate and not allocated_waiting(core):
        return free
    return free - math.ceil(knobs.fill_headroom * core.hosts.capacity)


def fill_into(
    core: CoreState, t: int, out: list[Event], fitting: Callable[[], Fits],
    choose: Callable[[int], list[int] | None], words: Callable[[CoreState, Workload, Pick, list[int], int], str],
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
        core.start_run(w, chosen, t, pick.position, out, words(core, w, pick, chosen, t))
