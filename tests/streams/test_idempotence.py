"""A lost acknowledgement on a real broker: the producer's own resend leaves no copy (idempotent producers).

The broker takes a produce request and writes it; its answer never reaches the producer (the
connection drops under it, as when a leader dies or a network blinks after the write). The producer
sends the batch again. An idempotent producer's resend carries the same producer id and sequence
numbers, and the broker answers it with the offsets it wrote the first time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.produce import ProduceRequest

from ledger.events import Event
from ledger.streams.config import WorkerConfig
from ledger.streams.driver import Worker
from ledger.streams.outbox import Outbox
from ledger.streams.publisher import AsyncPublisher, event_record
from tests.streams.harness import read_topic
from tests.streams.scenarios import lab_month
from tests.streams.test_publisher import topic_for_test

pytestmark = pytest.mark.kafka


def lose_the_first_acknowledgement(producer: Any) -> list[Any]:
    """Make the broker's answer to the producer's first produce request go missing; return it once lost."""
    send = producer.client.send
    lost: list[Any] = []

    async def answer_lost_once(node_id: int, request: Any, **kwargs: Any) -> Any:
        response = await send(node_id, request, **kwargs)  # the broker has written the batch
        if isinstance(request, ProduceRequest) and not lost:
            lost.append(response)
            raise KafkaConnectionError("connection dropped before the acknowledgement arrived")
        return response

    producer.client.send = answer_lost_once
    return lost


async def _outputs_through_an_outbox(make_producer: Callable[[], Any], topic: str) -> dict[str, int]:
    producer = make_producer()
    await producer.start()
    lost = lose_the_first_acknowledgement(producer)
    try:
        outbox = Outbox(producer)
        for i in range(300):
            await outbox.add(topic, 0, "demo", b"demo", f"output {i}".encode())
        await outbox.send()
        ends = await outbox.acked(30)
    finally:
        await producer.stop()
    assert lost, "the acknowledgement was not lost"
    return ends


def test_the_workers_outputs_resent_after_a_lost_acknowledgement_land_once(kafka_bootstrap: str) -> None:
    topic = topic_for_test(kafka_bootstrap)
    ends = asyncio.run(_outputs_through_an_outbox(Worker(WorkerConfig(kafka_bootstrap))._new_producer, topic))
    records = read_topic(kafka_bootstrap, topic, want=300, idle_s=1)
    assert [m.value for m in records] == [f"output {i}".encode() for i in range(300)]
    assert ends == {"demo": 300}  # the offsets the worker remembers are where the records are

    # the control: the same lost answer with a producer that is not idempotent writes the batch twice
    plain = topic_for_test(kafka_bootstrap)
    def control() -> AIOKafkaProducer:
        return AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", enable_idempotence=False)

    asyncio.run(_outputs_through_an_outbox(control, plain))
    assert len(read_topic(kafka_bootstrap, plain, want=600, idle_s=1)) == 600


async def _publish_losing_an_acknowledgement(bootstrap: str, topic: str, spool: Any, events: list[Event]) -> int:
    publisher = AsyncPublisher(bootstrap, spool, topic=topic)
    lost = lose_the_first_acknowledgement(await publisher._ensure_producer())
    try:
        result = await publisher.publish(events)
    finally:
        await publisher.close()
    assert lost, "the acknowledgement was not lost"
    assert result.spooled == 0, result
    return result.sent


def test_a_publish_resent_after_a_lost_acknowledgement_lands_once(kafka_bootstrap: str, tmp_path: Any) -> None:
    topic = topic_for_test(kafka_bootstrap)
    events = lab_month().inputs[:500]
    sent = asyncio.run(_publish_losing_an_acknowledgement(kafka_bootstrap, topic, tmp_path / "spool", events))
    assert sent == len(events)
    records = read_topic(kafka_bootstrap, topic, want=len(events), idle_s=1)
    assert [(m.key, m.value) for m in records] == [event_record(e) for e in events]
