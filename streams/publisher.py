"""Publish events to Kafka without ever losing one: spool first (fsynced), then send in order with acks=all.

Every batch is written to the local spool before it is sent (a write-ahead outbox), and a
record leaves the spool only after the broker acknowledged it and every record before it. A
broker that is down, slow or restarting therefore costs nothing but time: the records wait in
the spool and are resent in order by the next ``publish``/``flush``.

The producer is idempotent (``streams.producer``): while one producer lives, the broker drops a
batch it already wrote when the producer retries it (a lost acknowledgement, a partition leader
that died and was replaced), so such retries leave no copy. A round not acknowledged within the
request timeout fails (an idempotent producer would retry it for ever) and the producer is dropped
with what it still held; the spool's resend goes out under a new producer id, which the broker
cannot match to the old writes: a record whose acknowledgement was lost may then reach the topic
twice, and consumers drop the copy by ``event_id``.

``AsyncPublisher`` is the asyncio API; ``Publisher`` wraps it for synchronous callers (it owns
a private event loop in a daemon thread, so it also works inside a program that runs its own loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ledger.codec import encode
from ledger.events import Event
from ledger.streams.producer import abandon, acked
from ledger.streams.security import KafkaSecurity
from ledger.streams.spool import Spool
from ledger.streams.topics import EVENTS

__all__ = ["AsyncPublisher", "PublishResult", "Publisher", "event_record"]

T = TypeVar("T")
_BATCH = 2000  # records per send round; the spool cursor moves after each acknowledged round


@dataclass(frozen=True)
class PublishResult:
    """What a publish or flush achieved: records the broker acknowledged, and records still spooled."""

    sent: int
    spooled: int
    error: str | None = None  # why the last send attempt failed, when records remain


def event_record(event: Event) -> tuple[bytes, bytes]:
    """Return (key, value) for an event: key = cluster, value = Avro single-object encoding."""
    return event.cluster.encode("utf-8"), encode(event)


class AsyncPublisher:
    """Spool-backed Kafka publisher for asyncio code."""

    def __init__(
        self,
        bootstrap: str,
        spool_dir: str | Path,
        *,
        topic: str = EVENTS,
        request_timeout_s: float = 10.0,
        security: KafkaSecurity | None = None,
    ):
        self.bootstrap = bootstrap
        self.topic = topic
        self.spool = Spool(spool_dir)
        self.request_timeout_s = request_timeout_s
        self.security = security or KafkaSecurity.from_env()  # fails early (ConfigError) on inconsistent settings
        self._producer: Any = None
        self.last_error: str | None = None

    async def _ensure_producer(self) -> Any:
        if self._producer is None:
            from aiokafka import AIOKafkaProducer

            ms = int(self.request_timeout_s * 1000)
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                acks="all",
                enable_idempotence=True,
                request_timeout_ms=ms,
                linger_ms=2,
                max_batch_size=256 * 1024,
                retry_backoff_ms=200,
                **self.security.aiokafka_kwargs(),
            )
            try:
                await asyncio.wait_for(producer.start(), self.request_timeout_s)
            except BaseException:
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self._producer = producer
        return self._producer

    def _drop_producer(self) -> None:
        """Drop a producer whose round failed, with the batches it still holds (the spool resends them)."""
        producer, self._producer = self._producer, None
        abandon(producer)

    def enqueue(self, events: Iterable[Event]) -> int:
        """Spool events durably (fsync) without sending; return how many; raise BrokerError if the spool fails."""
        return self.spool.append(event_record(e) for e in events)

    async def publish(self, events: Iterable[Event]) -> PublishResult:
        """Spool the events, then send everything spooled, in order; never raises for an unreachable broker."""
        self.enqueue(events)
        return await self.flush()

    async def flush(self, wait_s: float = 0.0) -> PublishResult:
        """Send spooled records in order; retry for up to ``wait_s`` seconds while the broker is unreachable."""
        deadline = time.monotonic() + wait_s
        sent = 0
        backoff = 0.2
        while True:
            sent += await self._send_pending()
            if self.spool.empty or time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, 2.0)
        remaining = len(self.spool)
        return PublishResult(sent, remaining, self.last_error if remaining else None)

    async def _send_pending(self) -> int:
        """Send spooled records round by round; return how many were acknowledged before any failure."""
        sent = 0
        while not self.spool.empty:
            batch = list(self.spool.pending(_BATCH))
            # An idempotent producer never gives up on a batch by itself (it retries until the broker
            # answers): the round's own deadline turns a broker that hangs into a failed round.
            deadline = time.monotonic() + self.request_timeout_s
            try:
                producer = await self._ensure_producer()
                futures = await asyncio.wait_for(self._send_all(producer, batch), self.request_timeout_s)
            except Exception as exc:  # connection refused, metadata timeout, ...: keep everything spooled
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._drop_producer()
                return sent
            acked_to = None
            failure: BaseException | None = None
            for (end, _key, _value), fut in zip(batch, futures, strict=True):
                try:
                    await acked(fut, max(0.0, deadline - time.monotonic()))
                except Exception as exc:
                    failure = exc
                    break
                acked_to = end
                sent += 1
            if acked_to is not None:
                self.spool.ack(acked_to)
            if failure is not None:
                # Later records of the round may still arrive; they stay spooled and are resent (dropped by event_id).
                self.last_error = f"{type(failure).__name__}: {failure}"
                self._drop_producer()
                return sent
        self.last_error = None
        return sent

    async def _send_all(self, producer: Any, batch: list[tuple[int, bytes, bytes]]) -> list[Any]:
        """Hand a round's records to the producer in order; return their acknowledgement futures."""
        return [await producer.send(self.topic, value, key=key) for _, key, value in batch]

    async def close(self) -> None:
        """Stop the producer (spooled records stay on disk for the next publisher)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), self.request_timeout_s)


class Publisher:
    """Synchronous publisher for scripts and adapters: ``publish(events)``, ``flush(wait_s)``, ``close()``.

    >>> with Publisher("127.0.0.1:9092", "spool/") as pub:   # doctest: +SKIP
    ...     pub.publish(events)
    """

    def __init__(
        self,
        bootstrap: str,
        spool_dir: str | Path = ".gpuledger-spool",
        *,
        topic: str = EVENTS,
        request_timeout_s: float = 10.0,
        security: KafkaSecurity | None = None,
    ):
        security = security or KafkaSecurity.from_env()  # before the thread: a ConfigError leaves nothing running
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gpuledger-publisher", daemon=True)
        self._thread.start()
        self._inner = AsyncPublisher(
            bootstrap, spool_dir, topic=topic, request_timeout_s=request_timeout_s, security=security
        )

    def _run(self, coro: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    @property
    def spool_dir(self) -> Path:
        """Return the spool directory."""
        return self._inner.spool.path

    def pending(self) -> int:
        """Return how many records wait in the spool."""
        return len(self._inner.spool)

    def enqueue(self, events: Iterable[Event]) -> int:
        """Spool events durably without sending them yet."""
        return self._inner.enqueue(events)

    def publish(self, events: Iterable[Event]) -> PublishResult:
        """Spool the events and send everything spooled, in order."""
        return self._run(self._inner.publish(list(events)))

    def flush(self, wait_s: float = 0.0) -> PublishResult:
        """Send spooled records, retrying for up to ``wait_s`` seconds while the broker is unreachable."""
        return self._run(self._inner.flush(wait_s))

    def close(self) -> None:
        """Stop the producer and the private loop; spooled records stay on disk."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._run(self._inner.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
