"""Prometheus gauges per budget node: occupancy in the window against what the node's allocation is worth.

The dashboard's "occupancy by team against allocation" panels read these two gauges:

* ``gpuledger_worker_occupancy_gpu_seconds{cluster, budget, tier}``: GPU-seconds the node's
  workloads held in the window (``tier`` = ``allocated`` or ``unallocated``), from the worker's
  occupancy projection (what ran, recounted from the facts);
* ``gpuledger_worker_allocation_gpu_seconds{cluster, budget}``: what the node's normalised share
  of the cluster's capacity is worth over the same window, from the decision core.

A worker exports only the clusters it owns: when a partition moves to another worker after a
rebalance, ``forget_partitions`` drops its clusters' series, so that a sum over workers never
counts a cluster twice.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Gauge

from ledger.errors import LedgerError
from ledger.streams.state import ClusterState

__all__ = ["BudgetGauges"]


class BudgetGauges:
    """The two per-budget-node gauges of one worker, kept for the clusters it owns."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.occupancy = Gauge(
            "gpuledger_worker_occupancy_gpu_seconds",
            "GPU-seconds a budget node's workloads held in the window, by tier (allocated, unallocated)",
            ["cluster", "budget", "tier"],
            registry=registry,
        )
        self.allocation = Gauge(
            "gpuledger_worker_allocation_gpu_seconds",
            "GPU-seconds a budget node's share of the cluster's capacity is worth over the window",
            ["cluster", "budget"],
            registry=registry,
        )
        self._partition: dict[str, int] = {}  # cluster -> partition it is processed from
        self._budgets: dict[str, set[str]] = {}  # cluster -> budget paths exported

    def update(self, state: ClusterState) -> None:
        """Set the gauges of every budget node of one cluster from its state (call after a checkpoint)."""
        cluster = state.cluster
        totals = state.occupancy.totals()
        paths = {path for path in totals if path}  # "" collects work whose budget is unknown: no team to show
        for gone in self._budgets.get(cluster, set()) - paths:
            self._remove(cluster, gone)
        for path in sorted(paths):
            occ = totals[path]
            self.occupancy.labels(cluster, path, "allocated").set(occ.allocated_gpu_s)
            self.occupancy.labels(cluster, path, "unallocated").set(occ.unallocated_gpu_s)
            try:
                allocation = state.core.usage(path).get("allocation_gpu_s")
            except LedgerError:  # a node the projection saw but the core refused: no allocation to show
                allocation = None
            if allocation is not None:
                self.allocation.labels(cluster, path).set(allocation)
        self._partition[cluster] = state.partition
        self._budgets[cluster] = paths

    def forget_partitions(self, partitions: set[int]) -> None:
        """Drop the series of every cluster processed from these partitions (revoked from this worker)."""
        for cluster in [c for c, p in self._partition.items() if p in partitions]:
            for path in self._budgets.pop(cluster, set()):
                self._remove(cluster, path)
            del self._partition[cluster]

    def _remove(self, cluster: str, path: str) -> None:
        for tier in ("allocated", "unallocated"):
            with contextlib.suppress(KeyError):  # a series never set has nothing to remove
                self.occupancy.remove(cluster, path, tier)
        with contextlib.suppress(KeyError):
            self.allocation.remove(cluster, path)
