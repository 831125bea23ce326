"""Records faust never delivered: each partition's records are applied once, in order, all the same.

faust delivers partitions with holes (around an assignment it skips records, and it commits offsets
it never delivered). The worker keeps each partition's next offset to apply and reads the records
of a hole from the broker itself before going on (``_in_order``, ``_fill_tails``); once a checkpoint
covers them they are acknowledged to faust's consumer (``_ack_filled``), so its committed offset
moves past the hole.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from streams.runtime_state import RuntimeState
from streams.trace import ranges

__all__ = ["Holes"]

log = logging.getLogger("gpuledger.worker")


class Holes(RuntimeState):
    """Find the holes in what faust delivers, fill them from the broker, acknowledge them once checkpointed."""

    def _next_offset(self, partition: int, *, from_start: bool = True) -> int | None:
        """Return the next input offset of a partition to process, if known.

        After an assignment it is the one after the partition's mark (the last input offset the durable
        checkpoints cover), or, for a partition no checkpoint covers yet, its first offset on the broker
        (unless not ``from_start``); then the one after the last record processed.
        """
        nxt = self.expect.get(partition)
        if nxt is None:
            covered = self.dl_marked.get(partition, (0, -1))[1]
            nxt = covered + 1 if covered >= 0 else self.log_start.get(partition) if from_start else None
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
            # not from a partition's first offset: a partition that has delivered nothing yet is starting, not idle
            nxt = self._next_offset(p, from_start=False)
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
