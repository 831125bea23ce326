"""Read records of one topic partition directly (checkpoints at assignment, the resume check, outputs already sent)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ledger.errors import BrokerError
from ledger.streams.security import KafkaSecurity
from ledger.streams.topics import CHECKPOINT_MAX_BYTES

__all__ = ["PartitionReader"]

HIGH_WATERMARK_WAIT_S = 5.0  # how long a new leader's high watermark may trail a record known to be there


class PartitionReader:
    """One group-less consumer, assigned to one partition per read."""

    def __init__(
        self, bootstrap: str, security: KafkaSecurity, fetch_max_wait_ms: int, request_timeout_ms: int = 40_000
    ):
        self.bootstrap = bootstrap
        self.security = security
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.request_timeout_ms = request_timeout_ms
        self.consumer: Any = None

    async def start(self) -> None:
        """Connect."""
        from aiokafka import AIOKafkaConsumer

        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, auto_offset_reset="none",
            fetch_max_wait_ms=self.fetch_max_wait_ms, request_timeout_ms=self.request_timeout_ms,
            max_partition_fetch_bytes=CHECKPOINT_MAX_BYTES,
            **self.security.aiokafka_kwargs(),
        )
        await self.consumer.start()

    async def stop(self) -> None:
        """Disconnect."""
        if self.consumer is not None:
            await self.consumer.stop()

    async def latest(self, topic: str, partition: int) -> int:
        """Return a partition's latest offset by ListOffsets (its end)."""
        from aiokafka import TopicPartition

        tp = TopicPartition(topic, partition)
        self.consumer.assign([tp])
        await self.consumer.seek_to_end(tp)
        offset: int = await self.consumer.position(tp)
        return offset

    async def read(self, topic: str, partition: int, offset: int, end: int | None = None) -> list[Any]:
        """Return the records from ``offset`` up to ``end`` (excluded) or the partition's end; [] if out of range.

        The end is the high watermark fetch responses carry, and at least the latest offset ListOffsets
        gave before the read.
        """
        from aiokafka import TopicPartition
        from aiokafka.errors import OffsetOutOfRangeError

        tp = TopicPartition(topic, partition)
        c = self.consumer
        # to the end: at least where ListOffsets says it is (a leader just elected answers that only once
        # its high watermark covers what it holds, while its fetch answers may still carry a lower one)
        floor = await self.latest(topic, partition) if end is None else 0
        c.assign([tp])
        c.seek(tp, offset)
        out: list[Any] = []
        started = time.monotonic()
        short_since: float | None = None  # when the partition first answered that it ends before ``end``
        while True:
            try:
                batch = await c.getmany(tp, timeout_ms=50)
            except OffsetOutOfRangeError:
                short_since = short_since or time.monotonic()
                if end is None or time.monotonic() - short_since >= HIGH_WATERMARK_WAIT_S:
                    return out
                await asyncio.sleep(0.1)  # a record known to be there: asked again for a moment, as below
                c.seek(tp, offset)
                out = []
                continue
            out.extend(m for m in batch.get(tp, []) if end is None or m.offset < end)
            # only a high watermark says where the partition ends: a slow fetch is not an empty partition
            high = c.highwater(tp)
            if high is not None and await c.position(tp) >= (max(high, floor) if end is None else min(end, high)):
                # A leader just elected answers with its own high watermark, which trails the log it holds
                # until its followers fetch again: a record asked for by offset (``end``) that lies above
                # it is waited for a moment before the partition is taken to end there.
                if end is None or high >= end:
                    return out
                short_since = short_since or time.monotonic()  # the first answer that ends before it
                if time.monotonic() - short_since >= HIGH_WATERMARK_WAIT_S:
                    return out
                await asyncio.sleep(0.1)
            if time.monotonic() - started >= 30:
                raise BrokerError(f"{topic}/{partition}: offsets from {offset} not readable in 30 s")
