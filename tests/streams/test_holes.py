"""faust may hand the worker a partition with holes; the worker still applies every record once, in order.

Seen in the SIGKILL test's offset trace: right after a restart faust delivered offsets 13950-13956 and then
13968 onwards, never 13957-13967; and it commits offsets it never delivered, so a restarted worker may
resume past its last checkpoint. Here the records come from a real topic; the batches the worker is
handed leave some out, as faust did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.core import Knobs
from ledger.events import Event
from streams.config import WorkerConfig
from streams.deadletter import mark_key
from streams.runtime import WorkerRuntime
from streams.service import DecisionService
from tests.streams.harness import namespace, produce_events
from tests.streams.scenarios import lab_month

pytestmark = [pytest.mark.kafka]


@dataclass
class Delivered:
    """What faust hands the agent for one record: an event with its message."""

    message: Any


@dataclass
class LocalTable:
    """The part of a faust table the runtime reads outside a running app: its local data."""

    data: dict[str, bytes]


def reference_state(events: list[Event], upto: int) -> Any:
    svc = DecisionService(Knobs())
    for offset, e in enumerate(events[: upto + 1]):
        from ledger.codec import encode

        svc.process(encode(e), e.cluster.encode(), 0, offset)
    (st,) = svc.states.values()
    return st


async def _records(bootstrap: str, topic: str, n: int) -> list[Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[Any] = []
        while len(out) < n:
            out.extend((await consumer.getmany(tp, timeout_ms=200)).get(tp, []))
        return out
    finally:
        await consumer.stop()


async def _run(bootstrap: str, events: list[Event], batches: list[list[int]], table: dict[str, bytes]) -> Any:
    from streams.topics import ensure_topics, worker_topics

    prefix, app_id = namespace()
    cfg = WorkerConfig(bootstrap=bootstrap, topic_prefix=prefix, app_id=app_id, partitions=1)
    await ensure_topics(bootstrap, worker_topics(1, app_id, prefix))
    await asyncio.to_thread(produce_events, bootstrap, f"{prefix}gpuledger.events", events)
    records = await _records(bootstrap, f"{prefix}gpuledger.events", len(events))
    rt = WorkerRuntime(cfg, app=None, clusters=LocalTable(dict(table)), occupancy=LocalTable({}))
    rt.assigned = {0}
    try:
        for offsets in batches:
            await rt.on_batch([Delivered(records[o]) for o in offsets])
    finally:
        await rt.stop_producer()
    return rt.service.states[events[0].cluster]


def test_records_faust_skipped_within_a_partition_are_read_and_applied_in_order(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    events = lab_month().inputs[:40]
    # the second batch resumes at 25: offsets 8-24 never came
    batches = [list(range(8)), list(range(25, 40))]
    st = asyncio.run(_run(kafka_bootstrap, events, batches, {}))
    want = reference_state(events, 39)
    assert st.offset == 39
    assert sorted(st.seen) == sorted(want.seen)
    assert st.occupancy.to_dict() == want.occupancy.to_dict()


def test_records_faust_skipped_at_the_start_of_a_partition_never_checkpointed_are_read_and_applied(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    events = lab_month().inputs[:40]
    # no checkpoint and no mark: the partition must be applied from its first record, but faust began at 5
    st = asyncio.run(_run(kafka_bootstrap, events, [list(range(5, 40))], {}))
    want = reference_state(events, 39)
    assert st.offset == 39
    assert sorted(st.seen) == sorted(want.seen)
    assert st.occupancy.to_dict() == want.occupancy.to_dict()


def test_a_worker_resuming_past_its_last_checkpoint_applies_the_records_in_between(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    events = lab_month().inputs[:40]
    checkpoint = reference_state(events, 11)  # the durable checkpoint reflects offsets 0-11
    table = {events[0].cluster: checkpoint.to_bytes(), mark_key(0): b"0 11"}
    # faust committed 20 although nothing after 11 was checkpointed
    st = asyncio.run(_run(kafka_bootstrap, events, [list(range(20, 40))], table))
    want = reference_state(events, 39)
    assert st.offset == 39
    assert sorted(st.seen) == sorted(want.seen)
    assert st.occupancy.to_dict() == want.occupancy.to_dict()


@dataclass
class FaustStream:
    """The agent's stream as far as acks go: faust's ``Stream.ack`` hands a record's message to the consumer."""

    consumer: Any

    async def ack(self, event: Delivered) -> bool:
        return bool(self.consumer.ack(event.message))


def _faust_message(record: Any) -> Any:
    from faust.types import TP, Message

    return Message(
        record.topic, record.partition, record.offset, record.timestamp / 1000, record.timestamp_type,
        list(record.headers or ()), record.key, record.value, record.checksum, tp=TP(record.topic, record.partition),
    )


async def _committed_after_filled_hole(bootstrap: str, events: list[Event]) -> int | None:
    from faust.types import TP

    from streams.app import build_app
    from streams.topics import ensure_topics, worker_topics

    prefix, app_id = namespace()
    cfg = WorkerConfig(bootstrap=bootstrap, topic_prefix=prefix, app_id=app_id, partitions=1, checkpoint_fork=False)
    await ensure_topics(bootstrap, worker_topics(1, app_id, prefix))
    topic = f"{prefix}gpuledger.events"
    await asyncio.to_thread(produce_events, bootstrap, topic, events)
    records = await _records(bootstrap, topic, len(events))
    app, rt = build_app(cfg)
    # what faust does when the agent starts: its topic's records are acknowledged by the agent
    app.topics.add(app.agents["decide"].channel)
    await app.topics._update_indices()
    consumer = app.consumer
    tp = TP(topic, 0)
    # the durable checkpoint reflects offsets 0-7 and the group resumed at the committed offset 8
    rt.clusters.data[events[0].cluster] = reference_state(events, 7).to_bytes()
    rt.clusters.data[mark_key(0)] = b"0 7"
    consumer._committed_offset[tp] = 8
    rt.assigned = {0}
    rt.stream = FaustStream(consumer)
    await app.producer.start()  # the changelog writes of a checkpoint go through faust's producer
    try:
        # faust hands over 8-11, then 25-39: its stream skipped 12-24 (they are never acked by the agent)
        for offsets in (range(8, 12), range(25, 40)):
            await rt.on_batch([Delivered(_faust_message(records[o])) for o in offsets])
        async with rt.lock:
            await rt._checkpoint()
        assert rt.service.states[events[0].cluster].offset == 39
        # what faust's commit computes from the acknowledged offsets: the next offset to commit
        return consumer._new_offset(tp)  # type: ignore[no-any-return]
    finally:
        await rt.stop_producer()
        await app.producer.stop()


def test_a_hole_the_worker_filled_is_acknowledged_so_the_committed_offset_passes_it(kafka_bootstrap: str) -> None:
    events = lab_month().inputs[:40]
    # without the filled records acknowledged faust would commit 12 (the end of 8-11) and never more
    assert asyncio.run(_committed_after_filled_hole(kafka_bootstrap, events)) == 40
