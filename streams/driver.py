"""The worker: a thin aiokafka consumer-group driver around the decision service (``streams.service``).

One consumer in the group ``--app-id`` reads ``gpuledger.events`` in batches (``getmany``); each batch
goes through the service, its outputs to ``gpuledger.decisions`` (same partition, key = cluster) and
bad records to ``gpuledger.deadletter``, sent and awaited once per batch. Every ``checkpoint_every``
inputs or ``checkpoint_interval_s`` the changed clusters' states and each partition's mark are written
to the compacted checkpoint topic (``streams.checkpoints``), then the offsets they cover are committed.

Assignment (the rebalance listener): the worker reads its partitions' checkpoints, seeks each partition
to its mark + 1 (no input before the last checkpoint is delivered again) and remembers the outputs and
dead letters already on their topics after the checkpoint, so a restart sends none of them twice.
Revocation: a checkpoint first, so the next owner resumes exactly here. The resume check: after each
assignment and whenever the consumer opened a new broker connection, before anything more is decided,
the record at each partition's last input offset must still be the one read there. A failed check, an
offset out of range or an acknowledgement offset that went backwards halts the worker: it stops
deciding, logs why, sets ``gpuledger_worker_halted`` and answers 503 on ``/readyz`` until it is
restarted by an operator.

Outages: start-up (topics, connections) and restores are retried with backoff while the broker does not
answer; outputs that go unacknowledged make the worker drop what it decided since its checkpoints and
restore its partitions from them, as a restart would. A stop is honoured in every phase (``run``).
The facts of one instant and when the worker takes an instant as complete: ``streams.service``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiokafka.errors import KafkaError

from ledger.codec import decode, encode
from ledger.errors import BrokerError, LedgerError
from ledger.events import Event
from ledger.streams.budget_metrics import BudgetGauges
from ledger.streams.checkpoints import Mark, digest, last_mark, mark_key, occupancy_records, read_states
from ledger.streams.config import WorkerConfig
from ledger.streams.deadletter import deadletter_headers, parse_headers, source_of
from ledger.streams.metrics import WorkerMetrics
from ledger.streams.outbox import Outbox
from ledger.streams.outbox import retrieved as _retrieved
from ledger.streams.producer import abandon, acked
from ledger.streams.reader import PartitionReader
from ledger.streams.service import DecisionService, Outcome
from ledger.streams.snapshot import Serialisation
from ledger.streams.state import ClusterState
from ledger.streams.topics import CHECKPOINT_MAX_BYTES, TopicNames, checkpoint_topic, occupancy_topic

__all__ = ["Worker"]

log = logging.getLogger("gpuledger.worker")

KafkaErrors = (KafkaError, BrokerError)  # what a broker away or slow to answer raises
TRANSIENT = (KafkaError, BrokerError, OSError, TimeoutError)  # ... and the connections under it
PLAY_BUDGET_S = 0.05  # wall time one timer call may spend playing one cluster's wake-ups (the loop stays live)
STOP_GRACE_S = 0.5  # how long the step under way may take to end by itself once a stop is asked for


class Backoff:
    """Waits between retries: 0.2 s, doubling up to 5 s."""

    FIRST_S = 0.2
    MAX_S = 5.0

    def __init__(self) -> None:
        self.next_s = self.FIRST_S

    def wait(self) -> float:
        """Return the wait before the next retry and lengthen the one after."""
        seconds, self.next_s = self.next_s, min(self.MAX_S, self.next_s * 2)
        return seconds


class Worker:
    """The consumer, the producer, the checkpoints and the timer of one worker process."""

    def __init__(self, cfg: WorkerConfig):
        self.cfg = cfg
        self.topics = TopicNames(cfg.topic_prefix)
        self.ckpt_topic = checkpoint_topic(cfg.app_id)
        self.occ_topic = occupancy_topic(cfg.app_id)
        self.metrics = WorkerMetrics()
        self.gauges = BudgetGauges(self.metrics.registry)
        self.blobs: dict[str, bytes] = {}  # cluster -> checkpoint read at assignment (the service's loader)
        self.service = DecisionService(
            cfg.knobs, loader=self.blobs.get, idle_clock_rate=cfg.idle_clock_rate, idle_after_s=cfg.idle_after_s,
            partitions=cfg.partitions,
        )
        self.lock = asyncio.Lock()
        self.stopping = asyncio.Event()
        self.consumer: Any = None
        self.producer: Any = None
        self.outbox: Outbox | None = None
        self.reader: PartitionReader | None = None
        self.assigned: set[int] = set()
        self.assigning = True  # until the first assignment is restored, and during a rebalance
        self.halted: str | None = None
        self.marks: dict[int, Mark] = {}  # partition -> its last durable mark
        self.last: dict[int, tuple[int, bytes | None]] = {}  # partition -> (offset, value) of its last input processed
        self.next_offset: dict[int, int] = {}  # partition -> next input offset to read
        self.unacked = 0  # inputs processed since the last checkpoint
        self.inflight: asyncio.Future[None] | None = None
        self.unsettled = False  # inputs decided whose outputs are not all acknowledged (no checkpoint may say so)
        self.on_stop: list[Callable[[], None]] = []  # called once when a stop is asked for
        self.last_checkpoint = time.monotonic()
        self.ckpt_end: dict[int, int] = {}  # checkpoint-topic partition -> offset after our last write
        self.dl_end = 0  # dead-letter offset after the last letter known sent
        self.dl_suppress: set[str] = set()  # sources already dead-lettered before a restart
        self.view: dict[str, bytes] = {}  # the occupancy view: cluster|path -> JSON
        self.conns: dict[Any, Any] = {}  # the consumer's broker connections when the log was last checked

    # -- lifecycle ---------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the worker to stop (SIGTERM, SIGINT, or its owner): it ends within ``shutdown_timeout_s``."""
        if not self.stopping.is_set():
            log.warning("stop requested")
            self.stopping.set()
            for hook in self.on_stop:
                hook()

    async def run(self) -> int:
        """Serve until SIGTERM/SIGINT (or ``request_stop``); return the exit code.

        Every phase gives way to a stop: start-up (topics, connections), restore, a batch, the wait for
        acknowledgements. A step that does not end within ``STOP_GRACE_S`` of the request is cut short;
        the last checkpoint is written only if what was decided is all acknowledged (else the next start
        resumes from the checkpoint before, as after a crash).
        """
        from ledger.streams.web import serve

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        web = await serve(self, self.cfg.http_host, self.cfg.http_port)
        logging.getLogger("aiokafka").setLevel(max(logging.getLevelName(self.cfg.loglevel.upper()), logging.INFO))
        try:
            main = asyncio.ensure_future(self._serve())
            stop = asyncio.ensure_future(self.stopping.wait())
            await asyncio.wait({main, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not main.done():
                await asyncio.wait({main}, timeout=STOP_GRACE_S)  # the step under way may end by itself
            if not main.done():
                main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await main
        finally:
            await self._shutdown()
            web.close()
        return 0

    async def _serve(self) -> None:
        await self._start_retrying()
        if not self.stopping.is_set():
            await self._loop()

    def _clients(self) -> None:
        """Make new clients (a client whose start failed is not started again)."""
        from aiokafka import AIOKafkaConsumer

        cfg = self.cfg
        sec = cfg.security.aiokafka_kwargs()
        timeout_ms = int(cfg.request_timeout_s * 1000)
        self.producer = self._new_producer()
        self.reader = PartitionReader(cfg.bootstrap, cfg.security, cfg.fetch_max_wait_ms, timeout_ms)
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap, group_id=cfg.app_id, group_instance_id=cfg.instance_id,
            enable_auto_commit=False, auto_offset_reset="none", fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            session_timeout_ms=int(cfg.session_timeout_s * 1000),
            heartbeat_interval_ms=int(min(1.0, cfg.session_timeout_s / 3) * 1000),
            rebalance_timeout_ms=int(cfg.rebalance_timeout_s * 1000), request_timeout_ms=timeout_ms, **sec,
        )

    def _new_producer(self) -> Any:
        """Return a new idempotent producer for outputs and checkpoints (``streams.producer``)."""
        from aiokafka import AIOKafkaProducer

        cfg = self.cfg
        return AIOKafkaProducer(
            bootstrap_servers=cfg.bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
            max_batch_size=512 * 1024, max_request_size=CHECKPOINT_MAX_BYTES,
            request_timeout_ms=int(cfg.request_timeout_s * 1000), **cfg.security.aiokafka_kwargs(),
        )

    async def _producer_ready(self) -> None:
        """Start a new producer if the last one was dropped (after an outage: ``_recover``)."""
        if self.producer is None:
            producer = self._new_producer()
            try:
                await producer.start()
            except BaseException:
                abandon(producer)
                raise
            self.producer, self.outbox = producer, Outbox(producer)

    async def _start_retrying(self) -> None:
        """Create the topics and connect, again and again with backoff while the broker does not answer."""
        from ledger.streams.topics import ensure_topics, worker_topics

        cfg = self.cfg
        backoff = Backoff()
        while not self.stopping.is_set():
            self._clients()
            try:
                log.info("creating topics")
                # side by side: each is a few round trips to the broker, and a restart waits for all of them
                outcomes = await asyncio.gather(
                    ensure_topics(cfg.bootstrap, worker_topics(cfg.partitions, cfg.app_id, cfg.topic_prefix),
                                  cfg.request_timeout_s, replication_factor=cfg.replication_factor,
                                  security=cfg.security),
                    self._start(), return_exceptions=True,
                )
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
                log.info("connecting")
                self._subscribe()
                return
            except TRANSIENT as exc:
                log.warning("broker not answering at start-up (%s: %s): retrying in %.1f s",
                            type(exc).__name__, exc, backoff.next_s)
                await self._stop_clients(1.0)
                await self._sleep(backoff.wait())

    async def _sleep(self, seconds: float) -> None:
        """Wait ``seconds`` or until a stop is asked for."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def _until_stopped(self, work: Any) -> None:
        """Run ``work`` unless a stop is asked for first (a broker that never answers must not hold a stop)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        else:
            task.result()

    async def _start(self) -> None:
        """Start the producer and the two consumers side by side."""
        assert self.producer is not None and self.reader is not None
        await asyncio.gather(self.producer.start(), self.reader.start(), self.consumer.start())
        self.outbox = Outbox(self.producer)

    def _subscribe(self) -> None:
        """Join the group on the events topic (once its topics are known to exist with the right counts)."""
        from aiokafka import ConsumerRebalanceListener

        worker = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await worker.on_revoked({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                await worker.on_assigned({tp.partition for tp in assigned})

        self.consumer.subscribe([self.topics.events], listener=Listener())

    async def _stop_clients(self, budget_s: float) -> None:
        """Stop the clients side by side, giving up after ``budget_s`` (the broker may be gone)."""
        # aiokafka's own retries end in CancelledError when a bounded step is cut short: not a reason to stop here
        async def bounded(client: Any) -> None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(client.stop(), budget_s)

        await asyncio.gather(*(bounded(c) for c in (self.consumer, self.reader, self.producer) if c is not None))

    async def _shutdown(self) -> None:
        """Checkpoint what was decided and acknowledged, leave the group and disconnect, each step bounded."""
        budget = self.cfg.shutdown_timeout_s
        t0 = time.monotonic()
        if self.producer is not None and self.halted is None and not self.assigning and not self.unsettled:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._final_checkpoint(), budget * 0.4)
        elif self.unsettled and self.halted is None:
            log.warning("stopped before the outputs of the last inputs were acknowledged: no last checkpoint "
                        "(the next start resumes from the one before)")
        task, self.inflight = self.inflight, None
        if task is not None and not task.done():
            task.cancel()  # a checkpoint cut short is harmless: its mark, written last, names what it holds
        if task is not None:
            task.add_done_callback(_retrieved)
        if self.outbox is not None:
            self.outbox.discard()
        await self._stop_clients(max(0.1, budget * 0.5 - (time.monotonic() - t0)))

    async def _final_checkpoint(self) -> None:
        async with self.lock:
            await self._settle()
            if self.unacked or self.service.dirty:
                await self._checkpoint(wait=True)

    async def _loop(self) -> None:
        from aiokafka.errors import NoOffsetForPartitionError, OffsetOutOfRangeError

        timer = self.cfg.timer_interval_s
        last_tick = time.monotonic()
        while not self.stopping.is_set():
            try:
                batch = await self.consumer.getmany(timeout_ms=int(timer * 1000), max_records=self.cfg.batch_max)
            except NoOffsetForPartitionError:
                await asyncio.sleep(0.01)  # an assignment being restored: its partitions are sought when it ends
                continue
            except OffsetOutOfRangeError as exc:
                self._halt(f"{self.topics.events}: offsets out of range on the broker ({exc}): its log was lost")
                continue
            except KafkaErrors as exc:  # the broker is away: aiokafka reconnects by itself
                log.warning("fetch failed: %s: %s", type(exc).__name__, exc)
                await self._sleep(0.2)
                continue
            try:
                async with self.lock:
                    if self.halted is None and not self.assigning and not await self._continuous(batch):
                        continue
                    # a batch fetched while an assignment was restored may start before the position it set
                    fresh = [m for part in batch.values() for m in part
                             if m.partition in self.assigned and m.offset >= self.next_offset.get(m.partition, 0)]
                    if fresh and self.halted is None and not self.assigning:
                        await self._on_batch(fresh)
                    if time.monotonic() - last_tick >= timer:
                        last_tick = time.monotonic()
                        await self._tick()
            except TRANSIENT as exc:
                await self._recover(exc)

    async def _recover(self, exc: BaseException) -> None:
        """Outputs were not acknowledged: pause, then resume each partition from its checkpoint when the broker answers.

        What was decided since the last checkpoint is thrown away and decided again; outputs that did
        land meanwhile are found on the decisions topic at the restore and not sent again.
        """
        log.warning("outputs not acknowledged (%s: %s): pausing; partitions %s resume from their checkpoints",
                    type(exc).__name__, exc, sorted(self.assigned))
        self.metrics.outages.inc()
        async with self.lock:
            if self.outbox is not None:
                self.outbox.discard()
            task, self.inflight = self.inflight, None
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            self.unsettled = False
            self.unacked = 0
            partitions = set(self.assigned)
            self.assigning = True
            self._pause(partitions)
            # An idempotent producer retries its batches until the broker takes them: kept, it would land
            # what was given up on behind what the restore decides again. A new one starts with the restore.
            abandon(self.producer)
            self.producer = self.outbox = None
            await self._sleep(Backoff.FIRST_S)
            await self._take(partitions, kept=set())

    async def _continuous(self, batch: dict[Any, list[Any]]) -> bool:
        """Return whether the log still holds each partition's last input; checked after any (re)connection.

        A broker that came back without its log is only reached over a new connection, so whenever the
        consumer opened one (and after each assignment), the record at each partition's last processed
        offset is read again and compared with the one processed, before a fetched batch is decided or
        a wake-up played. If the check could not be made (broker away, stop asked), the batch is fetched
        again later and checked then.
        """
        conns = dict(self.consumer._client._conns)  # aiokafka has no public view of its connections
        if [id(c) for c in conns.values()] == [id(c) for c in self.conns.values()]:
            return True
        self.conns = conns  # held, so no id is reused; taken before the check: a later reconnection checks again
        try:
            await self._until_stopped(asyncio.wait_for(self._check_tails(), max(10.0, 5 * self.cfg.request_timeout_s)))
            if not self.stopping.is_set():
                return True
        except Exception as exc:
            log.warning("log continuity not checked: %s: %s", type(exc).__name__, exc)
        self.conns = {}
        for tp in batch:
            self.consumer.seek(tp, self.next_offset[tp.partition])
        return False

    async def _check_tails(self) -> None:
        assert self.reader is not None
        for p in sorted(self.assigned):
            if p not in self.last:
                continue
            offset, value = self.last[p]
            seen = self.marks[p] if value is None else Mark(offset, digest(value), _event_id(value), 0)
            records = await self.reader.read(self.topics.events, p, offset, offset + 1)
            problem = seen.check(records[0] if records else None, p, self.topics.events)
            if problem:
                self._halt(problem)
                return

    # -- rebalances --------------------------------------------------------------------------
    async def on_revoked(self, partitions: set[int]) -> None:
        """Make what was processed durable before the partitions move (the next owner resumes here)."""
        log.warning("revoked %s", sorted(partitions))
        async with self.lock:
            self.assigning = True
            if self.halted is not None:
                return
            try:
                await self._settle()
                if self.unacked or self.service.dirty:
                    await self._checkpoint(wait=True)
            except Exception as exc:  # the next owner resumes from the last durable checkpoint
                log.warning("checkpoint on revocation failed: %s: %s", type(exc).__name__, exc)

    async def on_assigned(self, partitions: set[int]) -> None:
        """Take partitions: read their checkpoints, check the broker still holds what they end on, seek past them."""
        async with self.lock:
            await self._until_stopped(self._settle_quietly())
            gone = self.assigned - partitions
            self.service.forget_partitions(gone)
            self.gauges.forget_partitions(gone)
            for p in gone:
                self.last.pop(p, None)
                self.marks.pop(p, None)
                for gauge in (self.metrics.lag, self.metrics.checkpointed):
                    with contextlib.suppress(KeyError):
                        gauge.remove(str(p))
            self.view = {k: v for k, v in self.view.items() if k.split("|", 1)[0] in self.service.states}
            kept = self.assigned & partitions
            self.assigned = set(partitions)
            self.assigning = True
            if self.halted is not None:
                self._pause(partitions)
                return
            await self._take(partitions, kept)

    def _pause(self, partitions: set[int]) -> None:
        from aiokafka import TopicPartition

        with contextlib.suppress(Exception):
            self.consumer.pause(*(TopicPartition(self.topics.events, p) for p in partitions))

    async def _take(self, partitions: set[int], kept: set[int]) -> None:
        """Restore the partitions not ``kept`` from their checkpoints (retrying while the broker does not answer), seek.

        Called with the lock held. A stop leaves them unrestored (``assigning``); a checkpoint that cannot
        be read, or a log that ends before what this worker wrote, halts the worker.
        """
        from aiokafka import TopicPartition

        t0 = time.monotonic()
        backoff = Backoff()
        attempt_s = max(10.0, 5 * self.cfg.request_timeout_s)
        fresh = partitions - kept
        while not self.stopping.is_set() and self.halted is None:
            self.service.forget_partitions(fresh)  # an attempt cut short left some restored: start them over
            for p in fresh:
                self.last.pop(p, None)
            try:
                # bounded: a read on a broker that stopped answering may wait for ever (a position never known)
                await self._until_stopped(asyncio.wait_for(self._restore(partitions, kept), attempt_s))
                break
            except TRANSIENT as exc:
                log.warning("cannot read the checkpoints of partitions %s (%s: %s): retrying in %.1f s",
                            sorted(partitions), type(exc).__name__, exc, backoff.next_s)
                await self._sleep(backoff.wait())
            except Exception as exc:
                self._halt(f"cannot restore partitions {sorted(partitions)}: {type(exc).__name__}: {exc}")
        if self.halted is not None:
            self._pause(partitions)
            return
        if self.stopping.is_set():
            return
        tps = {p: TopicPartition(self.topics.events, p) for p in partitions}
        for p, tp in tps.items():
            self.consumer.seek(tp, self.next_offset[p])
        self.consumer.resume(*tps.values())
        self.conns = {}  # the log is checked before the first batch: see _continuous
        self.assigning = False
        self.metrics.restore_seconds.observe(time.monotonic() - t0)
        log.warning("assigned %s: resuming at %s (restored in %.2f s)", sorted(partitions),
                    {p: self.next_offset[p] for p in sorted(partitions)}, time.monotonic() - t0)

    async def _restore(self, partitions: set[int], kept: set[int]) -> None:
        assert self.reader is not None
        await self._producer_ready()
        marks: dict[int, Mark] = {}
        loaded: dict[int, dict[str, bytes]] = {}
        for p in sorted(partitions):  # every partition checked before any state is taken
            mark = await last_mark(self.reader, self.ckpt_topic, p)
            held = self.marks.get(p)
            if held is not None and (mark is None or mark.offset < held.offset):
                self._halt(
                    f"{self.ckpt_topic}/{p}: the checkpoints end before the one this worker wrote last "
                    f"(input offset {held.offset}): the broker lost its log"
                )
                return
            if mark is not None:
                marks[p] = mark
                if p not in kept:
                    loaded[p] = await read_states(self.reader, self.ckpt_topic, p, mark)
        for p in sorted(partitions - kept):
            mark = marks.get(p)
            self.next_offset[p] = mark.offset + 1 if mark else 0
            self.blobs.update(loaded.get(p, {}))
            restored = [self.service.state(c, p) for c in sorted(self.blobs)]
            self.blobs.clear()
            if mark:
                self.marks[p] = mark
                self.last[p] = (mark.offset, None)
                self.metrics.checkpointed.labels(str(p)).set(mark.offset)
                if mark.states is None:  # an older worker's mark: the next one must name every checkpoint
                    self.service.dirty.update(st.cluster for st in restored)
            # outputs sent after the checkpoints, also of clusters first seen after them: not sent again
            start = min((st.decisions_next for st in restored), default=0)
            for cluster, sent in (await self._emitted_since(p, start)).items():
                st = self.service.state(cluster, p)
                st.suppress = {event_id for offset, event_id in sent if offset >= st.decisions_next}
                if st.suppress:
                    log.warning("cluster %s: %d output(s) already emitted, not sent again", cluster, len(st.suppress))
            for st in restored:
                self.view.update(occupancy_records(st))
                self.gauges.update(st)
        for p in kept:
            self.next_offset[p] = self.last[p][0] + 1 if p in self.last else 0
        await self._recall_deadletters(partitions - kept, marks)

    async def _emitted_since(self, partition: int, offset: int) -> dict[str, list[tuple[int, str]]]:
        """Return, per cluster, the (offset, id) of the outputs on a decisions partition from ``offset`` on."""
        assert self.reader is not None
        found: dict[str, list[tuple[int, str]]] = {}
        for msg in await self.reader.read(self.topics.decisions, partition, offset):
            if msg.key and msg.value:
                with contextlib.suppress(LedgerError):
                    found.setdefault(msg.key.decode(), []).append((msg.offset, decode(msg.value).event_id))
        return found

    async def _recall_deadletters(self, partitions: set[int], marks: dict[int, Mark]) -> None:
        """Remember the letters of these partitions already sent after their marks (not sent again)."""
        if not partitions:
            return
        assert self.reader is not None
        start = min(marks[p].deadletters if p in marks else 0 for p in partitions)
        letters = await self.reader.read(self.topics.deadletter, 0, start)
        self.dl_end = max(self.dl_end, start, *(m.offset + 1 for m in letters[-1:]))
        prefix = f"{self.topics.events}/"
        for msg in letters:
            source = parse_headers(msg.headers or ()).get("source", "")
            if source.startswith(prefix) and int(source.split("/")[-2]) in partitions:
                self.dl_suppress.add(source)

    # -- inputs ------------------------------------------------------------------------------
    async def _on_batch(self, messages: list[Any]) -> None:
        t0 = time.perf_counter()
        core0 = self.service.core_s
        self.unsettled = True
        outcomes = self.service.process_batch([(m.value, m.key, m.partition, m.offset) for m in messages])
        kinds: dict[str, int] = {}
        late = 0
        for msg, outcome in zip(messages, outcomes, strict=True):
            if self.halted is not None:
                break  # nothing more is sent (the halt may come from a checkpoint written meanwhile)
            kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
            late += outcome.late
            if outcome.kind == "deadletter" or outcome.emit:
                await self._deliver(outcome, msg)
            self.last[msg.partition] = (msg.offset, msg.value)
            self.next_offset[msg.partition] = msg.offset + 1
        await self._await_sent()
        for kind, n in kinds.items():
            self.metrics.records.labels(kind).inc(n)
        if late:
            self.metrics.late.inc(late)
        self.metrics.events_seen += len(messages)
        self.unacked += len(messages)
        if self.unacked >= self.cfg.checkpoint_every and not self.checkpointing and self.halted is None:
            await self._checkpoint(wait=False)
        busy = time.perf_counter() - t0
        self.metrics.latency.observe(busy)
        self.metrics.busy_seconds.inc(busy)
        self.metrics.core_seconds.inc(self.service.core_s - core0)

    async def _deliver(self, outcome: Outcome, msg: Any) -> None:
        assert self.outbox is not None
        if outcome.kind == "deadletter":
            mark = self.marks.get(msg.partition)
            source = source_of(msg.topic, msg.partition, msg.offset)
            if (mark is not None and msg.offset <= mark.offset) or source in self.dl_suppress:
                return  # dead-lettered before the restart
            headers = deadletter_headers(outcome.reason or "unknown", msg.topic, msg.partition, msg.offset)
            await self.outbox.add(self.topics.deadletter, 0, "", msg.key, msg.value or b"", headers)
            self.metrics.deadletters.inc()
        elif outcome.cluster is not None:
            await self._emit(outcome.cluster, msg.partition, outcome.emit)

    async def _emit(self, cluster: str, partition: int, events: list[Event]) -> None:
        assert self.outbox is not None
        key = cluster.encode()
        for e in events:
            await self.outbox.add(self.topics.decisions, partition, cluster, key, encode(e))
        self.metrics.decisions.inc(len(events))
        self.metrics.outputs_sent += len(events)

    async def _await_sent(self) -> None:
        """Send what is queued and wait for its acknowledgement; halt if an output landed before an earlier one."""
        if self.outbox is None:
            return
        if self.halted is not None:
            self.outbox.discard()
            return
        await self.outbox.send()
        for tag, end in (await self.outbox.acked(self.cfg.request_timeout_s)).items():
            if not tag:
                self.dl_end = max(self.dl_end, end)
                continue
            st = self.service.states.get(tag)
            if st is None:
                continue
            if end <= st.decisions_next:
                self._halt(
                    f"{self.topics.decisions}/{st.partition}: an output of {tag} landed at offset {end - 1}, before "
                    f"the {st.decisions_next} already there: the broker lost its log"
                )
            st.decisions_next = max(st.decisions_next, end)
        self.unsettled = False

    # -- the timer ---------------------------------------------------------------------------
    async def _tick(self) -> None:
        from aiokafka import TopicPartition

        if self.halted is None and not self.assigning:
            # a partition with inputs still waiting on the broker is not idle, however long they take to arrive
            waiting = set()
            for p in self.assigned:
                high = self.consumer.highwater(TopicPartition(self.topics.events, p))
                nxt = self.next_offset.get(p, 0)
                if high is None or nxt < high:
                    waiting.add(p)
                if high is not None:
                    self.metrics.lag.labels(str(p)).set(max(0, high - nxt))
            self.service.hold(waiting)
            self.unsettled = True
            for tick in self.service.due(budget_s=PLAY_BUDGET_S):
                await self._emit(tick.cluster, tick.partition, tick.emit)
            await self._await_sent()
            # by time, or by count: a batch that reached --checkpoint-every while the last checkpoint was still
            # being written left it to here (with no more inputs, no batch would ask again before the interval)
            due = (time.monotonic() - self.last_checkpoint >= self.cfg.checkpoint_interval_s
                   or self.unacked >= self.cfg.checkpoint_every)
            if (self.unacked or self.service.dirty) and due and not self.checkpointing and self.halted is None:
                await self._checkpoint(wait=False)
        self.metrics.sample_rates()

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def checkpointing(self) -> bool:
        """Return whether a checkpoint is still being written."""
        return self.inflight is not None and not self.inflight.done()

    async def _settle(self) -> None:
        task, self.inflight = self.inflight, None
        if task is not None:
            await task

    async def _settle_quietly(self) -> None:
        try:
            await self._settle()
        except Exception as exc:  # its inputs stay uncommitted: the next checkpoint covers them
            log.warning("checkpoint failed: %s: %s", type(exc).__name__, exc)

    async def _checkpoint(self, *, wait: bool) -> None:
        """Freeze the changed states and the marks now; write them, then commit, in the background unless ``wait``."""
        await self._settle_quietly()  # a failed one re-marked its states changed: this one covers them
        t0 = time.perf_counter()
        await self._await_sent()
        if self.halted is not None:
            return
        states = self.service.take_dirty()
        touched = {st.partition for st in states}
        marks = {}
        for p, (offset, value) in self.last.items():
            held = self.marks.get(p)
            if p not in self.assigned:
                continue
            if held is not None and held.offset == offset:
                if p in touched:  # no new input, newer states (wake-ups played): the mark names them
                    marks[p] = held
            elif value is not None:
                marks[p] = Mark(offset, digest(value), _event_id(value), self.dl_end)
        job = Serialisation.start(states, in_process=not self.cfg.checkpoint_fork)
        self.unacked = 0
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)
        self.inflight = asyncio.ensure_future(self._write_checkpoint(states, job, marks))
        if wait:
            await self._settle()

    async def _write_checkpoint(self, states: list[ClusterState], job: Serialisation, marks: dict[int, Mark]) -> None:
        from aiokafka import TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        try:
            blobs = await job.result()
            if self.halted is not None:
                return  # a halted worker writes nothing more
            sent = [await self.producer.send(self.ckpt_topic, blob, key=st.cluster.encode(), partition=st.partition)
                    for st, blob in zip(states, blobs, strict=True)]
            views = []
            for st in states:
                for key, value in occupancy_records(st).items():
                    if self.view.get(key) != value:
                        self.view[key] = value
                        views.append(await self.producer.send(self.occ_topic, value, key=key.encode(),
                                                              partition=st.partition))
            named = {p: dict(self.marks[p].states or {}) if p in self.marks else {} for p in marks}
            timeout_s = self.cfg.request_timeout_s
            for st, fut in zip(states, sent, strict=True):
                offset = self._landed(st.partition, (await acked(fut, timeout_s)).offset)
                named.setdefault(st.partition, {})[st.cluster] = offset
            if self.halted is not None:
                return
            # after the states are written: a mark never names more than the topic holds
            marks = {p: replace(mark, states=named[p]) for p, mark in marks.items()}
            sent = [await self.producer.send(self.ckpt_topic, mark.to_bytes(), key=mark_key(p).encode(), partition=p)
                    for p, mark in marks.items()]
            for p, fut in zip(marks, sent, strict=True):
                self._landed(p, (await acked(fut, timeout_s)).offset)
            await acked(asyncio.gather(*views), timeout_s)
        except BaseException:
            self.service.dirty.update(st.cluster for st in states if st.cluster in self.service.states)
            self.unacked += 1
            raise
        if self.halted is not None:
            return
        self.marks.update(marks)
        for p, m in marks.items():
            self.metrics.checkpointed.labels(str(p)).set(m.offset)
        for st in states:
            self.gauges.update(st)
        offsets = {
            TopicPartition(self.topics.events, p): OffsetAndMetadata(m.offset + 1, "")
            for p, m in marks.items() if p in self.assigned
        }
        if offsets:
            with contextlib.suppress(Exception):  # informational (lag tools): the marks say where to resume
                await self.consumer.commit(offsets)
        self.last_checkpoint = time.monotonic()
        self.metrics.checkpoints.inc()

    def _landed(self, partition: int, offset: int) -> int:
        """Note where a checkpoint-topic write landed; halt if before one written earlier (the log was lost)."""
        if offset < self.ckpt_end.get(partition, 0):
            self._halt(f"{self.ckpt_topic}/{partition}: a checkpoint landed at offset {offset}, before the "
                       f"{self.ckpt_end[partition]} written earlier: the broker lost its log")
        self.ckpt_end[partition] = max(self.ckpt_end.get(partition, 0), offset + 1)
        return offset

    # -- halting -----------------------------------------------------------------------------
    def _halt(self, reason: str) -> None:
        """Stop deciding for good: log why, raise the metric, pause every partition."""
        if self.halted is None:
            log.error("worker halted, no further decisions: %s", reason)
            self.halted = reason
            self.metrics.halted.set(1)
            with contextlib.suppress(Exception):
                self.consumer.pause(*self.consumer.assignment())

    @property
    def ready(self) -> bool:
        """Return whether the worker owns restored partitions and decides."""
        return self.halted is None and not self.assigning and self.producer is not None

    def occupancy_view(self) -> dict[str, Any]:
        """Return the occupancy view as {cluster|path: values}."""
        import json

        return {k: json.loads(v) for k, v in sorted(self.view.items())}


def _event_id(value: bytes) -> str:
    try:
        return decode(value).event_id
    except LedgerError:
        return ""
