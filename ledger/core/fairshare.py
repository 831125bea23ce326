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

Caches (none in a snapshot): a node's charge is kept as an exact integer line ``a + b·t``
until the window start reaches its meter's next breakpoint or its meters change, so its ratio
at a new instant is O(1); a parent's ranking of its children is kept until two neighbours could
come within the 9-decimal tie zone (their lines are known) or a child's meters change, so a
level already ranked costs O(1) — the "b log b" above is paid only when a ranking is renewed.
A node's allocation is kept once the window no longer spans a change of its share; while it
does, the allocation moves with time, so rankings holding that node are renewed at every instant.
Callers drop every cache (``invalidate``) and then ``retarget`` when shares or capacity change.
A node's ratio, kept allocation and charge line live in one native object (``_Standing``), so
renewing a ranking costs one lookup per child rather than one per cache.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from ledger.core.contract import Workload
from ledger.core.occupancy import Meter, Occupancy
from ledger.core.pickling import field_state, set_fields
from ledger.core.placement import Fits
from ledger.core.queues import Key, SizedQueue, least
from ledger.core.tree import BudgetTree

__all__ = ["ALLOCATED", "ORPHAN", "UNALLOCATED", "FairShareOrder", "Pick", "percent", "round9"]

ALLOCATED, UNALLOCATED, ORPHAN = 0, 1, 2
# debug runs (``Knobs.debug_hosts``): queued in this index too, beside the allocated tier, so the
# first debug run that fits the debug partition is one descent (``next_debug``)
DEBUG = 3
_FOREVER = 1 << 62  # µs: a line that holds until the node's meters change
# ratios closer than this may round to the same 9 decimals (then the path decides): a ranking
# whose neighbours come this close is recomputed rather than trusted
_TIE_GAP = 1e-8
_MICRO = 1_000_000  # entitlement rates in micro-GPUs: fractions of a GPU kept as integers
# a snapshot's fields, in the order ``__init__`` sets them (the order of the bytes)
_STATE = (
    "tree", "occ", "capacity", "horizon", "entitled", "_seeded", "_live", "_steady", "_standing_cache", "_order_cache",
    "_cache_v", "queues", "sizes", "totals", "orphans", "debug_s", "debug_size",
)


def round9(r: float) -> float:
    """Return ``round(r, 9)``, the ratio as siblings are compared, without formatting it as decimal text.

    ``round`` writes the correctly rounded decimal digits and reads them back (about 0.3 µs, paid
    for every ratio at every instant, in both builds). When ``r × 10⁹`` is below 10¹² its floating
    product is within 2⁻¹⁴ of the exact one, so unless its fraction lies within 10⁻³ of a half the
    nearest integer ``k`` is the one ``round`` finds, and ``k / 10⁹`` (one correctly rounded
    division) is the double nearest to ``k × 10⁻⁹``, which is what ``round`` reads back. Zero keeps
    its sign; every other value goes to ``round``.
    """
    if r == 0.0:
        return r
    y = r * 1e9
    if 0.0 < y < 1e12:
        k = math.floor(y)
        f = y - k
        if abs(f - 0.5) > 1e-3:
            return (k + 1 if f > 0.5 else k) / 1e9
    return round(r, 9)


def percent(ratio: float) -> str:
    """Return a usage ratio in words, e.g. '34%' (or 'no allocation')."""
    return "no allocation" if not math.isfinite(ratio) else f"{ratio:.0%}"


class _Standing:
    """One node's ratio bookkeeping, derived (never in a snapshot).

    A native object rather than one dict per cache: a ranking reads and renews a node's ratio,
    allocation and charge line through attributes of one object found by one lookup.
    """

    __slots__ = ("alloc", "alloc_kept", "at", "key", "line_a", "line_b", "line_until", "path", "seg", "seg_t")

    def __init__(self, path: str) -> None:
        self.path = path
        self.at = -1  # the instant ``key`` was taken at (-1: none since its meters last changed)
        self.key: tuple[float, str, float] = (0.0, path, 0.0)  # (ratio to 9 decimals, path, ratio)
        self.alloc_kept = False  # ``alloc`` (allocation_us) holds until shares or capacity change
        self.alloc = 0.0
        self.line_a = 0  # the charge is line_a + line_b·t before line_until (µs; -1: no line kept)
        self.line_b = 0
        self.line_until = -1
        # the breakpoint (index, time) the window start was past at the last line: where the next
        # line's search starts (-1: none)
        self.seg = -1
        self.seg_t = 0


@dataclass(slots=True)
class Pick:
    """A workload chosen to start, with its 1-based place in the order and its budget's ratio."""

    key: Key
    position: int
    tier: int


class FairShareOrder:
    """Waiting workloads per budget node and tier, ranked by the fair-share walk."""

    def __init__(self, tree: BudgetTree | None = None, occupancy: Occupancy | None = None) -> None:
        # (no arguments: an empty order, as unpickling makes one before setting its state)
        self.tree = tree if tree is not None else BudgetTree()
        self.occ = occupancy = occupancy if occupancy is not None else Occupancy()
        self.capacity = 0
        self.horizon = occupancy.horizon_us()
        # node -> its entitlement: a meter whose rate is fraction × capacity in micro-GPUs
        # (integers, as usage is), changed only when shares or capacity change. O(nodes) per change.
        self.entitled: dict[str, Meter] = {}
        self._seeded: dict[str, int] = {}  # node -> when its entitlement was taken to have held all along
        self._live: set[str] = set()  # nodes whose entitlement has been positive
        self._steady: dict[str, float] = {}  # node -> fraction × capacity while it has not changed since seeding
        # path -> its ratio at one instant, allocation and charge line (``_Standing``): derived
        self._standing_cache: dict[str, _Standing] = {}
        # parent path ("" for the roots) -> (its children ranked, valid before µs, children whose meters
        # changed since: moved to their new places when the ranking is next read)
        self._order_cache: dict[str, tuple[list[str], int, list[str]]] = {}
        self._cache_v = -1  # the meters' version whose changes the standings have taken in
        self.queues: dict[tuple[str, int], SizedQueue] = {}  # (node path, tier) -> own waiting work
        # tier (and DEBUG) -> node -> {size: count in subtree}; the third is unused (orphans queue apart)
        self.sizes: list[dict[str, dict[int, int]]] = [{}, {}, {}, {}]
        self.totals: list[dict[str, int]] = [{}, {}, {}, {}]  # tier (and DEBUG) -> node -> count in subtree
        self.orphans = SizedQueue()
        # a debug run, indexed under DEBUG too (0: not under fair share): protected at most ``debug_s``
        # seconds on at most ``debug_size`` GPUs
        self.debug_s = 0
        self.debug_size = 0

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

    def allocation_us(self, path: str, t: int) -> float:
        """Return the GPU-microseconds a node's allocation was worth over the window (or half-life) at ``t``.

        O(1) when its rate held over the whole window (the usual case; then kept until shares or
        capacity change), else O(log k) while the window still slides over a change.
        """
        steady = self._steady.get(path)
        m = self.entitled.get(path)
        occ = self.occ
        if steady is not None or m is None:
            # unchanged since it began: no integral needed (nor its rounding)
            value = 0.0 if steady is None else steady * self.horizon
            self._keep_alloc(path, value)
            return value
        if occ.half_life_us is not None:
            return m.decayed_at(t, occ.half_life_us) / _MICRO
        if m.last_t <= t - occ.window_us:
            value = m.rate * occ.window_us / _MICRO
            self._keep_alloc(path, value)
            return value
        return (m.total(t) - m.at(t - occ.window_us)) / _MICRO

    def _keep_alloc(self, path: str, value: float) -> None:
        st = self._node(path)
        st.alloc, st.alloc_kept = value, True

    def _node(self, path: str) -> _Standing:
        """Return a node's standing (its ratio bookkeeping), made on first use."""
        st = self._standing_cache.get(path)
        if st is None:
            st = self._standing_cache[path] = _Standing(path)
        return st

    def ratio(self, path: str, t: int) -> float:
        """Return usage ÷ allocation of a node at ``t`` (inf when it has no allocation). O(log k), cached."""
        self._fresh(t)
        st = self._node(path)
        return self._entry(st, t)[2]

    def key(self, path: str, t: int) -> tuple[float, str, float]:
        """Return a node's sort key among its siblings: (ratio to 9 decimals, path, ratio). O(log k), cached."""
        self._fresh(t)
        st = self._node(path)
        return self._entry(st, t)

    def _fresh(self, t: int) -> None:
        """Drop the ratios and charge lines of the nodes whose meters changed since the last look.

        A node's sort key holds for the instant it was taken at (``_Standing.at``); a change of
        meters drops only the nodes it touched.
        """
        if self.occ.version != self._cache_v:
            # within one instant only the nodes whose meters changed need a new ratio, and only
            # their parents' rankings can change
            standing, order, nodes = self._standing_cache, self._order_cache, self.tree.nodes
            for p in self.occ.touched:
                st = standing.get(p)
                if st is not None:
                    st.at = st.line_until = -1
                node = nodes.get(p)
                if node is not None:
                    got = order.get(node.parent or "")
                    if got is not None and len(got[0]) > 1 and p not in got[2]:
                        got[2].append(p)  # only this child's place in its parent's ranking can have changed
            self.occ.touched.clear()
            self._cache_v = self.occ.version

    def invalidate(self) -> None:
        """Forget every cached ratio and ranking (shares or capacity changed)."""
        self._standing_cache.clear()
        self._order_cache.clear()

    def ranked_children(self, parent: str | None, t: int) -> list[str]:
        """Return a node's children (the roots for None) lowest ratio first. Do not modify the list.

        A ranking is kept until the earliest moment two neighbours in it could swap: in window
        mode each child's charge is a line in t (``_linear``), so the gap between neighbours is
        linear too and the ranking provably holds while every gap stays above ``_TIE_GAP`` (where
        9-decimal rounding could make them tie) and every line holds. O(b log b) to rank, O(1)
        while it holds: walks at later instants reuse it. When children's meters change while it
        holds (``_fresh`` notes them), only those children move: O(log b) comparisons each
        (``_moved``) instead of ranking the level again.
        """
        self._fresh(t)
        key = parent or ""
        got = self._order_cache.get(key)
        if got is not None and t < got[1]:
            if not got[2]:
                return got[0]
            ranked, until = self._moved(got[0], got[2], got[1], t)
        else:
            ranked = self.ranked(self.tree.children_of(parent), t)
            until = self._holds_until(ranked, t)
        self._order_cache[key] = (ranked, until, [])
        return ranked

    def _moved(self, kept: list[str], moved: list[str], until: int, t: int) -> tuple[list[str], int]:
        """Return the ranking ``kept`` with the ``moved`` children where they now rank, and until when it holds.

        The other children's meters did not change, so their order still holds at ``t`` and
        ``until`` still bounds it (two neighbours a removal brings together part no sooner than
        their two former pairs). Each moved child is placed by binary search on the sort keys at
        ``t``, and bounds the result by its line and by its two new neighbours. A new list: a walk
        may still be reading the old one.
        """
        self._fresh(t)
        names = [p for p in kept if p not in moved]
        for x in moved:
            st = self._node(x)
            mine = self._entry(st, t)
            lo, hi = 0, len(names)
            while lo < hi:
                mid = (lo + hi) // 2
                other = self._node(names[mid])
                if self._entry(other, t) < mine:
                    lo = mid + 1
                else:
                    hi = mid
            names.insert(lo, x)
            if self.occ.half_life_us is not None:
                until = t + 1  # decayed scores are not lines: rank again at the next instant
                continue
            here = self._motion(x, t)
            if here is None:
                until = t + 1
                continue
            until = min(until, here[2])
            if lo > 0:
                before = self._motion(names[lo - 1], t)
                until = t + 1 if before is None else min(until, _gap_until(before, here, t))
            if lo + 1 < len(names):
                after = self._motion(names[lo + 1], t)
                until = t + 1 if after is None else min(until, _gap_until(here, after, t))
        return names, max(until, t + 1)

    def _holds_until(self, ranked: list[str], t: int) -> int:
        """Return until when (µs, exclusive) the order ``ranked`` cannot change without a meter change."""
        if len(ranked) < 2:
            return _FOREVER
        if self.occ.half_life_us is not None:
            return t + 1  # decayed scores are not lines: rank again at the next instant
        until = _FOREVER
        prev: tuple[float, float, int] | None = None
        for p in ranked:
            here = self._motion(p, t)
            if here is None:
                return t + 1
            until = min(until, here[2])
            if prev is not None:
                until = min(until, _gap_until(prev, here, t))
                if until <= t:
                    return t + 1
            prev = here
        return max(until, t + 1)

    def _motion(self, p: str, t: int) -> tuple[float, float, int] | None:
        """Return a node's (ratio at ``t``, its change per µs, until when its line holds); call after ``_fresh(t)``.

        None while its allocation still moves as the window slides over a change of shares.
        """
        st = self._node(p)
        r = self._entry(st, t)[2]
        if not st.alloc_kept:
            return None
        a = st.alloc
        if st.line_until < 0 or a <= 0:
            return r, 0.0, _FOREVER  # no allocation: the ratio is inf for ever
        return r, st.line_b / a, st.line_until

    def _entry(self, st: _Standing, t: int) -> tuple[float, str, float]:
        """Return a node's sort key at ``t``, worked out once per instant; call after ``_fresh(t)``."""
        if st.at == t:
            return st.key
        path = st.path
        alloc = st.alloc if st.alloc_kept else self.allocation_us(path, t)
        occ = self.occ
        if alloc <= 0:
            r = math.inf
        elif occ.half_life_us is None:
            # O(1) while the charge is still on the line kept for this node (see _linear)
            used = st.line_a + st.line_b * t if t < st.line_until else self._linear(st, t)
            r = float(used / alloc)
        else:
            r = float(occ.charged(path, t) / alloc)
        # the sort key of ``ranked`` is kept with the ratio: rounding is paid once per node and instant
        entry = st.key = (round9(r), path, r)
        st.at = t
        return entry

    def _linear(self, st: _Standing, t: int) -> int:
        """Return a node's charged GPU-µs at ``t`` (window mode) and keep it as a line ``a + b·t``. O(log k).

        ``Occupancy.charged`` with ``Meter.at`` inlined, rewritten as exact integers
        ``a + b·t``: the meter's total grows at its rate, the window start moves along the
        breakpoint segment it is in, and the prepaid part shrinks at ``prepaid_g``. The line holds
        until the window start reaches the next breakpoint or the node's meters change (then
        ``_fresh`` drops it), so later instants read the charge in O(1). The window start's
        breakpoint is looked for from where the last line found it (it only moves on, a step or
        two between lines; a prune that moved the list is seen in that breakpoint's time).
        """
        occ = self.occ
        u = occ.nodes[st.path]
        m = u.allocated
        w = occ.window_us
        x = t - w
        ts = m.ts
        if not ts:
            a, b, until = 0, 0, _FOREVER
        elif x <= ts[0]:
            a, b, until = -m.cs[0], 0, ts[0] + w + 1  # C(window start) = C(first breakpoint) up to it
        else:
            i, n = st.seg, len(ts)
            if 0 <= i < n and ts[i] == st.seg_t and ts[i] <= x:
                if i + 8 < n and ts[i + 8] <= x:
                    i = bisect_right(ts, x, i + 8) - 1  # far behind: search the rest
                else:
                    while i + 1 < n and ts[i + 1] <= x:
                        i += 1
            else:
                i = bisect_right(ts, x) - 1
            st.seg, st.seg_t = i, ts[i]
            a, b = -(m.cs[i] - m.rs[i] * (w + ts[i])), -m.rs[i]
            until = ts[i + 1] + w if i + 1 < len(ts) else _FOREVER
        a += m.cum - m.rate * m.last_t
        b += m.rate
        if occ.upfront and u.prepaid_g:
            a += u.prepaid_gp
            b -= u.prepaid_g
        st.line_a, st.line_b, st.line_until = a, b, until
        return a + b * t

    def __getstate__(self) -> dict[str, object]:
        state = field_state(self, _STATE)
        # derived: never part of a snapshot
        state["_standing_cache"], state["_order_cache"], state["_cache_v"] = {}, {}, -1
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        set_fields(self, state)  # the caches come empty (``__getstate__``)

    def ranked(self, names: list[str], t: int) -> list[str]:
        """Return sibling paths lowest ratio first, ties by path. O(b log b), ratios cached per instant.

        Ratios are compared to 9 decimals: equal usage of equal allocations must tie (and fall
        back to the path) even when normalising the shares left different float roundings.
        """
        if len(names) == 1:
            return list(names)
        self._fresh(t)
        entries = []
        for p in names:
            st = self._node(p)
            entries.append(self._entry(st, t))
        entries.sort()
        return [e[1] for e in entries]

    def ranking(self, t: int) -> list[str]:
        """Return every budget node in fair-share order (depth first). O(nodes log b)."""
        out: list[str] = []

        def walk(parent: str | None) -> None:
            for p in self.ranked_children(parent, t):
                out.append(p)
                walk(p)

        walk(None)
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
        self._count(w, tier, 1)
        if tier == ALLOCATED and self.is_debug(w):
            q = self.queues.get((w.node, DEBUG))
            if q is None:
                q = self.queues[(w.node, DEBUG)] = SizedQueue()
            q.add(w.key, w.size)
            self._count(w, DEBUG, 1)

    def is_debug(self, w: Workload) -> bool:
        """Return whether ``w`` is a debug run the debug partition takes (always False with no partition)."""
        return 0 < w.min_runtime_s <= self.debug_s and w.size <= self.debug_size

    def _count(self, w: Workload, tier: int, n: int) -> None:
        """Count ``w`` in (n = 1) or out of (n = -1) its subtree's waiting work of ``tier``. O(depth)."""
        assert w.node is not None
        sizes, totals = self.sizes[tier], self.totals[tier]
        for p in self.tree.ancestors(w.node):
            d = sizes.setdefault(p, {})
            left = d.get(w.size, 0) + n
            if left:
                d[w.size] = left
            else:
                del d[w.size]
            totals[p] = totals.get(p, 0) + n

    def remove(self, w: Workload) -> None:
        """Take a workload out of the queue. O(depth + log n)."""
        tier = self.tier_of(w)
        if tier == ORPHAN:
            self.orphans.remove(w.key, w.size)
            return
        assert w.node is not None
        self.queues[(w.node, tier)].remove(w.key, w.size)
        self._count(w, tier, -1)

        if tier == ALLOCATED and self.is_debug(w):
            self.queues[(w.node, DEBUG)].remove(w.key, w.size)
            self._count(w, DEBUG, -1)

    def waiting(self) -> int:
        """Return how many workloads wait in all tiers."""
        return sum(self.totals[0].get(r, 0) + self.totals[1].get(r, 0) for r in self.tree.roots) + len(self.orphans)

    # ---- picking ------------------------------------------------------------------------------
    def next_start(
        self, t: int, fits: Fits, allocated_only: bool = False, fill_fits: Fits | None = None,
    ) -> Pick | None:
        """Return the first waiting workload in the order that fits the free room, or None.

        ``fill_fits``, when given, is what fits for the tiers of unallocated work (free fill and
        orphans) instead of ``fits``.
        """
        ahead = 0
        for tier in (ALLOCATED,) if allocated_only else (ALLOCATED, UNALLOCATED):
            pick = self._descend(tier, t, fits if tier == ALLOCATED or fill_fits is None else fill_fits, ahead)
            if pick is not None:
                return pick
            ahead += sum(self.totals[tier].get(r, 0) for r in self.tree.roots)
        if allocated_only:
            return None
        key = self.orphans.best(fits if fill_fits is None else fill_fits)
        if key is None:
            return None
        return Pick(key, ahead + self.orphans.position(key) + 1, ORPHAN)

    def next_debug(self, t: int, fits: Fits) -> Pick | None:
        """Return the first waiting debug run in the order that fits (``fits``: the debug partition's room), or None.

        Its position is the one it holds among every allocated waiter (``position_of``).
        """
        pick = self._descend(DEBUG, t, fits, 0)
        if pick is None:
            return None
        return Pick(pick.key, 0, ALLOCATED)

    def _descend(self, tier: int, t: int, fits: Fits, ahead: int) -> Pick | None:
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
            # fits is monotone in the size (a smaller request fits wherever a larger one does), so a
            # subtree holds something that fits iff its smallest waiting size fits: O(distinct sizes) in C
            waiting = [n for n in names if totals.get(n)]
            if len(waiting) == 1:
                node = waiting[0]
                if not fits.ok(least(sizes[node])):
                    return None
            elif not waiting or (node is None and not any(fits.ok(least(sizes[n])) for n in waiting)):
                return None  # below the roots a subtree entered always holds a fitting size: asked once
            else:
                # the kept ranking of all the children, read in order up to the first that holds a
                # fitting size (the waiting ones keep their order)
                parent, found = node, None
                for n in self.ranked_children(parent, t):
                    waits = totals.get(n)
                    if waits:
                        if fits.ok(least(sizes[n])):
                            found = n
                            break
                        before += waits
                if found is None:
                    return None
                node = found
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


def _gap_until(first: tuple[float, float, int], second: tuple[float, float, int], t: int) -> int:
    """Return until when (µs, exclusive) ``first`` provably ranks ahead of its neighbour ``second``; t near a tie.

    Both are ``_motion`` answers (ratio, change per µs, line end). Infinite ratios rank last by
    path for ever; a gap within ``_TIE_GAP`` is decided by rounding and path, so the ranking is
    renewed at the next instant.
    """
    if not math.isfinite(second[0]):
        return _FOREVER
    gap = second[0] - first[0]
    if gap <= _TIE_GAP:
        return t
    closing = first[1] - second[1]  # how fast the gap shrinks per µs
    if closing > 0:
        # the gap reaches the tie zone no sooner than this (floor, one µs of slack)
        return t + int((gap - _TIE_GAP) / closing)
    return _FOREVER
