"""Prometheus metrics of the worker (one registry per worker, served at ``/metrics``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["WorkerMetrics"]


@dataclass
class _Rate:
    """Per-second rate of a counter over the last sampling interval."""

    last_value: float = 0.0
    last_time: float = field(default_factory=time.monotonic)

    def sample(self, value: float) -> float:
        now = time.monotonic()
        dt = now - self.last_time
        rate = (value - self.last_value) / dt if dt > 0 else 0.0
        self.last_value, self.last_time = value, now
        return rate


class WorkerMetrics:
    """Counters and gauges an operator scrapes: throughput, lag, decisions, dead letters, checkpoints."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records = Counter(
            "gpuledger_worker_records", "Input records by outcome", ["outcome"], registry=r
        )
        self.decisions = Counter("gpuledger_worker_decisions", "Events emitted to the decisions topic", registry=r)
        self.deadletters = Counter("gpuledger_worker_deadletters", "Records sent to the dead-letter topic", registry=r)
        self.late = Counter(
            "gpuledger_worker_late_events", "Inputs that arrived after their instant was closed", registry=r
        )
        self.checkpoints = Counter("gpuledger_worker_checkpoints", "Durable checkpoints written", registry=r)
        self.events_per_s = Gauge("gpuledger_worker_events_per_second", "Input records per second", registry=r)
        self.decisions_per_s = Gauge("gpuledger_worker_decisions_per_second", "Outputs per second", registry=r)
        self.lag = Gauge("gpuledger_worker_consumer_lag", "Records not yet processed", ["partition"], registry=r)
        self.latency = Histogram(
            "gpuledger_worker_processing_seconds", "Time to process one batch of input records", registry=r,
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
        )
        self.checkpoint_seconds = Histogram(
            "gpuledger_worker_checkpoint_seconds", "Time the event loop spent on one checkpoint", registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
        )
        self.busy_seconds = Counter(
            "gpuledger_worker_busy_seconds", "Seconds spent processing batches (decode to checkpoint)", registry=r
        )
        self.core_seconds = Counter(
            "gpuledger_worker_core_seconds", "Seconds of that spent inside the decision core", registry=r
        )
        self.halted = Gauge(
            "gpuledger_worker_halted", "1 once the worker stopped deciding (the broker lost its log; see its log)",
            registry=r,
        )
        self.checkpointed = Gauge(
            "gpuledger_worker_checkpointed_offset", "Last input offset the durable checkpoints reflect",
            ["partition"], registry=r,
        )
        self.restore_seconds = Histogram(
            "gpuledger_worker_restore_seconds", "Time to read checkpoints at an assignment",
            registry=r, buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.outages = Counter(
            "gpuledger_worker_outages", "Times outputs went unacknowledged and the partitions resumed from checkpoints",
            registry=r,
        )
        self._events_rate = _Rate()
        self._decisions_rate = _Rate()
        self.events_seen = 0
        self.outputs_sent = 0

    def sample_rates(self) -> None:
        """Refresh the per-second gauges (called by the worker's timer)."""
        self.events_per_s.set(self._events_rate.sample(self.events_seen))
        self.decisions_per_s.set(self._decisions_rate.sample(self.outputs_sent))
