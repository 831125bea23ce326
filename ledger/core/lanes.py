"""Debug runs first, and the debug partition sized from their measured demand.

Rules (fair share; docs/rules.md, "Debug runs first"):

* **A debug run** is allocated work whose protected minimum runtime (the declared one, capped) is
  at most ``DEBUG_RUNTIME_S`` (15 min) on at most one host (``FairShareOrder.is_debug``).
* **First, wherever there is room.** Every pass starts debug runs before any other work, in
  fair-share order among debug runs (``start_debug``): on the debug partition's free room, then on
  any free room, then on held room when the run's protected window ends by the hold's time (it
  soaks the room as any work that ends in time may). A debug run that fits none of these preempts
  free fill, or a one-host run past its protected window of a team that holds more GPUs than its
  share of the cluster is worth (``_Spare``): room a team under its share would take back as well.
  Wide runs and the runs of teams within their share are never its victims, so a debug run never
  costs a gang its start nor a team its share. (``Knobs.debug_first`` False: only the partition
  serves them first, as before; for what-if comparisons.)
* **The partition** holds the last hosts of the cluster that are not retired (the highest host
  indexes; ``placement``), never all of them. Only debug runs and free fill start there, and a
  debug run that finds it full preempts there what the fair-share rules admit (``preempt_debug``).
* **Sized from demand** (``Knobs.debug_hosts`` None, the default): as many hosts as the debug runs
  submitted over the last day kept busy on average, counting each at its GPUs × protected window
  (``DebugDemand``), rounded up to whole hosts, at most a quarter of the live hosts; none when no
  debug run came in the last day. It is sized again at a pass at most every ``RESIZE_S``; a host that
  joins or leaves it runs on what it runs. A number of hosts fixes it (0: none).
* **Too wide for the rest.** A run needing more hosts than there are outside the partition
  (``Hosts.outside_hosts``) can only start through a hold, and its hold may take partition hosts
  (``holds``); so the *No starvation* bound (``contract.start_bound``) holds with a partition.

Costs: the partition's hosts have buckets of their own, so a start there is O(gpus_per_node) plus
one fair-share descent over the debug runs' own counts; a start elsewhere the same over the main
buckets; a preemption attempt scans the victim pool once (as ``preemption.make_room``), once per
size a pass. Sizing is O(1) amortised per debug submission.
"""

from __future__ import annotations

import math
from functools import partial

from ledger.core.contract import Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick
from ledger.core.fill import fill_into
from ledger.core.holds import choose_held, held_fits, soak_words
from ledger.core.placement import Fits
from ledger.core.preemption import eligibility, make_room
from ledger.core.reasons import start_reason
from ledger.core.state import CoreState
from ledger.events import Event

__all__ = ["RESIZE_S", "fill_lane", "partition_hosts", "preempt_debug", "size_partition", "start_debug"]

_US = 1_000_000
RESIZE_S = 600  # the partition is sized again at most this often (s)


def partition_hosts(mean_gpus: float, per_node: int, live: int) -> int:
    """Return the partition's hosts for debug runs keeping ``mean_gpus`` busy: whole hosts, at most a quarter.

    Rounded up: a few debug runs a day on a full cluster still find a host whose room frees within
    minutes (measured against none below one GPU busy: docs/rules.md, "Debug runs first").
    """
    if mean_gpus <= 0:
        return 0
    return min(math.ceil(mean_gpus / per_node), live // 4)


def size_partition(core: CoreState, t: int) -> None:
    """Size the debug partition from the debug runs submitted over the last day (at most every ``RESIZE_S``)."""
    demand = core.debug_demand
    if demand.sized_at >= 0 and t < demand.sized_at + RESIZE_S * _US:
        return
    demand.sized_at = t
    hosts = core.hosts
    hosts.set_partition(partition_hosts(demand.mean_gpus(t), hosts.per_node, hosts.live_hosts()))
    size = len(hosts.lane_hosts)
    if size != (demand.sizes[-1][1] if demand.sizes else 0):
        demand.sizes.append((t, size))


def start_debug(core: CoreState, t: int, out: list[Event]) -> None:
    """Start debug runs before any other work, in fair-share order among them (see the module docstring)."""
    order = core.order
    assert isinstance(order, FairShareOrder)
    hosts = core.hosts
    per = hosts.per_node
    first = core.knobs.debug_first
    failed = per + 1  # the smallest size that found no room and no victims this pass: no larger one is tried
    while True:
        fits = hosts.lane_fitting()
        pick = order.next_debug(t, fits) if fits.most else None
        if pick is not None:
            _start(core, pick, _OnPartition(core), t, out, lane=True)
            continue
        if not first:
            return
        fits = hosts.fitting(failed - 1)
        pick = order.next_debug(t, fits) if fits.most else None
        if pick is not None:
            _start(core, pick, _Anywhere(core), t, out)
            continue
        hold = core.holds.hold
        if hold is not None and hold.until - t >= order.debug_s * _US:  # the longest debug protection ends in time
            fits = held_fits(core, hold, failed - 1)
            pick = order.next_debug(t, fits) if fits.most else None
            if pick is not None and pick.key[2] != hold.wid:
                _start(core, pick, _Held(core), t, out)
                continue
        if not core.pool.any():
            return
        pick = order.next_debug(t, Fits(per, failed - 1, 1 if failed > per else 0))
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        if not make_room(core, w, _Spare(core), t, out, partial(order.position_of, w, t)):
            failed = w.size


def _start(core: CoreState, pick: Pick, where: _Where, t: int, out: list[Event], lane: bool = False) -> None:
    """Start the debug run ``pick`` on the hosts ``where`` chooses for it, saying where and why."""
    w = core.workloads[pick.key[2]]
    chosen = where.choose(w)
    position = core.order.position_of(w, t)
    why = start_reason(core, w, Pick(w.key, position, ALLOCATED), chosen, t, lane=lane, debug=not lane)
    core.start_run(w, chosen, t, position, out, why + where.words(chosen))


class _Where:
    """Where a debug run goes in one kind of room, and what the decision adds about that room."""

    __slots__ = ("core",)

    def __init__(self, core: CoreState) -> None:
        self.core = core

    def choose(self, w: Workload) -> list[int]:
        """Return the hosts for ``w``."""
        raise NotImplementedError

    def words(self, hosts: list[int]) -> str:
        """Return what the start decision adds about this room."""
        return ""


class _OnPartition(_Where):
    def choose(self, w: Workload) -> list[int]:
        chosen = self.core.hosts.lane_choose(w.size)
        assert chosen is not None
        return chosen


class _Anywhere(_Where):
    def choose(self, w: Workload) -> list[int]:
        chosen = self.core.hosts.choose(w.size, w.node)  # beside its budget's runs, as any narrow run
        assert chosen is not None
        return chosen


class _Held(_Where):
    def choose(self, w: Workload) -> list[int]:
        hold = self.core.holds.hold
        assert hold is not None
        return choose_held(self.core, hold, w.size)

    def words(self, hosts: list[int]) -> str:
        hold = self.core.holds.hold
        assert hold is not None
        return soak_words(hold, hosts)


class _Spare:
    """Who a debug run may preempt off the partition: free fill, and one-host runs of teams above their share.

    A team's share is its part of the cluster (``BudgetTree.fraction``) × the capacity, in GPUs; a
    team holds more when its allocated runs hold more GPUs than that now, and still would without
    the victim. Only runs past their protected window are in the victim pool at all. (A class: a
    compiled closure forms a reference cycle.)
    """

    __slots__ = ("core", "per")

    def __init__(self, core: CoreState) -> None:
        self.core = core
        self.per = core.hosts.per_node

    def __call__(self, v: Workload) -> bool:
        if not v.allocated:
            return True
        if v.node is None or v.held > self.per:
            return False
        core = self.core
        team = core.tree.team(v.node)
        return core.occ.nodes[team].allocated.rate - v.held >= core.tree.fraction(team) * core.hosts.capacity


def preempt_debug(core: CoreState, t: int, out: list[Event]) -> bool:
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


def fill_lane(core: CoreState, t: int, out: list[Event]) -> None:
    """Start free fill (unallocated work) on the debug partition's free room, in the order's fill tiers."""
    hosts = core.hosts
    fill_into(core, t, out, hosts.lane_fitting, hosts.lane_choose, _DebugWords())


class _DebugWords:
    """The words of a fill start on the debug partition (a class: a compiled closure forms a reference cycle)."""

    def __call__(self, core: CoreState, w: Workload, pick: Pick, hosts: list[int], t: int) -> str:
        return start_reason(core, w, pick, hosts, t, lane=True)
