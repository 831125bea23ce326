"""Scale-out: two workers share clusters by partition; a rebalance hands a cluster over, losing and repeating nothing.

A morning on eight clusters: one worker runs alone; a second worker joins (half the partitions,
hence half the clusters, move to it while the first keeps running); then the first worker is
stopped, as a scale-down or a rolling upgrade would, and the second takes every cluster. Each
cluster's decisions on ``gpuledger.decisions`` must be exactly those the decision service makes
from that cluster's events in order, each once.
"""

from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka.partitioner import murmur2

from ledger.budgets import parse_budgets
from ledger.core import Knobs
from ledger.events import Event, WorkloadSubmitted
from ledger.log import open_log
from ledger.replay.run import inputs_from_budgets, replay
from ledger.streams.publisher import event_record
from ledger.streams.service import DecisionService
from tests.streams.harness import WorkerProc, decoded, is_output, namespace, produce_events, read_topic, wait_for

PARTITIONS = 4
DAY0 = datetime(2026, 3, 2, tzinfo=UTC)
APPLIED = 'gpuledger_worker_records_total{outcome="applied"}'
WORKER_FLAGS = ["--idle-clock-rate", "0", "--checkpoint-every", "25"]  # outputs depend on the inputs alone

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]


def partition_of(cluster: str) -> int:
    """Return the partition the publisher's key (the cluster) lands on (Kafka's default partitioner)."""
    return (murmur2(cluster.encode()) & 0x7FFFFFFF) % PARTITIONS


def clusters_covering_every_partition(per_partition: int = 2) -> list[str]:
    """Return cluster names, ``per_partition`` of them on each partition."""
    chosen: dict[int, list[str]] = defaultdict(list)
    i = 0
    while any(len(chosen[p]) < per_partition for p in range(PARTITIONS)):
        name = f"gpu-{i:02d}"
        if len(chosen[partition_of(name)]) < per_partition:
            chosen[partition_of(name)].append(name)
        i += 1
    return sorted(c for names in chosen.values() for c in names)


def cluster_inputs(cluster: str, seed: int) -> list[Event]:
    """Return a day of one 32-GPU cluster's inputs (budget tree, submissions, checkpoints, completions), in order."""
    budgets = parse_budgets(
        {
            "cluster": {"name": cluster, "gpus": 32, "gpus_per_node": 8},
            "nodes": [
                {"path": "lab", "share": 1.0},
                {"path": "lab/vision", "share": 0.6},
                {"path": "lab/speech", "share": 0.4},
            ],
        }
    )
    rng = random.Random(seed)
    submissions = []
    for i in range(30):
        team = rng.choice(("lab/vision", "lab/speech"))
        submissions.append(
            WorkloadSubmitted(
                event_id=f"{cluster}/sub/{i}", cluster=cluster, time=DAY0 + timedelta(minutes=rng.randrange(0, 600)),
                workload_id=f"{cluster}-w{i:03d}", budget=team, user=team.split("/")[1], gpus=rng.choice((4, 8, 16)),
                min_runtime_s=rng.choice((0, 600, 1800)), resumable=rng.random() < 0.8,
                work_s=rng.randrange(30, 240) * 60, checkpoint_interval_s=600, restart_s=60,
            )
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        replay(inputs_from_budgets(budgets, submissions), Knobs(), d)
        return [e for e in open_log(d) if not is_output(e)]


def expected_decisions(inputs: list[Event]) -> list[Event]:
    """Return what the decision service emits for one cluster's inputs in order (no broker involved)."""
    service = DecisionService(Knobs(), idle_clock_rate=0.0)
    out: list[Event] = []
    for offset, event in enumerate(inputs):
        key, value = event_record(event)
        outcome = service.process(value, key, partition_of(event.cluster), offset)
        assert outcome.kind == "applied", outcome
        out.extend(outcome.emit)
    return out


def thirds(events: list[Event]) -> tuple[list[Event], list[Event], list[Event]]:
    """Split a cluster's inputs into a morning, a midday and an afternoon, never inside an instant.

    The worker closes an instant once its cluster has been quiet for a second, so an instant sent in two
    parts with a pause between them is a late input (docs/streaming.md) and may be decided otherwise.
    """

    def cut(i: int) -> int:
        while 0 < i < len(events) and events[i].time == events[i - 1].time:
            i += 1
        return i

    a = cut(len(events) // 3)
    b = cut(max(a, 2 * len(events) // 3))
    return events[:a], events[a:b], events[b:]


def test_a_rebalance_hands_clusters_over_without_losing_or_repeating_a_decision(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    clusters = clusters_covering_every_partition()
    inputs = {c: cluster_inputs(c, seed) for seed, c in enumerate(clusters)}
    phases = list(zip(*(thirds(inputs[c]) for c in clusters), strict=True))  # phase -> per-cluster slices
    want = {c: expected_decisions(inputs[c]) for c in clusters}
    assert all(want.values()), "every cluster makes decisions"

    prefix, app_id = namespace()
    first = WorkerProc(kafka_bootstrap, prefix, app_id, PARTITIONS, WORKER_FLAGS, tmp_path / "first.log")
    second = WorkerProc(kafka_bootstrap, prefix, app_id, PARTITIONS, WORKER_FLAGS, tmp_path / "second.log")
    first.create_topics()
    decisions_topic = first.topics.decisions

    def published_so_far(phase: int) -> int:
        """Return how many decisions the inputs of phases 0..phase make, over all clusters."""
        count = 0
        for c in clusters:
            n_inputs = sum(len(phases[p][clusters.index(c)]) for p in range(phase + 1))
            count += len(expected_decisions(inputs[c][:n_inputs]))
        return count

    def decisions_reach(n: int) -> None:
        """Wait until the decisions topic holds at least n records."""
        assert len(read_topic(kafka_bootstrap, decisions_topic, want=n, idle_s=0.5, timeout_s=60)) >= n

    try:
        # Morning: one worker owns every partition.
        first.start()
        first.wait_ready()
        produce_events(kafka_bootstrap, first.topics.events, [e for part in phases[0] for e in part])
        decisions_reach(published_so_far(0))
        morning_records = first.metric(APPLIED)
        assert morning_records == sum(len(p) for p in phases[0])

        # Midday: a second worker joins; the group splits the partitions between the two.
        second.start()
        second.wait_ready()
        wait_for(lambda: first.get("/readyz")[0] == 200, timeout_s=60)
        produce_events(kafka_bootstrap, first.topics.events, [e for part in phases[1] for e in part])
        decisions_reach(published_so_far(1))
        midday_first = first.metric(APPLIED) - morning_records
        midday_second = second.metric(APPLIED)
        assert midday_first > 0 and midday_second > 0, "both workers process clusters after the rebalance"
        # a record after the last checkpoint of a moved cluster is applied again by its new owner
        assert midday_first + midday_second >= sum(len(p) for p in phases[1])

        # Afternoon: the first worker is stopped; the second takes every cluster.
        first.stop()
        produce_events(kafka_bootstrap, first.topics.events, [e for part in phases[2] for e in part])
        wait_for(lambda: second.get("/readyz")[0] == 200, timeout_s=60)
        read_topic(kafka_bootstrap, decisions_topic, want=published_so_far(2), idle_s=0.5, timeout_s=30)  # see below
        assert second.metric(APPLIED) > midday_second, "the second worker took over the first one's clusters"
    finally:
        first.stop()
        second.stop()

    records = read_topic(kafka_bootstrap, decisions_topic, want=sum(len(w) for w in want.values()), timeout_s=30)
    got: dict[str, list[Event]] = defaultdict(list)
    for record, event in zip(records, decoded(records), strict=True):
        assert record.key == event.cluster.encode(), "decisions are keyed by cluster"
        assert record.partition == partition_of(event.cluster), "a cluster's decisions stay on its partition"
        got[event.cluster].append(event)
    for c in clusters:
        ids = [e.event_id for e in got[c]]
        assert len(ids) == len(set(ids)), f"{c}: a decision was emitted twice"
        missing = [e.event_id for e in want[c] if e.event_id not in set(ids)]
        assert not missing, f"{c}: {len(missing)} decision(s) lost across the rebalances: {missing[:8]}"
        assert got[c] == want[c], f"{c}: decisions changed across the rebalances"
