"""The worker runtime: the glue between faust and the pure decision service, put together from its parts.

Crash safety (SIGKILL at any point, then restart, equals an uninterrupted run) rests on
``streams.checkpoints`` (the committed offset never passes a durable checkpoint), ``streams.restore``
(outputs already sent are not sent again) and ``streams.holes`` (no record faust skipped is lost).
Rebalances: on revocation the worker checkpoints (under the lock) before faust rejoins the group,
then forgets the revoked clusters; it loads only clusters of its assigned partitions (the table
also holds standby copies of other workers' partitions, stale once their owner moves on).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from streams.batches import Batches
from streams.checkpoints import Checkpoints
from streams.holes import Holes
from streams.restore import Restore

__all__ = ["WorkerRuntime"]

log = logging.getLogger("gpuledger.worker")


class WorkerRuntime(Batches, Holes, Checkpoints, Restore):
    """The glue between faust and the pure service: sends, checkpoints, acks, metrics, rebalances, the timer."""

    async def shutdown(self) -> None:
        """Checkpoint what was processed (a graceful stop resumes without reprocessing), then stop sending."""
        async with self.lock:
            if self.producer is not None:
                with contextlib.suppress(Exception):
                    await self._settle()
                    if self.unacked or self.service.dirty:
                        await self._checkpoint()
        await self.stop_producer()

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
            self.log_start.pop(partition, None)
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(str(partition))

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
