"""Hierarchical fair-share order: siblings ranked by usage ÷ allocation in the window, depth first.

* ratio(node) = allocated GPU time charged to the node in the window ÷ the GPU time its
  allocation was worth in the window: the integral over the window of its fraction of the
  cluster (normalised shares multiplied down the tree) × cluster capacity, so a change of
  shares moves a ratio as the window slides over it, as usage does. The part of the window
  before a node first had an allocation counts at that first allocation (a replay that starts
  at the beginning of a log has no history, and every team is taken to have been entitled and
  idle). Lowest first: the most under-served. Ties: by path. A node whose share is 0 has an
  infinite ratio (it only gets what nobody else wants).
* Global order: depth-first walk over siblings in ratio order (as Slurm's Fair Tree). Work
  charged directly to an internal node (not to a leaf) is served first within that node.
* Inside one node: the workload's priority (higher first), then submit time, then id.
  Priority never crosses team lines: it is only compared inside one node's queue.
* Three tiers, one after the other: allocated requests, then unallocated requests (minimum
  runtime 0) in the same tree order, then requests whose budget path was never defined (by
  submit time).

Costs. Each node keeps, per tier, a count of waiting workloads by size for its whole subtree
(O(depth) to maintain per add/remove). ``next_start`` descends from the roots: at each level it
ranks the children that have waiting work (O(b log b) for b siblings, each ratio O(log k)) and
enters the best-ranked child holding a size that fits; it never backtracks, because the counts
say in advance whether a subtree holds something that fits. One pick is
O(depth × b log b + distinct sizes) — independent of queue length. A full ordering of every
node (``ranking``) is O(nodes log b).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ledger.core.contract import Workload
from ledger.core.occupancy import Meter, Occupancy
from ledger.core.queues import Key, SizedQueue
from ledger.core.tree import BudgetTree

__all__ = ["ALLOCATED", "ORPHAN", "UNALLOCATED", "FairShareOrder", "Pick", "Walker", "percent"]

ALLOCATED, UNALLOCATED, ORPHAN = 0, 1, 2
_MICRO = 1_000_000  # entitlement rates in micro-GPUs: fractions of a GPU kept as integers


def percent(ratio: float) -> str:
    """Return a usage ratio in words, e.g. '34%' (or 'no allocation')."""
    return "no allocation" if not math.isfinite(ratio) else f"{ratio:.0%}"


@dataclass(slots=True)
class Pick:
    """A workload chosen to start, with its 1-based place in the order and its budget's ratio."""

    key: Key
    position: int
    tier: int


class FairShareOrder:
    """Waiting workloads per budget node and tier, ranked by the fair-share walk."""

    def __init__(self, tree: BudgetTree, occupancy: Occupancy) -> None:
        self.tree = tree
        self.occ = occupancy
        self.capacity = 0
        self.horizon = occupancy.horizon_us()
        # node -> its entitlement: a meter whose rate is fraction × capacity in micro-GPUs
        # (integers, as usage is), changed only when shares or capacity change. O(nodes) per change.
        self.entitled: dict[str, Meter] = {}
        self._seeded: dict[str, int] = {}  # node -> when its entitlement was taken to have held all along
        self._live: set[str] = set()  # nodes whose entitlement has been positive
        self._steady: dict[str, float] = {}  # node -> fraction × capacity while it has not changed since seeding
        self._cache: dict[str, tuple[float, str, float]] = {}  # path -> (rounded ratio, path, ratio)
        self._cache_t = self._cache_v = -1
        self.queues: dict[tuple[str, int], SizedQueue] = {}  # (node path, tier) -> own waiting work
        self.sizes: list[dict[str, dict[int, int]]] = [{}, {}]  # tier -> node -> {size: count in subtree}
        self.totals: list[dict[str, int]] = [{}, {}]  # tier -> node -> count in subtree
        self.orphans = SizedQueue()

    # ---- ratios ---------------------------------------------------------------------------
    def retarget(self, t: int) -> None:
        """Set every node's entitlement rate from the shares and capacity in force from ``t``. O(nodes)."""
        occ = self.occ
        for path, node in self.tree.nodes.items():
            rate = round(node.fraction * self.capacity * _MICRO)
            m = self.entitled.get(path)
            if m is None or path not in self._live or self._seeded[path] == t:
                # a first allocation (or one still being set up in the same instant, as a tree is
                # defined node by node) is taken to have held over the whole window before now
                m = self.entitled[path] = Meter()
                if occ.half_life_us is None:
                    m.change(t - occ.window_us, rate, occ.window_us, None)
                else:
                    m.rate, m.last_t, m.decayed = rate, t, rate * self.horizon
                self._seeded[path] = t
                self._steady[path] = node.fraction * self.capacity
                if rate > 0:
                    self._live.add(path)
            elif rate != m.rate:
                m.change(t, rate - m.rate, occ.window_us, occ.half_life_us)
                self._steady.pop(path, None)
            self._cache.pop(path, None)

    def allocation_us(self, path: str, t: int) -> float:
        """Return the GPU-microseconds a node's allocation was worth over the window (or half-life) at ``t``.

        O(1) when its rate held over the whole window (the usual case), else O(log k).
        """
        steady = self._steady.get(path)
        if steady is not None:
            return steady * self.horizon  # unchanged since it began: no integral needed (nor its rounding)
        m = self.entitled.get(path)
        if m is None:
            return 0.0
        occ = self.occ
        if occ.half_life_us is not None:
            return m.decayed_at(t, occ.half_life_us) / _MICRO
        if m.last_t <= t - occ.window_us:
            return m.rate * occ.window_us / _MICRO
        return (m.total(t) - m.at(t - occ.window_us)) / _MICRO

    def ratio(self, path: str, t: int) -> float:
        """Return usage ÷ allocation of a node at ``t`` (inf when it has no allocation). O(log k), cached."""
        cache = self._fresh(t)
        entry = cache.get(path)
        if entry is None:
            entry = self._entry(path, t, cache)
        return entry[2]

    def _fresh(self, t: int) -> dict[str, tuple[float, str, float]]:
        """Return the per-instant cache of (rounded ratio, path, ratio), dropping what went stale.

        The cache holds for one instant; a change of meters drops only the nodes it touched.
        """
        if t != self._cache_t:
            self._cache.clear()
            self._cache_t = t
        if self.occ.version != self._cache_v:
            # within one instant only the nodes whose meters changed need a new ratio
            for p in self.occ.touched:
                self._cache.pop(p, None)
            self.occ.touched.clear()
            self._cache_v = self.occ.version
        return self._cache

    def _entry(self, path: str, t: int, cache: dict[str, tuple[float, str, float]]) -> tuple[float, str, float]:
        alloc = self.allocation_us(path, t)
        if alloc <= 0:
            r = math.inf
        elif self.occ.half_life_us is None:
            # Occupancy.charged in window mode, inlined (the hottest call of a pass): O(log k)
            occ = self.occ
            u = occ.nodes[path]
            m = u.allocated
            used = m.cum + m.rate * (t - m.last_t) - m.at(t - occ.window_us)
            if occ.upfront and u.prepaid_g:
                used += u.prepaid_gp - t * u.prepaid_g
            r = float(used / alloc)
        else:
            r = float(self.occ.charged(path, t) / alloc)
        # the sort key of ``ranked`` is kept with the ratio: rounding is paid once per node and instant
        entry = cache[path] = (round(r, 9), path, r)
        return entry

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_cache"], state["_cache_t"], state["_cache_v"] = {}, -1, -1  # derived: never part of a snapshot
        return state

    def ranked(self, names: list[str], t: int) -> list[str]:
        """Return sibling paths lowest ratio first, ties by path. O(b log b), ratios cached per instant.

        Ratios are compared to 9 decimals: equal usage of equal allocations must tie (and fall
        back to the path) even when normalising the shares left different float roundings.
        """
        if len(names) == 1:
            return list(names)
        cache = self._fresh(t)
        get = cache.get
        entries = []
        for p in names:
            e = get(p)
            entries.append(e if e is not None else self._entry(p, t, cache))
        entries.sort()
        return [e[1] for e in entries]

    def ranking(self, t: int) -> list[str]:
        """Return every budget node in fair-share order (depth first). O(nodes log b)."""
        out: list[str] = []

        def walk(names: list[str]) -> None:
            for p in self.ranked(names, t):
                out.append(p)
                walk(self.tree.nodes[p].children)

        walk(self.tree.roots)
        return out

    # ---- queue bookkeeping ------------------------------------------------------------------
    @staticmethod
    def tier_of(w: Workload) -> int:
        """Return the tier a waiting workload queues in."""
        if w.node is None:
            return ORPHAN
        return ALLOCATED if w.min_runtime_s > 0 else UNALLOCATED

    def add(self, w: Workload) -> None:
        """Queue a waiting workload. O(depth + log n)."""
        tier = self.tier_of(w)
        if tier == ORPHAN:
            self.orphans.add(w.key, w.size)
            return
        assert w.node is not None
        q = self.queues.get((w.node, tier))
        if q is None:
            q = self.queues[(w.node, tier)] = SizedQueue()
        q.add(w.key, w.size)
        sizes, totals = self.sizes[tier], self.totals[tier]
        for p in self.tree.ancestors(w.node):
            d = sizes.setdefault(p, {})
            d[w.size] = d.get(w.size, 0) + 1
            totals[p] = totals.get(p, 0) + 1

    def remove(self, w: Workload) -> None:
        """Take a workload out of the queue. O(depth + log n)."""
        tier = self.tier_of(w)
        if tier == ORPHAN:
            self.orphans.remove(w.key, w.size)
            return
        assert w.node is not None
        self.queues[(w.node, tier)].remove(w.key, w.size)
        sizes, totals = self.sizes[tier], self.totals[tier]
        for p in self.tree.ancestors(w.node):
            d = sizes[p]
            if d[w.size] == 1:
                del d[w.size]
            else:
                d[w.size] -= 1
            totals[p] -= 1

    def waiting(self) -> int:
        """Return how many workloads wait in all tiers."""
        return sum(self.totals[0].get(r, 0) + self.totals[1].get(r, 0) for r in self.tree.roots) + len(self.orphans)

    # ---- picking ------------------------------------------------------------------------------
    def next_start(self, t: int, fits: Callable[[int], bool], allocated_only: bool = False) -> Pick | None:
        """Return the first waiting workload in the order that fits the free room, or None."""
        ahead = 0
        for tier in (ALLOCATED,) if allocated_only else (ALLOCATED, UNALLOCATED):
            pick = self._descend(tier, t, fits, ahead)
            if pick is not None:
                return pick
            ahead += sum(self.totals[tier].get(r, 0) for r in self.tree.roots)
        if allocated_only:
            return None
        key = self.orphans.best(fits)
        if key is None:
            return None
        return Pick(key, ahead + self.orphans.position(key) + 1, ORPHAN)

    def _descend(self, tier: int, t: int, fits: Callable[[int], bool], ahead: int) -> Pick | None:
        # Only levels where something fits are ranked (none, when nothing fits: then no ratio is
        # computed at all). The place in the queue is counted on the way down: the waiting work of
        # siblings ranked before the branch taken, and of each passed node's own queue (which is
        # served before its children), so a pick costs one ranking per level. O(depth × b log b).
        sizes, totals, queues = self.sizes[tier], self.totals[tier], self.queues
        names = self.tree.roots
        node: str | None = None
        before = 0
        while True:
            if node is not None:
                own = queues.get((node, tier))
                if own is not None and own.keys:
                    key = own.best(fits)
                    if key is not None:
                        return Pick(key, ahead + before + own.position(key) + 1, tier)
                    before += len(own.keys)
            waiting = [n for n in names if totals.get(n)]
            # fits is monotone in the size (a smaller request fits wherever a larger one does), so a
            # subtree holds something that fits iff its smallest waiting size fits: O(distinct sizes) in C
            fitting = {n for n in waiting if fits(min(sizes[n]))}  # membership only
            if not fitting:
                return None
            if len(waiting) == 1:
                node = waiting[0]
            else:
                for node in self.ranked(waiting, t):
                    if node in fitting:
                        break
                    before += totals[node]
            assert node is not None
            names = self.tree.nodes[node].children

    def position_of(self, w: Workload, t: int) -> int:
        """Return a waiting workload's 1-based place in the whole order. O(depth × b log b)."""
        tier = self.tier_of(w)
        ahead = sum(self.totals[x].get(r, 0) for x in range(min(tier, 2)) for r in self.tree.roots)
        if tier == ORPHAN:
            return ahead + self.orphans.position(w.key) + 1
        assert w.node is not None
        return ahead + self._position(w.node, tier, w.key, t)

    def _position(self, node: str, tier: int, key: Key, t: int) -> int:
        """Return the 1-based place of ``key`` (queued at ``node``) within its tier. O(depth × b log b)."""
        totals = self.totals[tier]
        chain = self.tree.ancestors(node)[::-1]
        names = self.tree.roots
        ahead = 0
        for depth, p in enumerate(chain):
            if depth > 0:
                own = self.queues.get((chain[depth - 1], tier))
                ahead += len(own.keys) if own is not None else 0
            for q in self.ranked([n for n in names if totals.get(n)], t):
                if q == p:
                    break
                ahead += totals[q]
            names = self.tree.nodes[p].children
        return ahead + self.queues[(node, tier)].position(key) + 1

    def walk_allocated(
        self, t: int, wanted: Callable[[dict[int, int]], bool] = lambda sizes: True
    ) -> Iterator[tuple[str, SizedQueue, int, Walker]]:
        """Yield (node, its allocated queue, waiting ahead, walker) in fair-share order, for preemption.

        The walker tells which running work ranks after the yielded node: only that may be
        preempted for the yielded node's waiters. Subtrees without allocated waiters are
        passed over whole (O(1) each), and so are subtrees whose waiting sizes ``wanted`` rejects
        (checked as the walk goes), so a walk is O(visited nodes × b log b).
        """
        walker = Walker(self.tree, self.occ)
        totals, sizes = self.totals[ALLOCATED], self.sizes[ALLOCATED]
        ahead = 0

        def visit(names: list[str]) -> Iterator[tuple[str, SizedQueue, int, Walker]]:
            nonlocal ahead
            for p in self.ranked(names, t):
                if not totals.get(p) or not wanted(sizes[p]):
                    walker.pass_subtree(p)
                    ahead += totals.get(p, 0)
                    continue
                own = self.queues.get((p, ALLOCATED))
                walker.passed_own[p] = None
                if own is not None and own.keys:
                    yield p, own, ahead, walker
                    ahead += len(own.keys)
                yield from visit(self.tree.nodes[p].children)
                walker.close(p)

        yield from visit(self.tree.roots)


class Walker:
    """What a preemption walk has passed: work ranked at or above the current waiter's node."""

    __slots__ = ("occ", "passed_exposed", "passed_own", "passed_sub", "tree")

    def __init__(self, tree: BudgetTree, occ: Occupancy) -> None:
        self.tree = tree
        self.occ = occ
        self.passed_sub: dict[str, None] = {}
        self.passed_own: dict[str, None] = {}
        self.passed_exposed = 0  # past-protection GPUs in passed subtrees: no longer preemptible

    def pass_subtree(self, path: str) -> None:
        """Mark a whole subtree as ranked before what comes next."""
        self.passed_sub[path] = None
        self.passed_exposed += self.occ.nodes[path].exposed

    def close(self, path: str) -> None:
        """Mark a node as passed after its children were (adds only its own exposed GPUs)."""
        self.passed_sub[path] = None
        nodes = self.occ.nodes
        self.passed_exposed += nodes[path].exposed - sum(nodes[c].exposed for c in self.tree.nodes[path].children)

    def ranks_after(self, node: str) -> bool:
        """Return whether work charged to ``node`` ranks after the current waiter. O(depth)."""
        if node in self.passed_own:
            return False
        p: str | None = node
        nodes = self.tree.nodes
        while p is not None:
            if p in self.passed_sub:
                return False
            p = nodes[p].parent
        return True
