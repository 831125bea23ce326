"""Preemption: which waiting workload may preempt whom, and the victims that discard the least.

Rules (fair share):

* only allocated requests preempt; unallocated work (minimum runtime 0, or an undefined
  budget path) never does;
* eligible victims: unallocated work (any allocated request may preempt it), then allocated
  work past its protected window whose allocation ranks *after* the waiter's in the fair-share
  walk — and, so that a swap is never undone at once, only if the waiter's branch would still
  rank ahead after being charged the waiter's protected runtime (compared at the two branches
  of the lowest common ancestor). Protected work is never a victim (host failure aside).
* victims are taken cheapest first: unallocated, then resumable allocated, then non-resumable
  allocated (the costliest: all its work is lost), and within a tier the fewest GPU-seconds
  since the last checkpoint; ties by id;
* a preemption is made only if the freed room actually lets the waiter start: a narrow waiter
  needs one host whose free GPUs plus the victims' reach its size; a wide one needs enough
  hosts that become wholly free. Only the victims on the chosen hosts are preempted.

Costs: a pass tries, per node in fair-share order, only the first waiter of each size, and
skips every size at or above one that already failed (and subtrees holding only such sizes),
so a pass makes O(distinct sizes) failed attempts; one attempt is O(p log p) for p running
preemptible workloads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ledger.core.contract import WAITING, Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick, percent
from ledger.core.placement import hosts_needed
from ledger.core.policies import FlatOrder
from ledger.core.reasons import start_reason
from ledger.events import Event

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["make_room", "preempt_for", "preempt_once"]

_US = 1_000_000


def preempt_once(core: DecisionCore, t: int, out: list[Event]) -> bool:
    """Walk the allocated waiters once and make the preemptions the rules allow; return whether any was made."""
    if not core.preemptible or core.knobs.policy == "fifo":
        return False
    if isinstance(core.order, FlatOrder):
        return _for_priority(core, t, out)
    order = core.order
    totals = order.totals[ALLOCATED]
    sizes = [s for r in core.tree.roots if totals.get(r) for s in order.sizes[ALLOCATED][r]]
    if not sizes:
        return False
    smallest = min(sizes)
    free = sum(k * len(b) for k, b in enumerate(core.hosts.buckets))
    exposed_total = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
    fail = math.inf
    ratios: dict[str, float] = {}

    def wanted(subtree_sizes: dict[int, int]) -> bool:
        return min(subtree_sizes) < fail

    made = False
    for _node, queue, ahead, walker in order.walk_allocated(t, wanted):
        bound = free + core.unalloc_gpus + exposed_total - walker.passed_exposed
        if bound < smallest or fail <= smallest:
            return made
        for key, size in queue.heads():
            waiter = core.workloads[key[2]]
            if size >= fail or waiter.state != WAITING:
                continue
            if size > bound:  # sizes are GPUs held: whole hosts for wide work
                fail = min(fail, size)
                continue
            ranks_after = walker.ranks_after
            # the rules for an allocated victim depend on its node alone: decided once per node and attempt
            verdicts: dict[str, bool] = {}

            def eligible(
                v: Workload, waiter: Workload = waiter, ranks_after: Callable[[str], bool] = ranks_after,
                verdicts: dict[str, bool] = verdicts,
            ) -> bool:
                # unallocated work yields to any allocated request; allocated work only to a higher-ranked one
                if not v.allocated:
                    return True
                if v.node is None:
                    return False
                ok = verdicts.get(v.node)
                if ok is None:
                    ok = verdicts[v.node] = ranks_after(v.node) and _swap_holds(core, waiter, v, t, ratios)
                return ok

            if make_room(core, waiter, eligible, t, out, ahead + queue.position(key) + 1):
                # Carry on along the same walk (its order fixed at the start of this instant) rather
                # than start over: whatever now fits starts first, and every later eligibility check
                # still uses fresh ratios (the swap rule), so nothing ranked ahead is preempted.
                made = True
                ratios.clear()
                core._fill(t, out, allocated_only=True)
                free = sum(k * len(b) for k, b in enumerate(core.hosts.buckets))
                exposed_total = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
                continue
            fail = min(fail, size)
    return made


def preempt_for(core: DecisionCore, waiter: Workload, t: int, out: list[Event]) -> bool:
    """Try to make room for one (newly submitted) allocated waiter only. O(p × depth + p log p)."""
    if not core.preemptible or core.knobs.policy == "fifo":
        return False
    if isinstance(core.order, FlatOrder):
        prio = waiter.priority
        flat = core.order
        return make_room(core, waiter, lambda v: v.priority < prio, t, out, lambda: flat.position_of(waiter, t))
    need = waiter.size
    exposed = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
    if need > sum(k * len(b) for k, b in enumerate(core.hosts.buckets)) + core.unalloc_gpus + exposed:
        return False  # not even every preemptible GPU would make room
    ratios: dict[str, float] = {}
    verdicts: dict[str, bool] = {}  # victim node -> eligible (the rules depend on the node alone)

    def eligible(v: Workload) -> bool:
        if not v.allocated:
            return True
        if v.node is None:
            return False
        ok = verdicts.get(v.node)
        if ok is None:
            ok = verdicts[v.node] = _outranks(core, waiter, v, t, ratios)
        return ok

    order = core.order
    return make_room(core, waiter, eligible, t, out, lambda: order.position_of(waiter, t))


def _outranks(core: DecisionCore, waiter: Workload, victim: Workload, t: int, ratios: dict[str, float]) -> bool:
    """Return whether the waiter's allocation ranks ahead of the victim's in the walk, swap margin included."""
    assert waiter.node is not None and victim.node is not None
    mine, theirs = core.tree.branches(waiter.node, victim.node)
    if theirs is None:
        return False  # the same node, or the victim is charged to an ancestor: it ranks first
    if mine is None:
        return True  # the waiter is charged to an ancestor of the victim's node: own work ranks first
    order = core.order
    assert isinstance(order, FairShareOrder)
    for p in (mine, theirs):
        if p not in ratios:
            ratios[p] = order.ratio(p, t)
    if (round(ratios[mine], 9), mine) > (round(ratios[theirs], 9), theirs):
        return False
    return _swap_holds(core, waiter, victim, t, ratios)


def _swap_holds(core: DecisionCore, waiter: Workload, victim: Workload, t: int, ratios: dict[str, float]) -> bool:
    """Return whether the waiter's branch, charged its protected runtime, still ranks ahead. O(depth)."""
    assert waiter.node is not None and victim.node is not None
    mine, theirs = core.tree.branches(waiter.node, victim.node)  # O(1) once seen
    if mine is None or theirs is None:
        return True  # one is charged to an ancestor of the other: the walk order decides
    order = core.order
    assert not isinstance(order, FlatOrder)
    for p in (mine, theirs):
        if p not in ratios:
            ratios[p] = order.ratio(p, t)
    alloc = order.allocation_us(mine, t)
    if alloc <= 0:
        return False
    held = waiter.size
    return ratios[mine] + held * waiter.min_runtime_s * _US / alloc < ratios[theirs]


def _for_priority(core: DecisionCore, t: int, out: list[Event]) -> bool:
    assert isinstance(core.order, FlatOrder)
    fail = math.inf
    for key, size in core.order.queue.heads():
        if size >= fail:
            continue
        waiter = core.workloads[key[2]]
        position = core.order.queue.position(key) + 1

        def outranked(v: Workload, prio: int = waiter.priority) -> bool:
            return v.priority < prio

        if make_room(core, waiter, outranked, t, out, position):
            return True
        fail = min(fail, size)
    return False


def make_room(
    core: DecisionCore, waiter: Workload, eligible: Callable[[Workload], bool], t: int, out: list[Event],
    place: int | Callable[[], int],
) -> bool:
    """Preempt the least costly victims that let ``waiter`` start, and start it; False if impossible.

    ``place`` is the waiter's queue position, or a function computing it (O(depth × b log b)),
    called only once the attempt succeeds: most attempts fail.
    """
    hosts = core.hosts
    per = hosts.per_node
    # Cheapest first; eligibility (which ranks and ratios decide) is only asked of the candidates
    # actually reached, usually a handful: O(p log p) to sort, O(depth) per candidate reached.
    healthy = hosts.healthy
    if waiter.size <= per:
        # cheap necessary condition, O(hosts): some healthy host reaches the size with every victim on it
        on = core.pool_on_host
        if not any(healthy[h.index] and h.free + on.get(h.index, 0) >= waiter.size for h in hosts.hosts):
            return False
    tiers, ready = _victim_tiers(core, t)
    sick = not all(healthy)  # O(hosts) once, rather than a health check per candidate when all are healthy

    def reachable() -> Iterator[Workload]:
        # a tier is only sorted once the cheaper ones did not make enough room (and then kept sorted
        # for the rest of the instant, until the pool changes)
        for k, tier in enumerate(tiers):
            if not ready[k]:
                # key: Workload.lost_if_preempted(t), inlined (it is evaluated for every possible victim)
                keyed = [
                    (v.held * max(0, t - (v.last_ckpt_us if v.resumable else v.start_us)), v.wid, v) for v in tier
                ]
                keyed.sort()
                tier[:] = [v for *_, v in keyed]
                ready[k] = True
            for v in tier:
                if (not sick or all(healthy[i] for i in v.hosts)) and eligible(v):
                    yield v

    chosen_hosts: list[int]
    victims: list[Workload]
    if waiter.size <= per:
        freed: dict[int, int] = {}
        taken: list[Workload] = []
        chosen = -1
        for v in reachable():
            taken.append(v)
            for i in v.hosts:
                freed[i] = freed.get(i, 0) + hosts.hosts[i].workloads[v.wid]
                if hosts.hosts[i].free + freed[i] >= waiter.size:
                    chosen = i
                    break
            if chosen >= 0:
                break
        if chosen < 0:
            return False
        victims = [v for v in taken if chosen in v.hosts]
        chosen_hosts = [chosen]
    else:
        n = hosts_needed(waiter.size, per)
        whole = list(hosts.buckets[per])
        left: dict[int, int] = {}
        taken = []
        done: list[int] = []
        for v in reachable():
            taken.append(v)
            for i in v.hosts:
                h = hosts.hosts[i]
                if h.gpus != per:
                    continue
                left[i] = left.get(i, len(h.workloads)) - 1
                if left[i] == 0:
                    done.append(i)
            if len(whole) + len(done) >= n:
                break
        if len(whole) + len(done) < n:
            return False
        chosen_hosts = sorted(whole + done[: n - len(whole)])
        targets = set(chosen_hosts)  # membership only; never iterated
        victims = [v for v in taken if any(i in targets for i in v.hosts)]
    position = place() if callable(place) else place
    why_victim = _victim_reason(core, waiter, t)
    for v in victims:
        core._preempt(v, t, out, "fair_share", waiter, why_victim(v), position=position)
    if waiter.size <= per:
        assert hosts.hosts[chosen_hosts[0]].free >= waiter.size
    freed_gpus = sum(v.held for v in victims)
    why = (
        f"preempted {len(victims)} workload(s) holding {freed_gpus} GPUs to make room; "
        + start_reason(core, waiter, Pick(waiter.key, position, ALLOCATED), chosen_hosts, t)
    )
    core._start(waiter, chosen_hosts, t, position, out, why, grace=core.knobs.grace_s * _US)
    return True


def _victim_tiers(core: DecisionCore, t: int) -> tuple[tuple[list[Workload], ...], list[bool]]:
    """Return the possible victims by cost tier (unallocated, resumable, non-resumable) and which tiers are sorted.

    O(p) to partition; cached for the rest of the instant while the pool is unchanged
    (``core.pool_version`` moves on every pool change and checkpoint), so the failed attempts of
    one pass share one partition and one sort per tier instead of O(p log p) each.
    """
    key = (t, core.pool_version)
    cached = core.victims_cache
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    pool = core.workloads
    tiers: tuple[list[Workload], list[Workload], list[Workload]] = ([], [], [])
    for wid in core.preemptible:
        v = pool[wid]
        tiers[0 if not v.allocated else (1 if v.resumable else 2)].append(v)
    ready = [False, False, False]
    core.victims_cache = (key, tiers, ready)
    return tiers, ready


def _victim_reason(core: DecisionCore, waiter: Workload, t: int) -> Callable[[Workload], str]:
    if core.knobs.policy == "priority":
        return lambda v: (
            f"preemptible work of priority {v.priority}: {waiter.wid} of priority {waiter.priority} needs the room"
        )
    assert isinstance(core.order, FairShareOrder)
    wr = core.order.ratio(waiter.node, t) if waiter.node else 0.0

    def why(v: Workload) -> str:
        if not v.allocated:
            return (
                f"unallocated work is preemptible by any allocated request: "
                f"{waiter.wid} ({waiter.node}) needs the room"
            )
        vr = core.order.ratio(v.node, t) if isinstance(core.order, FairShareOrder) and v.node else 0.0
        return (
            f"past its protected window and {v.node} ({percent(vr)} of its allocation used) ranks after "
            f"{waiter.node} ({percent(wr)}) in the fair-share order: {waiter.wid} needs the room; "
            f"it discards {v.lost_if_preempted(t) // _US} GPU-seconds since its last checkpoint"
        )

    return why

