"""The worker against a real broker: the replay's decisions and occupancy, restartable tables, probes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.events import Event
from ledger.streams.occupancy import OccupancyProjection
from tests.streams.harness import WorkerProc, decoded, produce_events, read_topic, running_worker, wait_for
from tests.streams.scenarios import lab_month

pytestmark = pytest.mark.kafka

# the shortest session Apache Kafka accepts (group.min.session.timeout.ms); a short rebalance timeout drops a
# dead member from a rebalance after 1 s instead of waiting for its session to expire
FAST_GROUP = ["--session-timeout", "6", "--rebalance-timeout", "1"]


def occupancy_of(events: list[Event] | tuple[Event, ...]) -> dict[str, dict[str, int]]:
    """Return rolling occupancy per node recounted from a ledger, as the worker's table shows it."""
    proj = OccupancyProjection()
    for e in events:
        proj.apply(e)
    return {
        f"{e.cluster}|{path}": {
            "allocated_gpu_s": occ.allocated_gpu_s, "unallocated_gpu_s": occ.unallocated_gpu_s, "as_of_us": proj.now_us
        }
        for e in events[:1]
        for path, occ in proj.totals().items()
    }


def table(worker: WorkerProc) -> dict[str, dict[str, int]]:
    status, body = worker.get("/occupancy")
    assert status == 200
    result: dict[str, dict[str, int]] = json.loads(body)
    return result


def test_kafka_and_the_worker_decide_what_the_embedded_replay_decided(kafka_bootstrap: str, tmp_path: Path) -> None:
    ledger = lab_month()
    # a huge idle clock rate: once the stream is drained, the timer plays out every remaining wake-up,
    # as the replay does at the end of its input
    extra = [*FAST_GROUP, "--idle-clock-rate", "1e9", "--idle-after", "1"]
    with running_worker(kafka_bootstrap, tmp_path, extra=extra) as worker:
        produce_events(kafka_bootstrap, worker.topics.events, ledger.inputs)
        worker.start()
        worker.wait_ready()
        records = read_topic(kafka_bootstrap, worker.topics.decisions, want=len(ledger.outputs), idle_s=3)
        got = decoded(records)
        assert got == ledger.outputs, f"{len(got)} decisions, worker alive: {worker.alive}\n{worker.log_tail()}"
        assert {m.key for m in records} == {b"demo"}
        expected = occupancy_of(ledger.events)
        wait_for(lambda: table(worker) == expected, timeout_s=30)
        # the occupancy table is changelog-backed: a restarted worker serves it before any new input
        worker.stop()
        worker.start()
        worker.wait_ready()
        wait_for(lambda: table(worker) == expected, timeout_s=30)
        assert read_topic(kafka_bootstrap, worker.topics.decisions, idle_s=2) == records  # nothing re-emitted


def test_an_operator_can_probe_health_readiness_and_metrics(kafka_bootstrap: str, tmp_path: Path) -> None:
    inputs = lab_month().inputs[:800]
    with running_worker(kafka_bootstrap, tmp_path, extra=FAST_GROUP) as worker:
        worker.start()
        wait_for(lambda: worker.alive and _answers(worker), timeout_s=30)
        assert worker.get("/healthz")[0] == 200
        worker.wait_ready()
        produce_events(kafka_bootstrap, worker.topics.events, inputs)
        wait_for(lambda: worker.metric('gpuledger_worker_records_total{outcome="applied"}') == len(inputs))
        _, body = worker.get("/metrics")
        text = body.decode()
        for name in ("gpuledger_worker_events_per_second", "gpuledger_worker_decisions_total",
                     "gpuledger_worker_deadletters_total", "gpuledger_worker_consumer_lag"):
            assert name in text
        assert worker.metric("gpuledger_worker_decisions_total") > 0
        wait_for(lambda: worker.metric("gpuledger_worker_consumer_lag") == 0, timeout_s=10)


def _answers(worker: WorkerProc) -> bool:
    try:
        return worker.get("/healthz")[0] == 200
    except OSError:
        return False


def test_a_worker_killed_before_its_first_checkpoint_sends_no_output_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    from tests.streams.test_faults import reference  # test_faults imports this module

    inputs = lab_month().inputs[:600]
    expected, _ = reference(inputs)
    never = ["--idle-clock-rate", "0", "--checkpoint-every", "1000000", "--checkpoint-interval", "3600"]
    with running_worker(kafka_bootstrap, tmp_path, extra=[*FAST_GROUP, *never]) as worker:
        produce_events(kafka_bootstrap, worker.topics.events, inputs)
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= len(inputs))
        assert worker.metric("gpuledger_worker_checkpoints_total") == 0
        worker.kill()  # every output sent, none covered by a checkpoint: the restart processes all inputs again
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= len(inputs))
        assert worker.metric("gpuledger_worker_decisions_total") == 0
        got = decoded(read_topic(kafka_bootstrap, worker.topics.decisions, want=len(expected), idle_s=2))
        assert got == expected


def test_a_checkpoint_larger_than_the_brokers_default_record_batch_is_written_and_read_back(
    kafka_bootstrap: str,
) -> None:
    import asyncio
    import os

    from aiokafka import AIOKafkaProducer

    from ledger.streams.reader import PartitionReader
    from ledger.streams.security import KafkaSecurity
    from ledger.streams.topics import CHECKPOINT_MAX_BYTES, checkpoint_topic, ensure_topics, worker_topics
    from tests.streams.harness import namespace

    prefix, app_id = namespace()
    blob = os.urandom(3 * 1024 * 1024)  # a busy cluster's checkpoint: 3 MB that do not compress

    async def round_trip() -> bytes:
        await ensure_topics(kafka_bootstrap, worker_topics(1, app_id, prefix))
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap, acks="all", max_request_size=CHECKPOINT_MAX_BYTES
        )
        await producer.start()
        try:
            await (await producer.send(checkpoint_topic(app_id), blob, key=b"busy", partition=0))
        finally:
            await producer.stop()
        reader = PartitionReader(kafka_bootstrap, KafkaSecurity.from_env(), 20)
        await reader.start()
        try:
            (record,) = await reader.read(checkpoint_topic(app_id), 0, 0)
            value: bytes = record.value
            return value
        finally:
            await reader.stop()

    assert asyncio.run(round_trip()) == blob
