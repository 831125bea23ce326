"""The agent's body: a batch of input records through the decision service, its outputs sent and awaited once.

Inputs are consumed without automatic acks: they are acked by the checkpoint that covers them
(``streams.checkpoints``). Outputs go to ``gpuledger.decisions`` (same partition as the input, key =
cluster) and bad records to ``gpuledger.deadletter`` with the reason in their headers.
"""

from __future__ import annotations

import time
from typing import Any

from ledger.events import Event
from streams.deadletter import deadletter_headers, source_of
from streams.runtime_state import RuntimeState
from streams.service import Outcome
from streams.trace import ranges
from streams.wire import encode_record

__all__ = ["Batches"]


class Batches(RuntimeState):
    """Process batches of input records; send what they produce; note how far each cluster's outputs reach."""

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
