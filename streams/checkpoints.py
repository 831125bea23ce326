"""Durable checkpoints: outputs acknowledged, then the changed clusters' checkpoints, then the inputs acked.

Every ``checkpoint_every`` records (or ``checkpoint_interval_s``), the worker waits until every
output sent so far is acknowledged, writes each changed cluster's checkpoint to the ``clusters``
changelog and waits for *that* acknowledgement, and only then acks the inputs the checkpoint covers.
The committed input offset therefore never passes a durable checkpoint. A checkpoint records the last
input offset it reflects; after a restart records at or before it are skipped.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from streams.deadletter import mark_key
from streams.runtime_state import RuntimeState
from streams.snapshot import Serialisation
from streams.state import ClusterState
from streams.trace import ranges

__all__ = ["Checkpoints"]


class Checkpoints(RuntimeState):
    """Freeze, write and acknowledge checkpoints (and the occupancy view), one at a time."""

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
