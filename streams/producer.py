"""Idempotent producers: bounded waits for their acknowledgements, and dropping one that stopped getting them.

Every producer of the stream path (the worker's, the publisher's) is idempotent (``enable_idempotence``,
``acks=all``): the broker numbers each producer's batches per partition and drops a batch it already
wrote when the producer sends it again, so the retries a producer makes by itself (an acknowledgement
lost with its connection, a partition leader that died and was replaced) leave no copy on the topic.

Two consequences the callers handle here:

- an idempotent producer never gives up on a batch (aiokafka retries it until the broker takes it),
  so a caller that must get on with its life waits for an acknowledgement at most ``timeout_s``
  (``acked``) and then treats the send as failed;
- after such a failure the producer is dropped (``abandon``), not stopped: stopping flushes, and
  its stuck batches would then land whenever the broker answered again, behind the caller's own
  resend. The resend goes out under a new producer (a new producer id), which the broker cannot
  match to the earlier writes, so a record whose acknowledgement was lost may reach the topic twice;
  consumers drop such copies by ``event_id`` (the worker does, and finds its own outputs already on
  the decisions topic when it restores).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["abandon", "acked"]

_closing: set[asyncio.Task[None]] = set()  # dropped producers being closed (held: a task must not be collected)


async def acked(future: Any, timeout_s: float) -> Any:
    """Return a send's RecordMetadata; raise TimeoutError if the broker has not acknowledged it in ``timeout_s``."""
    # shielded: cancelling aiokafka's own batch future would leave its accumulator inconsistent
    return await asyncio.wait_for(asyncio.shield(future), timeout_s)


def abandon(producer: Any, timeout_s: float = 1.0) -> None:
    """Drop a producer without delivering what it still holds: stop its sender, close its connections."""
    if producer is None:
        return

    async def close() -> None:
        producer._closed = True  # no send is taken any more
        sender = getattr(producer, "_sender", None)
        task = getattr(sender, "sender_task", None)
        if task is not None and not task.done():
            task.cancel()  # the batches it still holds are never sent (a request on the wire may still land)
            await asyncio.wait({task}, timeout=timeout_s)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.client.close(), timeout_s)

    task = asyncio.ensure_future(close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)
