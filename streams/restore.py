"""What a restarted worker finds: its clusters' checkpoints, outputs and dead letters already sent.

Processing again yields the same outputs with the same ids (the core is deterministic and names
its outputs ``{cluster}/d{n}``). Before a restored cluster processes anything, the worker reads the
decisions partition from the offset recorded in the checkpoint to its end and remembers the ids
found there; those outputs are not sent again. Dead letters: each bad record gets one letter across
crashes (see the marks in ``_recall_deadletters``).
"""

from __future__ import annotations

import contextlib
import logging

from ledger.codec import decode
from ledger.errors import LedgerError
from streams.deadletter import MARK_PREFIX, parse_headers
from streams.runtime_state import RuntimeState
from streams.state import ClusterState

__all__ = ["Restore"]

log = logging.getLogger("gpuledger.worker")


class Restore(RuntimeState):
    """Load owned clusters from the table; recognise outputs and dead letters a crashed run already sent."""

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
        # a partition without a mark was never covered by a checkpoint: its records are applied from its first
        unmarked = {p for p in self.assigned if self.dl_marked.get(p, (0, -1))[1] < 0}
        self.log_start = await self._log_starts(self.topics.events, unmarked)
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
