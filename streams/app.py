"""The faust worker: moves bytes between Kafka and ``DecisionService``; no business logic lives here.

Topics: ``gpuledger.events`` in; ``gpuledger.decisions`` (the core's outputs, same codec, key =
cluster, same partition as the input), ``gpuledger.deadletter`` (bad records, reason in headers)
out; two changelog-backed tables: ``clusters`` (one checkpoint per cluster) and ``occupancy``
(rolling allocated/unallocated GPU-seconds per budget node, a view for operators).

Crash safety (SIGKILL at any point, then restart, equals an uninterrupted run):

1. Inputs are consumed without automatic acks. Every ``checkpoint_every`` records (or
   ``checkpoint_interval_s``), the worker waits until every output sent so far is acknowledged,
   writes each changed cluster's checkpoint to the ``clusters`` changelog and waits for *that*
   acknowledgement, and only then acks the inputs the checkpoint covers. The committed input offset
   therefore never passes a durable checkpoint.
2. A checkpoint records the last input offset it reflects. After a restart faust restores the table
   from its changelog and resumes at the committed offset (at or before the checkpoint); records at
   or before the checkpoint's offset are skipped, the rest are processed again.
3. Processing again yields the same outputs with the same ids (the core is deterministic and names
   its outputs ``{cluster}/d{n}``). Before a restored cluster processes anything, the worker reads the
   decisions partition from the offset recorded in the checkpoint to its end and remembers the ids
   found there; those outputs are not sent again. Inputs are idempotent by ``event_id``.
4. Rebalances: on revocation the worker checkpoints (under the lock) before faust rejoins the group,
   then forgets the revoked clusters; it loads only clusters of its assigned partitions (the table
   also holds standby copies of other workers' partitions, stale once their owner moves on).

5. faust delivers partitions with holes (around an assignment it skips records, and it commits offsets
   it never delivered). The worker keeps each partition's next offset to apply and reads the records
   of a hole from the broker itself before going on (``_in_order``, ``_fill_tails``).

Dead letters: each bad record gets one letter across crashes (see the marks in ``_recall_deadletters``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.codec import decode
from ledger.core import Knobs
from ledger.errors import BrokerError, LedgerError
from ledger.events import Event
from streams.budget_metrics import BudgetGauges
from streams.deadletter import MARK_PREFIX, deadletter_headers, mark_key, parse_headers, source_of
from streams.metrics import WorkerMetrics
from streams.outbox import Outbox
from streams.security import KafkaSecurity
from streams.service import DecisionService, Outcome
from streams.snapshot import Serialisation
from streams.state import ClusterState
from streams.topics import WORKER_APP_ID, TopicNames
from streams.trace import OffsetTrace, ranges
from streams.wire import encode_record

__all__ = ["WorkerConfig", "WorkerRuntime", "build_app", "run_worker"]

log = logging.getLogger("gpuledger.worker")


@dataclass
class WorkerConfig:
    """Everything a worker needs; the CLI fills it from flags."""

    bootstrap: str
    knobs: Knobs = field(default_factory=Knobs)
    partitions: int = 4
    app_id: str = WORKER_APP_ID
    topic_prefix: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 6066
    checkpoint_every: int = 5000
    checkpoint_interval_s: float = 5.0
    checkpoint_fork: bool = True  # serialise checkpoints in a forked child (see streams.snapshot)
    timer_interval_s: float = 0.25
    idle_clock_rate: float = 1.0
    idle_after_s: float = 1.0
    data_dir: Path | None = None
    session_timeout_s: float = 6.0
    rebalance_timeout_s: float = 3.0
    fetch_max_wait_ms: int = 20
    tail_fill_after_s: float = 2.0  # a partition idle this long below its high watermark has its tail read directly
    batch_max: int = 1000
    batch_within_s: float = 0.005
    loglevel: str = "WARNING"
    trace_offsets: bool = False  # log offsets applied, checkpointed, acked, committed (streams.trace)
    replication_factor: int = 1
    security: KafkaSecurity = field(default_factory=KafkaSecurity.from_env)


class WorkerRuntime:
    """The glue between faust and the pure service: sends, checkpoints, acks, metrics."""

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
        self.last_checkpoint = time.monotonic()
        self.last_offset: dict[int, int] = {}
        self.started = time.monotonic()
        self.restored = False
        self.assigned: set[int] = set()  # partitions of the events topic this worker owns
        self.trace = OffsetTrace(cfg.trace_offsets)

    # -- plumbing ------------------------------------------------------------------------------
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

    async def shutdown(self) -> None:
        """Checkpoint what was processed (a graceful stop resumes without reprocessing), then stop sending."""
        async with self.lock:
            if self.producer is not None:
                with contextlib.suppress(Exception):
                    await self._settle()
                    if self.unacked or self.service.dirty:
                        await self._checkpoint()
        await self.stop_producer()

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

    # -- restart: recognise outputs already on the decisions topic ------------------------------
    async def _prepare(self, cluster: str, partition: int) -> None:
        st = self.service.state(cluster, partition)
        self.trace.emit("restored", cluster=cluster, partition=st.partition, state=st.offset)
        st.suppress = await self._emitted_since(cluster, st.partition, st.decisions_next)
        if st.suppress:
            log.warning("cluster %s: %d output(s) already emitted, not sent again", cluster, len(st.suppress))

    async def _emitted_since(self, cluster: str, partition: int, offset: int) -> set[str]:
        key = cluster.encode()
        found: set[str] = set()
        for msg in await self._read_to_end(self.topics.decisions, partition, offset):
            if msg.key == key and msg.value:
                with contextlib.suppress(LedgerError):
                    found.add(decode(msg.value).event_id)
        return found

    async def _read_to_end(self, topic: str, partition: int, offset: int) -> list[Any]:
        """Return the records of one partition from ``offset`` to its end."""
        return await self._read_range(topic, partition, offset, None)

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

    async def restore_all(self) -> None:
        """Load the checkpoint of every cluster this worker owns (so timers run for it and its views are current).

        Only clusters of assigned partitions: the table also holds standby copies of other workers'
        partitions, which are stale the moment their owner processes another record. Loading one would
        let this worker checkpoint it over its owner's newer checkpoint, and keep its stale state in
        memory for when the partition moves here (resuming at the owner's committed offset, past records
        the stale state never saw).
        """
        marks: dict[int, tuple[int, int]] = {}
        for cluster, blob in list(self.clusters.data.items()):
            if cluster in self.service.states or blob is None:
                continue
            if str(cluster).startswith(MARK_PREFIX):
                dl_offset, input_offset = bytes(blob).split()
                marks[int(str(cluster)[len(MARK_PREFIX) :])] = (int(dl_offset), int(input_offset))
                continue
            partition = ClusterState.partition_of(bytes(blob))
            if partition not in self.assigned:
                continue
            await self._prepare(str(cluster), partition)
            self.service.dirty.add(str(cluster))
        await self._recall_deadletters({p: m for p, m in marks.items() if p in self.assigned})
        self.restored = True

    async def _recall_deadletters(self, marks: dict[int, tuple[int, int]]) -> None:
        """Find the letters of owned partitions already on the dead-letter topic past their marks (not sent again).

        A bad record at or before its partition's marked input offset was dead-lettered before that
        checkpoint (the consumer may resume before it: offsets are committed after checkpoints, not with
        them); after it, its letter may or may not be there, so the topic is read from the marked offset.
        A partition without a mark never had a checkpoint: its letters are looked for from the start.
        """
        self.dl_marked.update(marks)
        if not self.assigned:
            return
        start = min(marks.get(p, (0, -1))[0] for p in self.assigned)
        prefix = f"{self.topics.events}/"
        found: set[str] = set()
        letters = await self._read_to_end(self.topics.deadletter, 0, start)
        # letters sent from now on land after these: a mark at this offset finds them
        self.dl_end = max(self.dl_end, start, *(m.offset + 1 for m in letters[-1:]))
        for msg in letters:
            source = parse_headers(msg.headers or ()).get("source", "")
            if source.startswith(prefix) and int(source.split("/")[-2]) in self.assigned:
                found.add(source)
        self.dl_suppress = found
        if found:
            log.warning("%d dead letter(s) already on %s, not sent again", len(found), self.topics.deadletter)

    # -- rebalances -----------------------------------------------------------------------------
    async def on_assigned(self, partitions: set[int]) -> None:
        """Take the partitions the group gave this worker; their clusters load at the next timer tick."""
        async with self.lock:
            self._trace_commits()
            try:
                await self._settle()
            except Exception as exc:  # its inputs stay unacked: the next checkpoint covers them
                log.warning("checkpoint failed: %s: %s", type(exc).__name__, exc)
            self.assigned = set(partitions)
            self._forget({st.partition for st in self.service.states.values()} - self.assigned)
            self.restored = False
            self.expect.clear()  # faust resumes every assigned partition at its committed offset
            self.arrived = dict.fromkeys(self.assigned, time.monotonic())

    async def on_revoked(self, partitions: set[int]) -> None:
        """Hand partitions over: make what was processed durable, then forget their clusters.

        Runs under the lock, so no record is half-processed, and before faust rejoins the group, so
        the next owner's assignment (and its restore of the changelog) comes after these writes.
        A checkpoint here means the next owner resumes exactly where this worker stopped; if it
        fails, the outputs sent so far are still awaited, so the next owner finds them on the
        decisions topic and does not send them again when it processes those records anew.
        """
        async with self.lock:
            if self.producer is not None:
                try:
                    await self._settle()
                    if self.unacked or self.service.dirty or (self.outbox and self.outbox.sent):
                        await self._checkpoint()
                except Exception as exc:  # the next owner reprocesses from the last durable checkpoint
                    log.warning("checkpoint on revocation failed: %s: %s", type(exc).__name__, exc)
                    if self.outbox is not None:
                        await self.outbox.settle()
            # acks of records whose state is dropped would let the offset pass what any checkpoint holds
            self.unacked = [ev for ev in self.unacked if ev.message.partition not in partitions]
            self.filled = [r for r in self.filled if r.partition not in partitions]
            self.assigned -= partitions
            self._forget(partitions)
            self.restored = False

    def _forget(self, partitions: set[int]) -> None:
        """Drop the clusters of partitions this worker no longer owns, and their gauges (the new owner exports them)."""
        if not partitions:
            return
        self.service.forget_partitions(partitions)
        self.gauges.forget_partitions(partitions)
        for partition in partitions:
            self.last_offset.pop(partition, None)
            self.dl_marked.pop(partition, None)
            self.expect.pop(partition, None)
            self.arrived.pop(partition, None)
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(str(partition))

    # -- the agent's body --------------------------------------------------------------------------
    async def on_batch(self, events: list[Any]) -> None:
        """Process a batch of input records under the lock; await its outputs once; checkpoint when due.

        The inputs are not acked here: they are acked by the checkpoint that covers them.
        """
        async with self.lock:
            t0 = time.perf_counter()
            core0 = self.service.core_s
            if self.producer is None:
                await self.start_producer()
            if not self.restored:
                await self.restore_all()
            messages, skipped = await self._in_order([ev.message for ev in events])
            kinds = await self._apply(messages)
            if skipped:
                kinds["replayed"] = kinds.get("replayed", 0) + skipped
            self.unacked.extend(events)
            for kind, n in kinds.items():
                self.metrics.records.labels(kind).inc(n)
            self.metrics.events_seen += len(events)
            if len(self.unacked) >= self.cfg.checkpoint_every and not self.checkpointing:
                await self._checkpoint(wait=False)
            busy = time.perf_counter() - t0
            self.metrics.latency.observe(busy)
            self.metrics.busy_seconds.inc(busy)
            self.metrics.core_seconds.inc(self.service.core_s - core0)

    def _trace_batch(self, messages: list[Any], outcomes: list[Outcome]) -> None:
        by_cluster: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
        for msg, outcome in zip(messages, outcomes, strict=True):
            if outcome.cluster is None:
                continue
            applied, replayed = by_cluster.setdefault((outcome.cluster, msg.partition), ([], []))
            (replayed if outcome.kind == "replayed" else applied).append(msg.offset)
        for (cluster, partition), (applied, replayed) in by_cluster.items():
            self.trace.emit(
                "applied", cluster=cluster, partition=partition, offsets=ranges(applied), replayed=ranges(replayed)
            )

    def _trace_commits(self) -> None:
        """Log every input offset faust commits (once: wraps the consumer's commit call)."""
        consumer = self.app.consumer
        if not self.trace.enabled or getattr(consumer, "_gpuledger_traced", False):
            return
        commit = consumer._commit
        events = self.topics.events

        async def traced(offsets: Any) -> bool:
            done: bool = await commit(offsets)
            for tp, offset in offsets.items():
                if tp.topic == events:
                    self.trace.emit("commit", partition=tp.partition, offset=offset, done=done)
            return done

        consumer._commit = traced
        consumer._gpuledger_traced = True

    async def _apply(self, messages: list[Any]) -> dict[str, int]:
        """Process records in order, send what they produce and await it; return how many of each outcome."""
        for msg in messages:
            if msg.key and (cluster := bytes(msg.key).decode("utf-8", "replace")) not in self.service.states:
                await self._prepare(cluster, msg.partition)
        outcomes = self.service.process_batch([(m.value, m.key, m.partition, m.offset) for m in messages])
        if self.trace.enabled:
            self._trace_batch(messages, outcomes)
        kinds: dict[str, int] = {}
        late = 0
        for msg, outcome in zip(messages, outcomes, strict=True):
            kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
            late += outcome.late
            if outcome.kind == "deadletter" or outcome.emit:
                await self._deliver(outcome, msg)
            self.last_offset[msg.partition] = msg.offset
        await self._await_sent()
        if late:
            self.metrics.late.inc(late)
        return kinds

    def _next_offset(self, partition: int) -> int | None:
        """Return the next input offset of a partition to process, if known.

        After an assignment it is the one after the partition's mark (the last input offset the durable
        checkpoints cover); then the one after the last record processed.
        """
        nxt = self.expect.get(partition)
        if nxt is None:
            covered = self.dl_marked.get(partition, (0, -1))[1]
            nxt = covered + 1 if covered >= 0 else None
        return nxt

    async def _in_order(self, taken: list[Any]) -> tuple[list[Any], int]:
        """Return the records to process, each partition's in unbroken offset order, and how many were skipped.

        faust does not deliver a partition without holes: around an assignment it can skip records
        (seen: a few to a dozen records after the first batch of a restarted worker), and it commits
        offsets it never delivered (a jump in a fetch counts as acknowledged), so the committed offset
        may also pass the last checkpoint. Either way the records no state reflects would be lost. A
        record beyond the next expected offset therefore has the missing ones read from the broker first
        (a consumer of its own: seeking faust's consumer while its fetcher runs moves the hole instead);
        a record before it was processed already (or is covered by the durable checkpoints) and is skipped.
        """
        out: list[Any] = []
        skipped = 0
        now = time.monotonic()
        for msg in taken:
            p = msg.partition
            nxt = self._next_offset(p)
            self.arrived[p] = now
            if nxt is not None and msg.offset < nxt:
                skipped += 1
                continue
            if nxt is not None and msg.offset > nxt:
                missing = await self._read_range(msg.topic, p, nxt, msg.offset)
                log.warning("partition %d: offsets %d-%d were not delivered: read %d from the broker",
                            p, nxt, msg.offset - 1, len(missing))
                self.trace.emit("filled", partition=p, offsets=ranges(m.offset for m in missing))
                self.filled.extend(missing)
                out.extend(missing)
            out.append(msg)
            self.expect[p] = msg.offset + 1
        return out, skipped

    async def _fill_tails(self) -> None:
        """Process records faust left undelivered at a partition's end (nothing after them reveals the hole)."""
        from faust.types import TP

        now = time.monotonic()
        for p in sorted(self.assigned):
            nxt = self._next_offset(p)
            if nxt is None or now - self.arrived.get(p, now) < self.cfg.tail_fill_after_s:
                continue
            high = None
            with contextlib.suppress(Exception):  # no fetch yet, or the partition is no longer assigned
                high = self.app.consumer.highwater(TP(self.topics.events, p))
            if high is None or high <= nxt:
                continue
            missing = await self._read_range(self.topics.events, p, nxt, high)
            if missing:
                log.warning(
                    "partition %d: offsets %d-%d were not delivered: read %d from the broker", p, nxt, high - 1,
                    len(missing),
                )
                self.trace.emit("filled", partition=p, offsets=ranges(m.offset for m in missing))
                self.filled.extend(missing)
                self.expect[p] = missing[-1].offset + 1
                kinds = await self._apply(missing)
                for kind, n in kinds.items():
                    self.metrics.records.labels(kind).inc(n)
            self.arrived[p] = now

    async def _deliver(self, outcome: Outcome, msg: Any) -> None:
        if outcome.kind == "deadletter":
            if msg.offset <= self.dl_marked.get(msg.partition, (0, -1))[1]:
                return  # dead-lettered before the last checkpoint
            if self.dl_suppress and source_of(msg.topic, msg.partition, msg.offset) in self.dl_suppress:
                return  # dead-lettered after it, before a crash
            headers = deadletter_headers(outcome.reason or "unknown", msg.topic, msg.partition, msg.offset)
            # partition 0: the topic has one, and the marks in the table are offsets of that partition
            assert self.outbox is not None
            await self.outbox.add(self.topics.deadletter, 0, "", msg.key, msg.value or b"", headers)
            self.metrics.deadletters.inc()
        elif outcome.emit and outcome.cluster is not None:
            await self._emit(outcome.cluster, msg.partition, outcome.emit)

    async def _emit(self, cluster: str, partition: int, events: list[Event]) -> None:
        assert self.outbox is not None
        key = cluster.encode()
        add = self.outbox.add
        topic = self.topics.decisions
        for e in events:
            await add(topic, partition, cluster, key, encode_record(e))
        self.metrics.decisions.inc(len(events))
        self.metrics.outputs_sent += len(events)

    async def _await_sent(self) -> None:
        """Send what is queued, wait for every output sent so far to be acknowledged; note how far outputs reach."""
        if self.outbox is None:
            return
        await self.outbox.send()
        states = self.service.states
        for tag, end in (await self.outbox.acked()).items():
            if not tag:  # dead letters
                self.dl_end = max(self.dl_end, end)
                continue
            st = states.get(tag)
            if st is not None and end > st.decisions_next:
                st.decisions_next = end

    # -- timer -----------------------------------------------------------------------------------
    async def on_timer(self) -> None:
        """Advance due wake-ups, refresh gauges, checkpoint when the last one is old enough."""
        if not self.ready:
            return
        async with self.lock:
            if not self.restored:
                await self.restore_all()
            await self._fill_tails()
            for tick in self.service.due():
                await self._emit(tick.cluster, tick.partition, tick.emit)
            await self._await_sent()
            pending = self.unacked or self.filled or self.service.dirty
            due = time.monotonic() - self.last_checkpoint >= self.cfg.checkpoint_interval_s
            if pending and due and not self.checkpointing:
                await self._checkpoint(wait=False)
        self.metrics.sample_rates()
        self._sample_lag()

    def _sample_lag(self) -> None:
        from faust.types import TP

        for partition, offset in self.last_offset.items():
            with contextlib.suppress(Exception):
                high = self.app.consumer.highwater(TP(self.topics.events, partition))
                if high is not None:
                    self.metrics.lag.labels(str(partition)).set(max(0, high - offset - 1))

    # -- checkpoint --------------------------------------------------------------------------------
    async def _checkpoint(self, *, wait: bool = True) -> None:
        """Make outputs durable, then the changed checkpoints, then ack the inputs they cover (caller holds the lock).

        The states are frozen here (a forked child serialises them, see ``streams.snapshot``); writing
        them and acking the inputs they cover finishes in the background unless ``wait``. Checkpoints
        never overlap: the next one first waits for this one, so the changelog holds them in order.
        """
        await self._settle()
        t0 = time.perf_counter()
        await self._await_sent()
        states = self.service.take_dirty()
        covered, self.unacked = self.unacked, []
        filled, self.filled = self.filled, []
        marks = {}
        for p in sorted(self.assigned):
            # never lower: a restarted worker may redo records from well before its last mark
            marked_dl, marked_offset = self.dl_marked.get(p, (0, -1))
            mark = (max(self.dl_end, marked_dl), max(self.last_offset.get(p, -1), marked_offset))
            if self.dl_marked.get(p) != mark:
                marks[p] = mark
        frozen = [(st.cluster, st.partition, st.offset) for st in states]  # what the serialised states reflect
        job = Serialisation.start(states, in_process=not self.cfg.checkpoint_fork)
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)
        self.inflight = asyncio.ensure_future(self._finish_checkpoint(states, job, covered, filled, marks, frozen))
        if wait:
            await self._settle()

    @property
    def checkpointing(self) -> bool:
        """Return whether a checkpoint is still being written."""
        return self.inflight is not None and not self.inflight.done()

    async def _settle(self) -> None:
        """Wait for the checkpoint in flight, if any; raise what it raised."""
        task, self.inflight = self.inflight, None
        if task is not None:
            await task

    async def _finish_checkpoint(
        self,
        states: list[ClusterState],
        job: Serialisation,
        covered: list[Any],
        filled: list[Any],
        marks: dict[int, tuple[int, int]],
        frozen: list[tuple[str, int, int]],
    ) -> None:
        try:
            blobs = await job.result()
            views = []
            for st, blob in zip(states, blobs, strict=True):
                # one checkpoint at a time, each acknowledged before the next: a batch of one record is also
                # immune to brokers that report a batch's base offset as the partition's end (faust would
                # stop restoring before the rest of that batch)
                await self._drain([await self._changelog(self.clusters, st.partition, st.cluster, blob)])
                self.clusters.data[st.cluster] = blob  # the local view; the changelog write is the durable copy
                views.extend(await self._publish_occupancy(st))
                self.gauges.update(st)
            # after the states: a mark never claims more than the checkpoints before it hold (see dl_marked)
            for partition, mark in marks.items():
                value = b"%d %d" % mark
                await self._drain([await self._changelog(self.clusters, partition, mark_key(partition), value)])
                self.clusters.data[mark_key(partition)] = value
                self.dl_marked[partition] = mark
            await self._drain(views)
        except BaseException:
            # nothing covered is acked: mark the states changed again so the next checkpoint covers them
            self.service.dirty.update(st.cluster for st in states if st.cluster in self.service.states)
            self.unacked[:0] = covered
            self.filled[:0] = filled
            raise
        for cluster, partition, offset in frozen:
            acked = ranges(
                [ev.message.offset for ev in covered if ev.message.partition == partition]
                + [r.offset for r in filled if r.partition == partition]
            )
            self.trace.emit("checkpoint", cluster=cluster, partition=partition, state=offset, acked=acked)
        for event in covered:
            await self.stream.ack(event)
        self._ack_filled(filled)
        self.last_checkpoint = time.monotonic()
        self.metrics.checkpoints.inc()

    def _ack_filled(self, records: list[Any]) -> None:
        """Acknowledge to faust's consumer the records of holes the worker read and applied itself.

        faust commits the end of the first unbroken run of acknowledged offsets after its committed one.
        Records it delivered but its stream skipped (around a rebalance) are never acknowledged by the
        agent, so without these acks the committed offset would stay at the first hole for the rest of
        the process, and every restart would reprocess from there.
        """
        if not records:
            return
        from faust.types import TP, Message

        consumer = self.app.consumer
        for r in records:
            tp = TP(r.topic, r.partition)
            consumer.ack(
                Message(
                    r.topic, r.partition, r.offset, r.timestamp / 1000, r.timestamp_type, list(r.headers or ()),
                    r.key, r.value, r.checksum, tp=tp,
                )
            )

    async def _drain(self, writes: list[Any]) -> None:
        # faust's producer buffer drains by itself only inside a stream's iteration: drain it here too
        while not all(fut.done() for fut in writes):
            await self.app.producer.flush()
            await asyncio.sleep(0)
        for fut in writes:
            fut.result()

    async def _changelog(self, table: Any, partition: int, key: str, value: bytes) -> Any:
        """Queue one table entry for its changelog; return the future of its acknowledgement."""
        return table.send_changelog(partition, key, value)

    async def _publish_occupancy(self, st: ClusterState) -> list[Any]:
        writes = []
        as_of = st.occupancy.now_us
        for path, occ in st.occupancy.totals(as_of).items():
            key = f"{st.cluster}|{path}"
            value = json.dumps(
                {"allocated_gpu_s": occ.allocated_gpu_s, "unallocated_gpu_s": occ.unallocated_gpu_s, "as_of_us": as_of}
            ).encode()
            if self.occupancy.data.get(key) != value:
                self.occupancy.data[key] = value
                writes.append(await self._changelog(self.occupancy, st.partition, key, value))
        return writes

    def occupancy_view(self) -> dict[str, dict[str, Any]]:
        """Return the occupancy table as {cluster|path: values}."""
        return {str(k): json.loads(bytes(v)) for k, v in sorted(self.occupancy.data.items())}


def build_app(cfg: WorkerConfig) -> tuple[Any, WorkerRuntime]:
    """Return the faust app and its runtime for ``cfg`` (topics must exist: ``streams.topics.ensure_topics``)."""
    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    data_dir = cfg.data_dir or Path(tempfile.mkdtemp(prefix="gpuledger-worker-"))
    app: Any = faust.App(
        cfg.app_id,
        broker=f"kafka://{cfg.bootstrap}",
        store="memory://",
        datadir=str(data_dir),
        topic_partitions=cfg.partitions,
        topic_allow_declare=False,
        topic_disable_leader=True,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=16 * 1024 * 1024,
        broker_session_timeout=cfg.session_timeout_s,
        broker_rebalance_timeout=cfg.rebalance_timeout_s,
        broker_heartbeat_interval=min(1.0, cfg.session_timeout_s / 3),
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        web_enabled=True,
        web_bind=cfg.http_host,
        web_host=cfg.http_host,
        web_port=cfg.http_port,
        **cfg.security.faust_settings(),
    )
    events = app.topic(TopicNames(cfg.topic_prefix).events, key_type=bytes, value_type=bytes, partitions=cfg.partitions)
    clusters = app.Table("clusters", default=None, partitions=cfg.partitions, key_type=str, value_type=bytes)
    occupancy = app.Table("occupancy", default=None, partitions=cfg.partitions, key_type=str, value_type=bytes)
    rt = WorkerRuntime(cfg, app, clusters, occupancy)

    async def decide(stream: Any) -> None:
        rt.stream = stream
        # batches: faust's per-record path is the worker's floor, so everything after it runs once per batch
        # a noack clone: noack_take alone turns acks off only while it runs, and a record acked by faust
        # itself would let the committed offset pass the last checkpoint
        async for events in stream.noack().noack_take(cfg.batch_max, within=cfg.batch_within_s):
            await rt.on_batch(events)

    async def tick() -> None:
        await rt.on_timer()

    async def on_revoked(_app: Any, revoked: Any = (), **_: Any) -> None:
        await rt.on_revoked({tp.partition for tp in revoked if tp.topic == rt.topics.events})

    async def on_assigned(_app: Any, assigned: Any = (), **_: Any) -> None:
        await rt.on_assigned({tp.partition for tp in assigned if tp.topic == rt.topics.events})

    async def producer_task() -> None:
        async with rt.lock:
            await rt.start_producer()

    async def healthz(web: Any, request: Any) -> Any:
        return web.text("ok\n")

    async def readyz(web: Any, request: Any) -> Any:
        return web.text("ready\n") if rt.ready else web.text("not ready\n", status=503)

    async def metrics(web: Any, request: Any) -> Any:
        return web.bytes(generate_latest(rt.metrics.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    async def occupancy_page(web: Any, request: Any) -> Any:
        return web.json(rt.occupancy_view())

    # registered with calls rather than decorators: faust's decorators are untyped
    app.agent(events, name="decide")(decide)
    app.timer(cfg.timer_interval_s)(tick)
    app.on_partitions_revoked.connect(on_revoked)
    app.on_partitions_assigned.connect(on_assigned)
    app.task(producer_task)
    pages = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics, "/occupancy": occupancy_page}
    for path, view in pages.items():
        app.page(path)(view)
    return app, rt


def _cap_fetch_wait(ms: int) -> None:
    """Cap how long a fetch may wait at the broker (faust hard-codes 1,500 ms).

    A broker that answers a fetch only when its wait expires (tansu does, even when records arrive in
    the meantime) would otherwise add up to 1.5 s to every decision's latency; against Apache Kafka
    a short wait only costs a few idle polls per second.
    """
    from aiokafka import AIOKafkaConsumer

    original = AIOKafkaConsumer.__init__
    if getattr(original, "_gpuledger_capped", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["fetch_max_wait_ms"] = min(int(kwargs.get("fetch_max_wait_ms", 500)), ms)
        original(self, *args, **kwargs)

    init._gpuledger_capped = True  # type: ignore[attr-defined]
    AIOKafkaConsumer.__init__ = init


def run_worker(cfg: WorkerConfig) -> int:
    """Create the topics, then run the worker until SIGTERM/SIGINT; return the exit code."""
    import faust

    from streams.topics import ensure_topics_sync, worker_topics

    topics = worker_topics(cfg.partitions, cfg.app_id, cfg.topic_prefix)
    ensure_topics_sync(cfg.bootstrap, topics, replication_factor=cfg.replication_factor, security=cfg.security)
    # faust fetches in a thread and hands records to the event loop; with the default 5 ms GIL switch
    # interval every hand-over can stall the loop that long (measured: ~500 records/s instead of thousands).
    sys.setswitchinterval(0.0002)
    _cap_fetch_wait(cfg.fetch_max_wait_ms)
    app, rt = build_app(cfg)

    async def on_shutdown(_app: Any, **_: Any) -> None:
        await rt.shutdown()

    app.on_before_shutdown.connect(on_shutdown)

    worker = faust.Worker(app, loglevel=cfg.loglevel, quiet=True)
    worker.execute_from_commandline()
    return 0

