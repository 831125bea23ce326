"""Outputs of one batch of inputs, sent as one producer batch per topic partition, and what their acks tell.

The worker emits two or three records per input (a decision and the facts it implies). Sending each
through ``AIOKafkaProducer.send`` costs a metadata check, a future and an accumulator append per
record; building one record batch per partition and handing it over with ``send_batch`` costs that
once per partition and batch of inputs. The records, their order and their partitions are the same.

Each record carries a tag: the cluster whose output it is, or ``""`` for a dead letter. When a
batch is acknowledged, its base offset plus a record's index is that record's offset; ``acked``
turns that into the offset after each tag's last record (what a checkpoint remembers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.streams.producer import acked

__all__ = ["Outbox", "Sent", "acked_ends", "retrieved"]


@dataclass
class Sent:
    """One producer batch handed over: its acknowledgement future and the tag of each record, in order."""

    future: Any  # asyncio future of the batch's RecordMetadata (offset = the batch's base offset)
    tags: list[str]


@dataclass
class _Open:
    builder: Any
    tags: list[str] = field(default_factory=list)


class Outbox:
    """Records queued for sending, one open record batch per (topic, partition)."""

    def __init__(self, producer: Any):
        self.producer = producer
        self._open: dict[tuple[str, int], _Open] = {}
        self.sent: list[Sent] = []  # handed to the producer, acknowledgement not yet taken in

    async def add(
        self, topic: str, partition: int, tag: str, key: bytes | None, value: bytes,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Queue one record; a full batch is handed over at once and a new one started."""
        slot = (topic, partition)
        box = self._open.get(slot)
        if box is None:
            box = self._open[slot] = _Open(self.producer.create_batch())
        if box.builder.append(timestamp=None, key=key, value=value, headers=list(headers)) is None:
            await self._hand_over(slot, self._open.pop(slot))
            box = self._open[slot] = _Open(self.producer.create_batch())
            if box.builder.append(timestamp=None, key=key, value=value, headers=list(headers)) is None:
                raise ValueError(f"{topic}/{partition}: a record of {len(value)} bytes does not fit in a batch")
        box.tags.append(tag)

    async def send(self) -> None:
        """Hand every open batch to the producer (without waiting for acknowledgements)."""
        opened, self._open = self._open, {}
        for slot, box in opened.items():
            await self._hand_over(slot, box)

    async def _hand_over(self, slot: tuple[str, int], box: _Open) -> None:
        box.builder.close()  # nothing else may join it: a record's offset is the base offset + its index
        future = await self.producer.send_batch(box.builder, slot[0], partition=slot[1])
        self.sent.append(Sent(future, box.tags))

    async def acked(self, timeout_s: float) -> dict[str, int]:
        """Wait for every batch handed over; return, per tag, the offset after its last record.

        Raise TimeoutError if they are not all acknowledged within ``timeout_s`` (an idempotent
        producer never gives up on a batch by itself: ``streams.producer``).
        """
        sent, self.sent = self.sent, []
        if not sent:
            return {}
        results = await acked(asyncio.gather(*(s.future for s in sent)), timeout_s)
        return acked_ends(sent, results)

    def discard(self) -> None:
        """Drop what is queued and forget what was handed over (its acknowledgements no longer matter)."""
        self._open = {}
        sent, self.sent = self.sent, []
        for s in sent:
            s.future.add_done_callback(retrieved)


def retrieved(future: Any) -> None:
    """Take a dropped batch's outcome, so that its failure is not reported as never retrieved."""
    if not future.cancelled():
        future.exception()


def acked_ends(sent: Sequence[Sent], results: Sequence[Any]) -> dict[str, int]:
    """Return, per tag, the offset after its last acknowledged record (batches and their RecordMetadata)."""
    ends: dict[str, int] = {}
    for s, md in zip(sent, results, strict=True):
        for i, tag in enumerate(s.tags):
            end = md.offset + i + 1
            if end > ends.get(tag, -1):
                ends[tag] = end
    return ends
