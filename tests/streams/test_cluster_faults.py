"""Faults on a real three-node Apache Kafka cluster (replication factor 3, min.insync.replicas 2).

A broker process dies under the publisher and the worker and comes back; a worker dies and its group
partner takes its partitions over. Nothing may be lost, nothing decided twice, and what is decided is
what the embedded replay decided from the same inputs.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ledger.events import Event
from ledger.streams.publisher import Publisher
from ledger.streams.testbroker import KafkaCluster
from tests.deploy.test_scale_out import (
    APPLIED,
    PARTITIONS,
    cluster_inputs,
    clusters_covering_every_partition,
    expected_decisions,
    partition_of,
)
from tests.streams.harness import WorkerProc, decoded, namespace, produce_events, read_topic, wait_for
from tests.streams.scenarios import lab_month
from tests.streams.test_worker import FAST_GROUP

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(400)]


def _worker(cluster: KafkaCluster, tmp_path: Path, name: str, partitions: int, flags: list[str],
            prefix: str, app_id: str) -> WorkerProc:
    return WorkerProc(cluster.bootstrap, prefix, app_id, partitions, flags, tmp_path / f"{name}.log",
                      replication_factor=3)


def test_the_leaders_broker_killed_mid_stream_every_input_is_decided_once_as_the_replay_decides(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    ledger = lab_month()
    inputs = ledger.inputs
    # History mode: once a cluster has been quiet for 20 s the timer plays out every remaining wake-up,
    # as the replay does at the end of its input. 20 s is longer than the outage (the controller fences
    # a dead broker after broker.session.timeout.ms, 9 s), so no wake-up is played ahead of an input.
    flags = [*FAST_GROUP, "--idle-clock-rate", "1e9", "--idle-after", "20", "--checkpoint-every", "200"]
    prefix, app_id = namespace()
    worker = _worker(kafka_cluster, tmp_path, "worker", 1, flags, prefix, app_id)
    worker.create_topics()
    events_topic = worker.topics.events
    halfway, killed = threading.Event(), threading.Event()
    results = []

    def publish() -> None:
        with Publisher(kafka_cluster.bootstrap, tmp_path / "spool", topic=events_topic, request_timeout_s=5) as pub:
            for i in range(0, len(inputs), 50):
                if i >= len(inputs) // 2 and not halfway.is_set():
                    halfway.set()
                    killed.wait(timeout=30)
                results.append(pub.publish(inputs[i : i + 50]))
                time.sleep(0.02)
            results.append(pub.flush(wait_s=120))

    try:
        worker.start()
        worker.wait_ready()
        thread = threading.Thread(target=publish)
        thread.start()
        assert halfway.wait(timeout=60)
        victim = kafka_cluster.leader(events_topic, 0)
        victim.kill()
        killed.set()
        time.sleep(3)  # publish and the worker carry on against the two nodes left
        victim.start()
        thread.join(timeout=180)
        assert not thread.is_alive()
        assert results[-1].spooled == 0, results[-1]
        # the worker may sit out a pause and restore from its checkpoints after the leader's death: a
        # silence of a few seconds is not the end of its decisions (the read ends once all have come)
        records = read_topic(kafka_cluster.bootstrap, worker.topics.decisions, want=len(ledger.outputs), idle_s=30,
                             timeout_s=180)
        assert worker.alive, "the worker rode out the broker's death"
    finally:
        worker.stop()
    got = decoded(records)
    ids = [e.event_id for e in got]
    assert len(ids) == len(set(ids)), "a decision was emitted twice"
    assert got == ledger.outputs
    arrived = decoded(read_topic(kafka_cluster.bootstrap, events_topic, want=len(inputs), idle_s=1))
    assert sorted({e.event_id for e in arrived}) == sorted(e.event_id for e in inputs), "every input arrived"


def test_two_workers_on_four_partitions_one_killed_the_other_resumes_its_partitions_from_the_checkpoints(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    clusters = clusters_covering_every_partition()
    inputs = {c: cluster_inputs(c, seed) for seed, c in enumerate(clusters)}
    want = {c: expected_decisions(inputs[c]) for c in clusters}
    before = [e for c in clusters for e in inputs[c][: 2 * len(inputs[c]) // 3]]
    after = [e for c in clusters for e in inputs[c][2 * len(inputs[c]) // 3 :]]
    flags = [*FAST_GROUP, "--idle-clock-rate", "0", "--checkpoint-every", "25"]
    prefix, app_id = namespace()
    first = _worker(kafka_cluster, tmp_path, "first", PARTITIONS, flags, prefix, app_id)
    second = _worker(kafka_cluster, tmp_path, "second", PARTITIONS, flags, prefix, app_id)
    first.create_topics()
    try:
        first.start()
        second.start()
        first.wait_ready()
        second.wait_ready()
        produce_events(kafka_cluster.bootstrap, first.topics.events, before)
        wait_for(lambda: first.metric(APPLIED) + second.metric(APPLIED) >= len(before), timeout_s=120)
        done_by_first, done_by_second = first.metric(APPLIED), second.metric(APPLIED)
        assert done_by_first > 0 and done_by_second > 0, "the group split the partitions between the two"
        time.sleep(1.5)  # past a checkpoint interval: the first worker's marks are on the topic
        first.kill()
        produce_events(kafka_cluster.bootstrap, first.topics.events, after)
        wait_for(lambda: second.metric(APPLIED) >= done_by_second + len(after), timeout_s=120)
        records = read_topic(kafka_cluster.bootstrap, first.topics.decisions,
                             want=sum(len(w) for w in want.values()), idle_s=2, timeout_s=120)
        redone = second.metric(APPLIED) - done_by_second - len(after)
        # the survivor started the dead worker's partitions at their marks, not at their beginnings
        assert 0 <= redone < done_by_first, (redone, done_by_first)
    finally:
        first.stop()
        second.stop()
    got: dict[str, list[Event]] = defaultdict(list)
    for record, event in zip(records, decoded(records), strict=True):
        assert record.partition == partition_of(event.cluster)
        got[event.cluster].append(event)
    for c in clusters:
        ids = [e.event_id for e in got[c]]
        assert len(ids) == len(set(ids)), f"{c}: a decision was emitted twice"
        assert got[c] == want[c], f"{c}: decisions differ from the service's on the same inputs"
