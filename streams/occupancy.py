"""Rolling occupancy per budget node, recounted from facts: allocated and unallocated GPU-microseconds in a window.

A pure projection (no IO): ``apply`` each event of the ledger in order (inputs and the decision
core's outputs), ``totals(now_us)`` returns, for every budget node, the GPU-microseconds its
workloads held inside ``[now - window, now]``, split into allocated (charged to the node and
every ancestor) and unallocated (charged to nobody, but shown on the workload's node and its
ancestors so an operator sees whose work filled idle GPUs). It counts what ran, not what the core
charged up front, so it checks the core rather than repeating it. Integer arithmetic only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.events import (
    BudgetNodeDefined,
    Event,
    WorkloadCompleted,
    WorkloadPreempted,
    WorkloadStarted,
    WorkloadSubmitted,
    to_us,
)

__all__ = ["NodeOccupancy", "OccupancyProjection"]

_US = 1_000_000


@dataclass(frozen=True)
class NodeOccupancy:
    """One node's held GPU time in the window, in GPU-microseconds."""

    allocated_gpu_us: int
    unallocated_gpu_us: int

    @property
    def allocated_gpu_s(self) -> int:
        """Return whole allocated GPU-seconds (rounded down)."""
        return self.allocated_gpu_us // _US

    @property
    def unallocated_gpu_s(self) -> int:
        """Return whole unallocated GPU-seconds (rounded down)."""
        return self.unallocated_gpu_us // _US


@dataclass
class OccupancyProjection:
    """Intervals of held GPUs per budget node; closed intervals older than the window are dropped."""

    window_s: int = 7 * 86_400
    parents: dict[str, str | None] = field(default_factory=dict)
    budget_of: dict[str, str] = field(default_factory=dict)  # workload id -> budget path
    running: dict[str, list[Any]] = field(default_factory=dict)  # workload id -> [start_us, gpus, allocated]
    closed: dict[str, list[list[Any]]] = field(default_factory=dict)  # path -> [[start, end, gpus, allocated]]
    now_us: int = 0

    def apply(self, event: Event) -> None:
        """Account one event of the ledger (unknown kinds are ignored)."""
        t = to_us(event.time)
        self.now_us = max(self.now_us, t)
        if isinstance(event, BudgetNodeDefined):
            self.parents[event.path] = event.parent
        elif isinstance(event, WorkloadSubmitted):
            self.budget_of[event.workload_id] = event.budget
        elif isinstance(event, WorkloadStarted):
            self._close(event.workload_id, t)  # a start while running (an adapter's restart) ends the old hold
            self.running[event.workload_id] = [t, event.gpus, event.allocated]
        elif isinstance(event, WorkloadPreempted | WorkloadCompleted):
            self._close(event.workload_id, t)

    def advance(self, now_us: int) -> None:
        """Move the projection's clock (the window slides with no new events)."""
        self.now_us = max(self.now_us, now_us)
        self._prune()

    def _close(self, wid: str, t: int) -> None:
        run = self.running.pop(wid, None)
        if run is None:
            return
        start, gpus, allocated = run
        if t > start:
            self.closed.setdefault(self.budget_of.get(wid, ""), []).append([start, t, gpus, allocated])

    def _prune(self) -> None:
        floor = self.now_us - self.window_s * _US
        for path, spans in list(self.closed.items()):
            kept = [s for s in spans if s[1] > floor]
            if len(kept) != len(spans):
                self.closed[path] = kept

    def _ancestors(self, path: str) -> list[str]:
        chain: list[str] = []
        node: str | None = path
        while node and node not in chain:
            chain.append(node)
            node = self.parents.get(node, node.rsplit("/", 1)[0] if "/" in node else None)
        return chain

    def totals(self, now_us: int | None = None) -> dict[str, NodeOccupancy]:
        """Return every budget node's occupancy in the window ending at ``now_us`` (default: the last event)."""
        now = self.now_us if now_us is None else now_us
        floor = now - self.window_s * _US
        leaf: dict[str, list[int]] = {}

        def add(path: str, start: int, end: int, gpus: int, allocated: bool) -> None:
            held = (min(end, now) - max(start, floor)) * gpus
            if held > 0:
                acc = leaf.setdefault(path, [0, 0])
                acc[0 if allocated else 1] += held

        for path, spans in self.closed.items():
            for start, end, gpus, allocated in spans:
                add(path, start, end, gpus, allocated)
        for wid, (start, gpus, allocated) in self.running.items():
            add(self.budget_of.get(wid, ""), start, now, gpus, allocated)
        out: dict[str, list[int]] = {p: [0, 0] for p in self.parents}
        for path, (alloc, unalloc) in leaf.items():
            for node in self._ancestors(path) if path else [""]:
                acc = out.setdefault(node, [0, 0])
                acc[0] += alloc
                acc[1] += unalloc
        return {p: NodeOccupancy(a, u) for p, (a, u) in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        """Return the state as plain JSON-ready data."""
        return {
            "window_s": self.window_s,
            "parents": self.parents,
            "budget_of": self.budget_of,
            "running": self.running,
            "closed": self.closed,
            "now_us": self.now_us,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OccupancyProjection:
        """Rebuild a projection from ``to_dict`` data."""
        return cls(**data)
