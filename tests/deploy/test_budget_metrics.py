"""The per-team gauges behind the dashboard's "occupancy against allocation" panels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ledger.codec import encode
from ledger.core import Knobs
from ledger.events import Event
from ledger.streams.budget_metrics import BudgetGauges
from ledger.streams.service import DecisionService
from tests.factories import Events

OCC = "gpuledger_worker_occupancy_gpu_seconds"
ALLOC = "gpuledger_worker_allocation_gpu_seconds"
WEEK_S = 7 * 86_400


def _morning(cluster: str) -> list[Event]:
    """A 16-GPU cluster split evenly between two teams; vision runs 8 GPUs from 9:10, speech waits for nothing."""
    ev = Events(cluster)
    return [
        ev.capacity(0, gpus=16),
        ev.node(0, "lab"),
        ev.node(0, "lab/vision", share=0.5),
        ev.node(0, "lab/speech", share=0.5),
        ev.submit(10, "train", "lab/vision", gpus=8, min_runtime_s=3600),
        ev.submit(20, "scratch", "lab/speech", gpus=4, min_runtime_s=0),  # unallocated: charged to nobody
        ev.checkpoint(70, "train", progress_s=3600),
    ]


def _feed(service: DecisionService, events: list[Event], partition: int) -> None:
    for offset, event in enumerate(events):
        outcome = service.process(encode(event), event.cluster.encode(), partition, offset)
        assert outcome.kind == "applied", outcome.reason


def test_each_team_shows_what_it_held_next_to_what_its_share_is_worth() -> None:
    registry = CollectorRegistry()
    gauges = BudgetGauges(registry)
    service = DecisionService(Knobs(), idle_clock_rate=0.0)
    _feed(service, _morning("c1"), partition=0)
    gauges.update(service.states["c1"])

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"cluster": "c1", **labels})

    # vision ran 8 GPUs from minute 10 to minute 70; speech's scratch job ran 4 GPUs from minute 20, unallocated
    assert value(OCC, budget="lab/vision", tier="allocated") == 8 * 3600
    assert value(OCC, budget="lab/speech", tier="allocated") == 0
    assert value(OCC, budget="lab/speech", tier="unallocated") == 4 * 50 * 60
    assert value(OCC, budget="lab", tier="allocated") == 8 * 3600, "a parent holds what its children held"
    # half of 16 GPUs over the 7-day window
    assert value(ALLOC, budget="lab/vision") == value(ALLOC, budget="lab/speech") == 0.5 * 16 * WEEK_S
    assert value(ALLOC, budget="lab") == 16 * WEEK_S


def test_a_worker_stops_exporting_the_clusters_it_handed_over() -> None:
    registry = CollectorRegistry()
    gauges = BudgetGauges(registry)
    service = DecisionService(Knobs(), idle_clock_rate=0.0)
    _feed(service, _morning("c1"), partition=0)
    _feed(service, _morning("c2"), partition=1)
    for cluster in ("c1", "c2"):
        gauges.update(service.states[cluster])

    gauges.forget_partitions({0})

    clusters = {s.labels["cluster"] for m in registry.collect() for s in m.samples if s.name in (OCC, ALLOC)}
    assert clusters == {"c2"}
