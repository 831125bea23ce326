"""Read records of one topic partition directly (checkpoints at assignment, the resume check, outputs already sent)."""

from __future__ import annotations

import time
from typing import Any

from ledger.errors import BrokerError
from ledger.streams.security import KafkaSecurity
from ledger.streams.topics import CHECKPOINT_MAX_BYTES

__all__ = ["PartitionReader"]


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
        gave before the read. A range asked for up to ``end`` waits for a high watermark below it: a newly
        elected leader's lags the old one's for a fetch round or two, and the records under it are not
        lost (only an offset past the log's end is, which the broker refuses as out of range).
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
        while True:
            try:
                batch = await c.getmany(tp, timeout_ms=50)
            except OffsetOutOfRangeError:
                return out
            out.extend(m for m in batch.get(tp, []) if end is None or m.offset < end)
            # only a high watermark says where the partition ends: a slow fetch is not an empty partition
            high = c.highwater(tp)
            if high is not None and await c.position(tp) >= (max(high, floor) if end is None else end):
                return out
            if time.monotonic() - started >= 30:
                raise BrokerError(f"{topic}/{partition}: offsets from {offset} not readable in 30 s")
