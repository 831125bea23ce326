"""Preemption: which waiting workload may preempt whom, and the victims that discard the least.

Rules (fair share):

* only allocated requests preempt; unallocated work (minimum runtime 0, or an undefined
  budget path) never does;
* eligible victims: unallocated work (any allocated request may preempt it), then allocated
  work past its protected window, compared at the two sibling branches under their lowest common
  ancestor. Under ``Knobs.preemption_strategy`` "final-share" (default) the swap is made only if
  the waiter's branch would still rank at or ahead of the victim's *after* it: the waiter's
  branch charged the waiter's protected runtime (GPUs × the protected window its start would
  get), the victim's branch charged what it has used up to this instant and nothing of the run
  it gives up. Under "instant" (the literal rule) it is enough that the victim's branch ranks
  after the waiter's as charged now. Protected work is never a victim (host failure aside), nor
  is work already preempted ``Knobs.max_preemptions`` times (``progress.settled``).
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

from ledger.core import progress
from ledger.core.contract import WAITING, Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick, percent, round9
from ledger.core.fill import fill
from ledger.core.grace import keep_exiting
from ledger.core.placement import hosts_needed
from ledger.core.policies import FlatOrder
from ledger.core.queues import least
from ledger.core.reasons import start_reason
from ledger.core.rooms import RoomBuckets, refused_from
from ledger.core.state import CoreState
from ledger.core.walk import walk_allocated
from ledger.events import Event

__all__ = ["eligibility", "make_room", "outranks", "preempt_for", "preempt_once", "priority_pass", "room_possible"]

_US = 1_000_000


def preempt_once(core: CoreState, t: int, out: list[Event]) -> bool:
    """Walk the allocated waiters once and make the preemptions the rules allow; return whether any was made."""
    if not core.pool.any() or core.knobs.policy == "fifo":
        return False
    if isinstance(core.order, FlatOrder):
        return False  # the priority baseline preempts within its own pass (``priority_pass``)
    order = core.order
    totals = order.totals[ALLOCATED]
    sizes = [s for r in core.tree.roots if totals.get(r) for s in order.sizes[ALLOCATED][r]]
    if not sizes:
        return False
    smallest = min(sizes)
    free = core.hosts.free_gpus()
    exposed_total = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
    if free + core.pool.unallocated_gpus() + exposed_total < smallest:
        return False  # not even every preemptible GPU would seat the smallest waiter: no walk (O(roots))
    per = core.hosts.per_node
    want = _Wanted(refused_from(core.pool.rooms(core.hosts), per))
    if want.cap <= smallest:
        return False
    made = False
    for _node, queue, ahead, walker in walk_allocated(order, t, want):
        bound = free + core.pool.unallocated_gpus() + exposed_total - walker.passed_exposed
        if bound < smallest or want.fail <= smallest:
            return made
        for key, size in queue.heads():
            waiter = core.workloads[key[2]]
            if size >= want.fail or waiter.state != WAITING:
                continue
            if size > bound or size >= want.cap:  # sizes are GPUs held: whole hosts for wide work
                want.failed(size)
                continue
            if make_room(core, waiter, eligibility(core, waiter, t), t, out, ahead + queue.position(key) + 1):
                # Carry on along the same walk rather than start over: whatever now fits starts
                # first, and every later eligibility check compares fresh ratios, so nothing that
                # now ranks ahead of its waiter is preempted. (The walk's own order, fixed as it
                # went, only prunes; the caller walks again after any preemption.)
                made = True
                fill(core, t, out, allocated_only=True)
                free = core.hosts.free_gpus()
                exposed_total = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
                want.cap = refused_from(core.pool.rooms(core.hosts), per)
                continue
            want.failed(size)
    return made


class _Wanted:
    """Which subtrees a preemption walk still enters: those holding a size below the smallest that failed.

    Sizes at or above ``cap`` are refused by ``make_room`` before it looks at a victim (no host
    could make the room): they are not tried, and a subtree whose smallest size is refused is not
    entered. Each skip records the failure the refused attempt would have, so the walk decides
    exactly as if it had tried. (A class, not a closure: a compiled closure forms a reference cycle.)
    """

    __slots__ = ("cap", "fail")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.fail = 1 << 62  # the smallest size whose attempt failed in this walk (none yet)

    def failed(self, size: int) -> None:
        """Record that an attempt for ``size`` GPUs failed: no larger size can succeed in this walk."""
        if size < self.fail:
            self.fail = size

    def __call__(self, subtree_sizes: dict[int, int]) -> bool:
        smallest = least(subtree_sizes)
        if self.cap <= smallest < self.fail:
            self.fail = smallest  # its first attempt would be refused at once, and every other size is larger
        return smallest < self.fail


def preempt_for(core: CoreState, waiter: Workload, t: int, out: list[Event]) -> bool:
    """Try to make room for one (newly submitted) allocated waiter only. O(p × depth + p log p)."""
    if not core.pool.any() or core.knobs.policy == "fifo":
        return False
    order = core.order
    if isinstance(order, FairShareOrder):
        exposed = sum(core.occ.nodes[r].exposed for r in core.tree.roots)
        if waiter.size > core.hosts.free_gpus() + core.pool.unallocated_gpus() + exposed:
            return False  # not even every preemptible GPU would make room
    return make_room(core, waiter, eligibility(core, waiter, t), t, out, lambda: order.position_of(waiter, t))


def eligibility(core: CoreState, waiter: Workload, t: int) -> Callable[[Workload], bool]:
    """Return the test of who may be preempted for ``waiter`` at ``t``; the one test for every attempt.

    Priority: preemptible work of strictly lower priority. Fair share: unallocated work always;
    allocated work (past its protected window: only such work is in the pool) when its budget
    ranks after the waiter's in the fair-share walk as it stands now (``outranks``). Verdicts are
    kept per (waiter node, victim node) until the instant or a meter changes: O(1) per candidate
    after the first of its pair.
    """
    if isinstance(core.order, FlatOrder):
        prio = waiter.priority
        return lambda v: v.priority < prio
    margin = core.knobs.swap_margin
    # Verdicts depend on the two budget nodes (and, with the margin, the waiter's size and
    # protected runtime) and on the ratios: shared by every attempt of the instant until a meter
    # changes (``occ.version``), so each (waiter node, victim node) pair is decided once.
    charge = waiter.size * progress.protection_s(core, waiter) if margin else 0
    verdicts = core.verdicts.of(t, core.occ.version, (waiter.node, charge) if margin else waiter.node)
    return _Eligible(core, waiter, t, margin, charge, verdicts)


class _Eligible:
    """Fair share's test of who may be preempted for one waiter at one instant, its verdicts kept per victim node.

    A class rather than a closure: a compiled closure forms a reference cycle, and a walk makes
    thousands of these per simulated day.
    """

    __slots__ = ("charge", "core", "margin", "t", "verdicts", "waiter")

    def __init__(
        self, core: CoreState, waiter: Workload, t: int, margin: bool, charge: int, verdicts: dict[str, bool]
    ) -> None:
        self.core, self.waiter, self.t, self.margin, self.charge, self.verdicts = (
            core, waiter, t, margin, charge, verdicts
        )

    def __call__(self, v: Workload) -> bool:
        if not v.allocated:
            return True  # unallocated work yields to any allocated request
        node = v.node
        if node is None:
            return False
        ok = self.verdicts.get(node)
        if ok is None:
            ok = self.verdicts[node] = outranks(self.core, self.waiter, v, self.t, self.margin, self.charge)
        return ok


def outranks(
    core: CoreState, waiter: Workload, victim: Workload, t: int, margin: bool = False, charge: int = 0
) -> bool:
    """Return whether the waiter's allocation ranks ahead of the victim's in the walk now. O(1) (cached ratios).

    The two are compared where their paths part: the two sibling branches under the lowest
    common ancestor, by ratio (9 decimals) then path, as the walk ranks them. A waiter charged
    to an ancestor of the victim's node ranks first (a node's own work is served before its
    children's); the same node, or a victim charged to an ancestor, never ranks after.
    With ``margin`` (the final-share strategy) the waiter's branch, charged ``charge``
    GPU-seconds (the waiter's protected runtime), must still rank at or ahead of the victim's
    branch as charged now (``final_share``).
    """
    assert waiter.node is not None and victim.node is not None
    mine, theirs = core.tree.branches(waiter.node, victim.node)  # O(1) once seen
    if theirs is None:
        return False  # the same node, or the victim is charged to an ancestor: it ranks first
    if mine is None:
        return True  # the waiter is charged to an ancestor of the victim's node: own work ranks first
    order = core.order
    assert isinstance(order, FairShareOrder)
    a, b = order.key(mine, t), order.key(theirs, t)
    if a > b:
        return False
    if not margin:
        return True
    after = final_share(core, mine, theirs, charge, t)
    return after is not None and after[0] <= after[1]


def final_share(core: CoreState, mine: str, theirs: str, charge: int, t: int) -> tuple[float, float] | None:
    """Return both branches' ratios after a swap: the waiter's charged ``charge`` GPU-s more, the victim's as now.

    The victim's side keeps what it has used in the window up to ``t`` and is charged nothing of
    the run it gives up (neither the run's future nor a refund of its past). Ratios to 9 decimals,
    as the walk ranks them; None when the waiter's branch has no allocation.
    """
    order = core.order
    assert isinstance(order, FairShareOrder)
    alloc = order.allocation_us(mine, t)
    if alloc <= 0:
        return None
    return round9(order.ratio(mine, t) + charge * _US / alloc), order.key(theirs, t)[0]


def priority_pass(core: CoreState, t: int, out: list[Event], fresh: list[Workload]) -> None:
    """The priority baseline's pass: waiters in priority order, each started, or given room, or passed over.

    The best waiter that fits starts; one that does not fit first preempts lower-priority preemptible
    work if that makes it room; only a waiter that can do neither is passed over, and the work behind
    it backfills what is left. (Backfilling first, then preempting for the waiters passed over, started
    low-priority work only to preempt it in the same instant: at no cost, it was the cheapest victim,
    and work that cannot resume was cancelled without having run.) A run started here is never the
    victim of a waiter tried before it: that waiter found no room, and the run took only room that
    was free. Each size is given one failed attempt per pass (no larger size can then succeed, and
    neither starts nor preemptions add to the room a later attempt could make), so a pass costs
    O(sizes) attempts of O(p log p) and one O(sizes) walk per start. Between preemption cycles only
    fresh allocated submissions may preempt.
    """
    order = core.order
    assert isinstance(order, FlatOrder)
    queue = order.queue
    walk = core.passes.walk_due(t)
    may_walk = {w.wid for w in fresh if w.wants_allocation}
    fail = 1 << 62
    while True:
        fits = core.hosts.fitting()
        for key, size in queue.heads():
            waiter = core.workloads[key[2]]
            if fits.ok(size):
                hosts = core.hosts.choose(waiter.size, None)
                assert hosts is not None
                position = queue.position(key) + 1
                pick = Pick(key, position, ALLOCATED)
                core.start_run(waiter, hosts, t, position, out, start_reason(core, waiter, pick, hosts, t))
                break
            if size >= fail or not core.pool.any() or not (walk or waiter.wid in may_walk):
                continue
            if make_room(core, waiter, eligibility(core, waiter, t), t, out, queue.position(key) + 1):
                break
            fail = min(fail, size)
        else:
            break  # every waiter passed over: nothing more starts this instant


def make_room(
    core: CoreState, waiter: Workload, eligible: Callable[[Workload], bool], t: int, out: list[Event],
    place: int | Callable[[], int], lane: bool = False,
) -> bool:
    """Preempt the least costly victims that let ``waiter`` start, and start it; False if impossible.

    ``place`` is the waiter's queue position, or a function computing it (O(depth × b log b)),
    called only once the attempt succeeds: most attempts fail. ``lane``: a narrow debug run makes
    room on the debug partition (``lanes``), from the victims there alone; otherwise the partition's
    hosts are out of reach (``Hosts.healthy`` leaves them out).
    """
    hosts = core.hosts
    per = hosts.per_node
    may_take: Callable[[Workload], bool]
    if lane:
        assert waiter.size <= per
        may_take = _OnHealthyHosts(hosts.lane_open(), eligible)
    else:
        buckets = core.pool.rooms(hosts)
        if waiter.size >= refused_from(buckets, per):
            return False  # too few hosts could make the room even with every possible victim on them gone
        healthy = hosts.healthy
        # O(hosts) once, rather than a health check per candidate when all are healthy
        may_take = eligible if all(healthy) else _OnHealthyHosts(healthy, eligible)
        if not room_possible(core, buckets, waiter.size, may_take):
            return False  # what the scan below would find, asked of the hosts that could make the room only
    # Cheapest first; eligibility (which ranks and ratios decide) is only asked of the candidates
    # actually reached, usually a handful: O(p log p) to sort, O(depth) per candidate reached.
    tiers, ready = core.pool.tiers(t, core.workloads)

    chosen_hosts: list[int]
    victims: list[Workload]
    if waiter.size <= per:
        freed: dict[int, int] = {}
        taken: list[Workload] = []
        chosen = -1
        for v in _reachable(tiers, ready, may_take, t):
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
        for v in _reachable(tiers, ready, may_take, t):
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
        core.preempt_run(v, t, out, "fair_share", waiter, why_victim(v), position=position)
    if waiter.size <= per:
        assert hosts.hosts[chosen_hosts[0]].free >= waiter.size
    freed_gpus = sum(v.held for v in victims)
    why = (
        f"preempted {len(victims)} workload(s) holding {freed_gpus} GPUs to make room; "
        + start_reason(core, waiter, Pick(waiter.key, position, ALLOCATED), chosen_hosts, t, lane)
    )
    core.start_run(waiter, chosen_hosts, t, position, out, why, grace=core.knobs.grace_s * _US)
    for v in victims:
        keep_exiting(core, v)
    return True


def room_possible(
    core: CoreState, buckets: RoomBuckets, size: int, reachable: Callable[[Workload], bool]
) -> bool:
    """Return whether the victims ``reachable`` admits would make room for ``size`` GPUs (the scan's answer).

    It answers exactly what the cheapest-first scan of ``make_room`` would find (that some host is
    made ready), asked only of the hosts whose bucket reaches the size and of the work on them,
    instead of sorting and scanning the whole pool: a refusal here is the scan's refusal.

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


class _OnHealthyHosts:
    """A victim test that also asks that every host of the victim be healthy."""

    __slots__ = ("eligible", "healthy")

    def __init__(self, healthy: list[bool], eligible: Callable[[Workload], bool]) -> None:
        self.healthy, self.eligible = healthy, eligible

    def __call__(self, v: Workload) -> bool:
        healthy = self.healthy
        return all(healthy[i] for i in v.hosts) and self.eligible(v)


def _reachable(
    tiers: tuple[list[Workload], ...], ready: list[bool], may_take: Callable[[Workload], bool], t: int
) -> Iterator[Workload]:
    """Yield the victims ``may_take`` admits, cheapest first, sorting a tier only once the cheaper ones ran out.

    A sorted tier stays sorted for the rest of the instant, until the pool changes.
    """
    for k, tier in enumerate(tiers):
        if not ready[k]:
            # key: Workload.lost_if_preempted(t), inlined (it is evaluated for every possible victim)
            keyed = [(v.held * max(0, t - (v.last_ckpt_us if v.resumable else v.start_us)), v.wid, v) for v in tier]
            keyed.sort()
            tier[:] = [v for *_, v in keyed]
            ready[k] = True
        for v in tier:
            if may_take(v):
                yield v


def _victim_reason(core: CoreState, waiter: Workload, t: int) -> Callable[[Workload], str]:
    if core.knobs.policy == "priority":
        return lambda v: (
            f"preemptible work of priority {v.priority}: {waiter.wid} of priority {waiter.priority} needs the room"
        )
    order = core.order
    assert isinstance(order, FairShareOrder)
    grace = core.knobs.grace_s * _US

    def why(v: Workload) -> str:
        if not v.allocated or v.node is None or waiter.node is None:
            return (
                f"unallocated work is preemptible by any allocated request: "
                f"{waiter.wid} ({waiter.node}) needs the room"
            )
        lost = f"it discards {v.lost_if_preempted(t) // _US} GPU-seconds since its last checkpoint"
        if grace:  # it runs on until it exits: what it holds then, unless it checkpoints meanwhile
            later = v.lost_if_preempted(t + grace) // _US
            lost = f"{lost}, {later} by its exit after the grace period unless it checkpoints first"
        mine, theirs = core.tree.branches(waiter.node, v.node)
        if mine is None or theirs is None:
            return (
                f"past its protected window, and {waiter.node}'s own work is served before the budgets under it "
                f"such as {v.node}: {waiter.wid} needs the room; {lost}"
            )
        # the ratios actually compared: the two sibling branches where the paths part
        where = "" if (mine, theirs) == (waiter.node, v.node) else f" (where {v.node} and {waiter.node} part)"
        if core.knobs.preemption_strategy == "final-share":
            protect = progress.protection_s(core, waiter)
            after = final_share(core, mine, theirs, waiter.size * protect, t)
            if after is not None:
                return (
                    f"past its protected window, and after the swap {mine} ({_used(after[0])}, charged "
                    f"{waiter.wid}'s {protect} s protected on {waiter.size} GPUs) would still rank at or "
                    f"ahead of {theirs} ({percent(after[1])}: what it used so far, nothing of the run it gives up)"
                    f"{where}, so the swap would not swap back: {waiter.wid} needs the room; {lost}"
                )
        return (
            f"past its protected window and {theirs} ({_used(order.ratio(theirs, t))}) "
            f"ranks after {mine} ({percent(order.ratio(mine, t))}) in the fair-share order{where}: "
            f"{waiter.wid} needs the room; {lost}"
        )

    return why


def _used(ratio: float) -> str:
    """Say how much of its allocation a branch has used, e.g. '34% of its allocation used' (or 'no allocation')."""
    return f"{percent(ratio)} of its allocation used" if math.isfinite(ratio) else "no allocation"
