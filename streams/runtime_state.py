"""The worker runtime's state and plumbing: what it holds, its output producer, and reads of a partition.

The runtime is split by concern into parts that share this state: ``streams.batches`` (the agent's
body: process a batch, send its outputs), ``streams.holes`` (records faust never delivered),
``streams.checkpoints`` (durable checkpoints, then acks), ``streams.restore`` (what a restart finds)
and ``streams.runtime`` (rebalances, the timer, shutdown), which puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ledger.errors import BrokerError
from streams.budget_metrics import BudgetGauges
from streams.config import WorkerConfig
from streams.metrics import WorkerMetrics
from streams.outbox import Outbox
from streams.service import DecisionService
from streams.topics import TopicNames
from streams.trace import OffsetTrace

__all__ = ["RuntimeState"]


class RuntimeState:
    """What the parts of the worker runtime share: settings, tables, the service, the producer, offsets."""

    def __init__(self, cfg: WorkerConfig, app: Any, clusters: Any, occupancy: Any):
        self.cfg = cfg
        self.topics = TopicNames(cfg.topic_prefix)
        self.app = app
        self.clusters = clusters
        self.occupancy = occupancy
        self.metrics = WorkerMetrics()
        self.gauges = BudgetGauges(self.metrics.registry)
        self.service = DecisionService(
            cfg.knobs, loader=self._load, idle_clock_rate=cfg.idle_clock_rate, idle_after_s=cfg.idle_after_s
        )
        self.lock = asyncio.Lock()
        self.producer: Any = None
        self.outbox: Outbox | None = None  # outputs queued and sent, per partition batch (with the producer)
        self.unacked: list[Any] = []  # input events covered by the next checkpoint
        # records of holes in faust's delivery, read from the broker and applied, covered by the next checkpoint:
        # acked to faust's consumer with it, or faust's committed offset would stay at the hole (see _ack_filled)
        self.filled: list[Any] = []
        self.stream: Any = None  # the agent's stream (acks go through it)
        self.inflight: asyncio.Future[None] | None = None  # the checkpoint being written, if any
        self.dl_end = 0  # dead-letter offset after the last letter known sent (or found at a restore)
        # input partition -> (dead-letter offset, input offset) last written to the table: the partition's
        # bad records up to that input offset have their letters; later ones' letters start at that offset
        self.dl_marked: dict[int, tuple[int, int]] = {}
        self.dl_suppress: set[str] = set()  # sources already dead-lettered, found at a restore: not sent again
        # input partition -> the next offset to process: faust may deliver a partition with holes (see _in_order)
        self.expect: dict[int, int] = {}
        self.arrived: dict[int, float] = {}  # input partition -> monotonic time its last record was taken
        # input partition -> its first offset on the broker, for owned partitions no checkpoint covers yet
        # (nothing else says where their records begin: see streams.holes)
        self.log_start: dict[int, int] = {}
        self.last_checkpoint = time.monotonic()
        self.last_offset: dict[int, int] = {}
        self.started = time.monotonic()
        self.restored = False
        self.assigned: set[int] = set()  # partitions of the events topic this worker owns
        self.trace = OffsetTrace(cfg.trace_offsets)

    def _load(self, cluster: str) -> bytes | None:
        blob = self.clusters.data.get(cluster)
        return bytes(blob) if blob is not None else None

    async def start_producer(self) -> None:
        """Start the output producer (acks=all; not idempotent: some brokers refuse InitProducerId)."""
        from aiokafka import AIOKafkaProducer

        if self.producer is not None:
            return

        # aiokafka's send() formats a debug record per message unless its logger is told otherwise
        # (measured ~50 us per output when the worker's logging setup left it at DEBUG)
        logging.getLogger("aiokafka").setLevel(max(logging.getLevelName(self.cfg.loglevel.upper()), logging.INFO))
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.cfg.bootstrap,
            acks="all",
            enable_idempotence=False,
            linger_ms=0,  # outputs are awaited once per batch: whatever a batch queued goes out at once
            max_batch_size=512 * 1024,  # a batch of inputs' outputs to one partition usually fits one record batch
            **self.cfg.security.aiokafka_kwargs(),
        )
        await self.producer.start()
        self.outbox = Outbox(self.producer)

    async def stop_producer(self) -> None:
        """Flush and stop the output producer."""
        if self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()
            self.producer = None
            self.outbox = None

    @property
    def ready(self) -> bool:
        """Return whether the worker has recovered its tables, owns partitions and can send."""
        recovery = getattr(self.app.tables, "recovery", None)
        recovered = recovery is not None and recovery.completed.is_set()
        return bool(recovered and not self.app.rebalancing and self.producer is not None)

    async def _read_to_end(self, topic: str, partition: int, offset: int) -> list[Any]:
        """Return the records of one partition from ``offset`` to its end."""
        return await self._read_range(topic, partition, offset, None)

    async def _log_starts(self, topic: str, partitions: set[int]) -> dict[int, int]:
        """Return the first offset each partition of ``topic`` still holds on the broker."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        if not partitions:
            return {}
        consumer = AIOKafkaConsumer(bootstrap_servers=self.cfg.bootstrap, **self.cfg.security.aiokafka_kwargs())
        await consumer.start()
        try:
            found = await consumer.beginning_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
        finally:
            await consumer.stop()
        return {tp.partition: offset for tp, offset in found.items()}

    async def _read_range(self, topic: str, partition: int, offset: int, end: int | None) -> list[Any]:
        """Return the records of one partition from ``offset`` up to ``end`` (excluded), or to its end if None."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        tp = TopicPartition(topic, partition)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.cfg.bootstrap, enable_auto_commit=False,
            fetch_max_wait_ms=self.cfg.fetch_max_wait_ms, **self.cfg.security.aiokafka_kwargs(),
        )
        await consumer.start()
        out: list[Any] = []
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            # read up to the high watermark that fetch responses carry, not end_offsets(): some Kafka-protocol
            # brokers (tansu) answer ListOffsets with the last *batch's* base offset + 1. Without a high
            # watermark, read until the partition stays quiet for 300 ms. A given end is waited for (60 s at most).
            quiet_since = started = time.monotonic()
            while True:
                batch = await consumer.getmany(tp, timeout_ms=50)
                out.extend(m for m in batch.get(tp, []) if end is None or m.offset < end)
                high = consumer.highwater(tp) if end is None else end
                if high is not None and await consumer.position(tp) >= high:
                    break
                if batch:
                    quiet_since = time.monotonic()
                elif end is None and time.monotonic() - quiet_since >= 0.3:
                    break
                elif end is not None and time.monotonic() - started >= 60:
                    raise BrokerError(f"{topic}/{partition}: offsets {offset}-{end - 1} not readable in 60 s")
        finally:
            await consumer.stop()
        return out

    # -- provided by the other parts of the runtime (streams.batches, holes, checkpoints, restore) ------
    async def restore_all(self) -> None:
        """Load the checkpoint of every cluster this worker owns (``streams.restore``)."""
        raise NotImplementedError

    async def _prepare(self, cluster: str, partition: int) -> None:
        raise NotImplementedError

    async def _apply(self, messages: list[Any]) -> dict[str, int]:
        raise NotImplementedError

    async def _await_sent(self) -> None:
        raise NotImplementedError

    async def _in_order(self, taken: list[Any]) -> tuple[list[Any], int]:
        raise NotImplementedError

    def _ack_filled(self, records: list[Any]) -> None:
        raise NotImplementedError

    async def _checkpoint(self, *, wait: bool = True) -> None:
        raise NotImplementedError

    @property
    def checkpointing(self) -> bool:
        """Return whether a checkpoint is still being written (``streams.checkpoints``)."""
        raise NotImplementedError
