"""The SDK on Kafka: the same calls, published through the streams publisher to a real broker."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("ledger.streams.publisher")  # the Kafka path needs the streams package

from ledger import Ledger
from ledger import events as ev
from ledger.codec import decode

pytestmark = pytest.mark.kafka
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


async def consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes, ev.Event]]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: list[tuple[bytes, ev.Event]] = []
    try:
        async with asyncio.timeout(30):
            async for msg in consumer:
                out.append((msg.key, decode(msg.value)))
                if len(out) == count:
                    break
    finally:
        await consumer.stop()
    return out


def test_a_schedulers_calls_reach_the_events_topic_in_order_keyed_by_cluster(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    from ledger.streams.topics import ensure_topics_sync

    topic = f"test-sdk-{uuid.uuid4().hex[:8]}.gpuledger.events"
    ensure_topics_sync(kafka_bootstrap, {topic: 1})
    with Ledger("lab", bootstrap=kafka_bootstrap, spool_dir=tmp_path / "spool", topic=topic) as ledger:
        sent = [
            ledger.submit("j1", budget="ai2/olmo", user="ada", gpus=8, min_runtime_s=600, time=T0),
            ledger.start("j1", nodes=["lab-n001"], time=T0 + timedelta(minutes=1)),
            ledger.preempt("j1", "fair_share", time=T0 + timedelta(minutes=30)),
            ledger.requeue("j1", time=T0 + timedelta(minutes=30)),
            ledger.start("j1", nodes=["lab-n002"], time=T0 + timedelta(minutes=40)),
            ledger.complete("j1", time=T0 + timedelta(minutes=90)),
        ]
        assert ledger.flush(wait_s=10) == 0  # nothing left in the spool
    got = asyncio.run(consume(kafka_bootstrap, topic, len(sent)))
    assert [key for key, _ in got] == [b"lab"] * len(sent)
    assert [e for _, e in got] == sent
