"""Occupancy per budget node, allocated and unallocated apart, over a sliding window or a half-life.

How usage in the window stays cheap (no rescan of the window, ever):

* Each node keeps a *meter*: the number of GPUs it holds right now (``rate``) and the
  cumulative GPU-microseconds ``C(t)`` up to its last change. ``C`` is piecewise linear,
  so the meter records one breakpoint ``(t, C(t), rate after t)`` per change.
* Usage in ``[now - W, now]`` is ``C(now) - C(now - W)``. ``C(now)`` is O(1); ``C(now - W)``
  is a binary search among the breakpoints still inside the window, O(log k).
* Breakpoints older than the window are dropped as events move time forward, once they are
  half of a meter's list (amortised O(1) per change), so memory is bounded by twice the changes
  inside one window.
* A start or stop touches the node and each ancestor: O(depth).

Everything is exact integer GPU-microseconds, running workloads included (``rate × elapsed``).

With ``half_life_s`` set, a meter keeps instead a decayed value (float: a decayed sum is not
a whole number of GPU-seconds) that is advanced in closed form at each change, O(1).

The *entry charge* (knob ``charge=upfront``): while an allocated workload is inside its
protected window its node is also charged the rest of that window, ``gpus × (protected_until
- now)``. Per node that is ``GP - now × G`` with ``G = Σ gpus`` and ``GP = Σ gpus ×
protected_until`` over protected runs: O(1) to read, O(depth) to change. As time passes the
prepaid part turns into accrued usage GPU for GPU, and when the run stops or its window ends it
drops out, so the charge is reconciled to the GPU time actually held and never counted twice.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field

from ledger.core.pickling import field_state, rebuilt_from_fields, set_fields

__all__ = ["Meter", "NodeUsage", "Occupancy"]

_PRUNE_AT = 64  # drop expired breakpoints once this many have piled up (amortised O(1))


@dataclass(slots=True)
class Meter:
    """GPUs held now and GPU-microseconds held over time, for one node and one kind of work."""

    rate: int = 0
    last_t: int = 0
    cum: int = 0  # C(last_t), GPU-microseconds since the meter began
    ts: list[int] = field(default_factory=list)  # breakpoint times
    cs: list[int] = field(default_factory=list)  # C at each breakpoint
    rs: list[int] = field(default_factory=list)  # rate just after each breakpoint
    decayed: float = 0.0  # half-life mode: decayed GPU-microseconds as of last_t

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)

    def change(self, t: int, delta: int, window_us: int, half_life_us: int | None) -> None:
        """Add ``delta`` GPUs at time ``t`` (t never goes backwards). O(1) amortised."""
        if half_life_us is not None:
            self.decayed = self._decayed_at(t, half_life_us)
        self.cum += self.rate * (t - self.last_t)
        self.last_t = t
        self.rate += delta
        if self.ts and self.ts[-1] == t:
            self.cs[-1], self.rs[-1] = self.cum, self.rate
        else:
            self.ts.append(t)
            self.cs.append(self.cum)
            self.rs.append(self.rate)
        n = len(self.ts)
        # Expired breakpoints are dropped only once they are half the list (deleting a prefix moves
        # the rest, and a busy node's meter, the cluster's, keeps a whole window of breakpoints):
        # k > n/2 for k, the index of the last breakpoint at or before the window start (C(window
        # start) needs it), exactly when the breakpoint at n//2 + 1 lies at or before it. Asked in
        # O(1), so the search runs only when a prune is due, not at every change.
        if n > _PRUNE_AT and self.ts[n // 2 + 1] <= t - window_us:
            k = bisect_right(self.ts, t - window_us) - 1
            del self.ts[:k], self.cs[:k], self.rs[:k]

    def total(self, t: int) -> int:
        """Return C(t): all GPU-microseconds held up to ``t`` (t >= last change). O(1)."""
        return self.cum + self.rate * (t - self.last_t)

    def at(self, x: int) -> int:
        """Return C(x) for a past time x still covered by the kept breakpoints. O(log k)."""
        if not self.ts or x <= self.ts[0]:
            return self.cs[0] if self.ts else 0
        i = bisect_right(self.ts, x) - 1
        return self.cs[i] + self.rs[i] * (x - self.ts[i])

    def in_window(self, t: int, window_us: int) -> int:
        """Return GPU-microseconds held in ``[t - window, t]``. O(log k)."""
        return self.total(t) - self.at(t - window_us)

    def _decayed_at(self, t: int, half_life_us: int) -> float:
        dt = t - self.last_t
        if dt <= 0:
            return self.decayed
        keep: float = 2.0 ** (-dt / half_life_us)
        # ∫ rate · 2^(-(t-τ)/H) dτ over the last dt, in closed form
        value: float = self.decayed * keep + self.rate * (half_life_us / math.log(2)) * (1.0 - keep)
        return value

    def decayed_at(self, t: int, half_life_us: int) -> float:
        """Return the half-life-decayed GPU-microseconds at ``t``. O(1)."""
        return self._decayed_at(t, half_life_us)


@dataclass(slots=True)
class NodeUsage:
    """A budget node's meters: allocated and unallocated work, and the prepaid entry charge."""

    allocated: Meter = field(default_factory=Meter)
    unallocated: Meter = field(default_factory=Meter)
    prepaid_g: int = 0  # Σ gpus of protected runs still inside their window
    prepaid_gp: int = 0  # Σ gpus × protected_until (µs) over the same runs
    # GPUs of allocated runs past their protected window (preemptible by lower-ranked waiters)
    exposed: int = 0

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)


class Occupancy:
    """Meters for every budget node (and ``""`` for the whole cluster)."""

    CLUSTER = ""

    def __init__(self, window_s: int = 7 * 86_400, half_life_s: int | None = None, upfront: bool = True) -> None:
        self.window_us = window_s * 1_000_000
        self.half_life_us = half_life_s * 1_000_000 if half_life_s else None
        self.upfront = upfront
        self.nodes: dict[str, NodeUsage] = {self.CLUSTER: NodeUsage()}
        self.version = 0  # bumped at every change of a meter: lets readers cache ratios for one instant
        self.touched: dict[str, None] = {}  # nodes changed since a reader last looked (cache invalidation)
        # derived, never in a snapshot: node -> exposed GPUs of the work charged to the node itself (not
        # to a descendant); None until rebuilt from the tree (``walk.own_exposed``)
        self.own_exposed_cache: dict[str, int] | None = {}

    def __getstate__(self) -> dict[str, object]:
        return field_state(self, ("window_us", "half_life_us", "upfront", "nodes", "version", "touched"))

    def __setstate__(self, state: object) -> None:
        set_fields(self, state)
        self.own_exposed_cache = None

    def add_node(self, path: str) -> None:
        """Start meters for a newly defined node."""
        self.nodes.setdefault(path, NodeUsage())

    def run_changed(self, chain: list[str], t: int, gpus: int, allocated: bool) -> None:
        """Add ``gpus`` (negative to remove) held by a run charged along ``chain`` (leaf..root). O(depth)."""
        self.version += 1
        w, h = self.window_us, self.half_life_us
        for p in chain:
            self.touched[p] = None
        for p in (*chain, self.CLUSTER):
            u = self.nodes[p]
            (u.allocated if allocated else u.unallocated).change(t, gpus, w, h)

    def prepaid_changed(self, chain: list[str], gpus: int, protected_until: int) -> None:
        """Add (or remove, with negative gpus) a protected run's prepaid entry charge. O(depth)."""
        self.version += 1
        for p in chain:
            self.touched[p] = None
        for p in (*chain, self.CLUSTER):
            u = self.nodes[p]
            u.prepaid_g += gpus
            u.prepaid_gp += gpus * protected_until

    def exposed_changed(self, chain: list[str], gpus: int) -> None:
        """Count GPUs of allocated runs that left their protected window (negative to uncount). O(depth)."""
        for p in chain:
            self.nodes[p].exposed += gpus
        own = self.own_exposed_cache
        if own is not None and chain:
            own[chain[0]] = own.get(chain[0], 0) + gpus

    def charged(self, path: str, t: int) -> float:
        """Return the allocated usage charged to a node at ``t`` in GPU-microseconds (window or decayed).

        In window mode the value is an exact integer (returned as int); in half-life mode a float.
        O(log k) for the window, O(1) for the half-life.
        """
        u = self.nodes[path]
        used: float = (
            u.allocated.decayed_at(t, self.half_life_us)
            if self.half_life_us is not None
            else u.allocated.in_window(t, self.window_us)
        )
        if self.upfront and u.prepaid_g:
            used += u.prepaid_gp - t * u.prepaid_g
        return used

    def charged_exact(self, path: str, t: int) -> int:
        """Return the allocated GPU-microseconds charged to a node in the window (window mode). O(log k)."""
        u = self.nodes[path]
        used = u.allocated.in_window(t, self.window_us)
        if self.upfront:
            used += u.prepaid_gp - t * u.prepaid_g
        return used

    def unallocated(self, path: str, t: int) -> int:
        """Return the unallocated GPU-microseconds held by a node's work in the window. O(log k)."""
        return self.nodes[path].unallocated.in_window(t, self.window_us)

    def accrued(self, path: str, t: int) -> int:
        """Return allocated GPU-microseconds actually held in the window (no prepaid part). O(log k)."""
        return self.nodes[path].allocated.in_window(t, self.window_us)

    def horizon_us(self) -> float:
        """Return the time span an allocation is worth: the window, or H/ln 2 under a half-life."""
        if self.half_life_us is not None:
            return self.half_life_us / math.log(2)
        return float(self.window_us)
