"""Short work first (prototype): debug runs, and narrow work of teams running less than their share, start before the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.core import progress
from ledger.core.contract import WAITING, Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick
from ledger.core.preemption import make_room
from ledger.core.reasons import start_reason
from ledger.core.walk import walk_allocated
from ledger.core.knobs import DEBUG_RUNTIME_S
from ledger.events import Event

_US = 1_000_000

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["start_short"]


def team_of(core: DecisionCore, node: str) -> str:
    """Return the team node ``node`` belongs to (the team level's ancestor, or the node itself)."""
    depth = core.tree.team_depth
    chain = core.tree.ancestors(node)
    if depth is None or len(chain) - 1 <= depth:
        return node
    return chain[len(chain) - 1 - depth]


def quota(core: DecisionCore, team: str) -> float:
    """Return the GPUs a team's share of the cluster is worth now."""
    return core.tree.fraction(team) * core.hosts.capacity


def used(core: DecisionCore, team: str) -> int:
    """Return the GPUs the team's work counted against its share holds now."""
    if core.knobs.guarantee == "narrow":
        return core.narrow.get(team, 0)
    return core.occ.nodes[team].allocated.rate


class _Borrower:
    """Victims for work within its share: free fill, and narrow runs of teams holding more than their share."""

    __slots__ = ("core", "per")

    def __init__(self, core: DecisionCore) -> None:
        self.core = core
        self.per = core.hosts.per_node

    def __call__(self, v: Workload) -> bool:
        if not v.allocated:
            return True
        if v.node is None or v.held > self.per:
            return False
        core = self.core
        team = team_of(core, v.node)
        return core.occ.nodes[team].allocated.rate - v.held >= quota(core, team)


def start_short(core: DecisionCore, t: int, out: list[Event]) -> None:
    """Start debug runs first, then narrow work of teams within their share, in fair-share order, preempting borrowers."""
    if core.knobs.debug_first:
        _start_debug(core, t, out)
    if core.knobs.guarantee != "off":
        _start_short(core, t, out, False)


def _start_debug(core: DecisionCore, t: int, out: list[Event]) -> None:
    """Start debug runs, in fair-share order among them: on free room, then on held room, then preempting fill."""
    from ledger.core.holds import _choose_held, _held_fits
    from ledger.core.placement import Fits
    order = core.order
    assert isinstance(order, FairShareOrder)
    hosts = core.hosts
    per = hosts.per_node
    failed = per + 1  # the smallest size that found no room at all this pass
    while True:
        fits = hosts.fitting(failed - 1)
        pick = order.next_debug(t, fits) if fits.most else None
        if pick is not None:
            w = core.workloads[pick.key[2]]
            chosen = hosts.choose(w.size, w.node)
            assert chosen is not None
            position = order.position_of(w, t)
            core._start(w, chosen, t, position, out, start_reason(core, w, Pick(w.key, position, ALLOCATED), chosen, t))
            continue
        hold = core.holds.hold
        if core.knobs.short_soak and hold is not None and hold.until - t >= DEBUG_RUNTIME_S * _US:
            fits = _held_fits(core, hold, soak=True)
            fits = Fits(per, min(fits.most, failed - 1), fits.whole if failed > per else 0)
            pick = order.next_debug(t, fits) if fits.most else None
            if pick is not None:
                w = core.workloads[pick.key[2]]
                if w.wid != hold.wid:
                    chosen = _choose_held(core, hold, w.size, soak=True)
                    position = order.position_of(w, t)
                    why = start_reason(core, w, Pick(w.key, position, ALLOCATED), chosen, t) + "; on held room"
                    core._start(w, chosen, t, position, out, why)
                    continue
        # preempt free fill (or borrowers) for the first debug run that fits nowhere, one size at a time
        if not core.pool.any():
            return
        pick = order.next_debug(t, Fits(per, failed - 1, 1 if failed > per else 0))
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        if make_room(core, w, _Borrower(core), t, out, order.position_of(w, t)):
            continue
        failed = w.size


def _start_short(core: DecisionCore, t: int, out: list[Event], debug_only: bool) -> None:
    order = core.order
    assert isinstance(order, FairShareOrder)
    hosts = core.hosts
    per = hosts.per_node
    knobs = core.knobs
    tried: set[tuple[int, int]] = set()  # sizes that found neither room nor victims this pass
    while True:
        made = False
        for node, queue, ahead, _walker in walk_allocated(order, t):
            team = team_of(core, node)
            room = quota(core, team) - used(core, team)
            for key, size in queue.heads():
                if size > per:
                    continue
                w = core.workloads[key[2]]
                if (size, progress.protection_s(core, w)) in tried:
                    continue
                if w.state != WAITING:
                    continue
                debug = order.is_debug_run(w)
                if debug_only and not debug:
                    continue
                if not debug_only and room <= 0 and knobs.guarantee != "any":
                    continue
                position = ahead + queue.position(key) + 1
                if hosts.fitting().ok(size):
                    chosen = hosts.choose(size, node)
                    assert chosen is not None
                    why = start_reason(core, w, Pick(key, position, ALLOCATED), chosen, t)
                    core._start(w, chosen, t, position, out, why)
                    made = True
                    break
                hold = core.holds.hold
                if knobs.short_soak and hold is not None and w.wid != hold.wid and w.preemptions < knobs.max_preemptions \
                        and progress.protection_s(core, w) * 1_000_000 <= hold.until - t:
                    from ledger.core.holds import _choose_held, _held_fits
                    if _held_fits(core, hold, soak=True).ok(size):
                        chosen = _choose_held(core, hold, size, soak=True)
                        why = start_reason(core, w, Pick(key, position, ALLOCATED), chosen, t) + "; soaking held room"
                        core._start(w, chosen, t, position, out, why)
                        made = True
                        break
                if core.pool.any() and make_room(core, w, _Borrower(core), t, out, position):
                    made = True
                    break
                tried.add((size, progress.protection_s(core, w)))
            if made:
                break
        if not made:
            return
