"""A replay's events into its embedded log, validating only what came from outside.

``EventLog.append`` validates every event again before writing it (readers rebuild events without
validating, so nothing unchecked may reach a segment). In a replay almost every event is made by
trusted code: the decision core's outputs (built field by field from its own state) and the
driver's simulated checkpoints and completions; over the demo month only 3 % of the events come
from outside (the trace's submissions, the budget tree, capacity). Validating the other 97 % again
took ~13 % of a compiled replay. ``LogWriter`` therefore validates the outside events exactly as
the log does (``check_batch``, the same messages, the same batch positions) and writes them all
through the log's batch path, one block per driver batch (``EventLog.append_batch``).

The events are objects, made one by one: each is written by the log's generated per-record
encoder (``ledger.log.avro_encode``) into one buffer, and the buffer handed to the batch as its
encoded records (``EventBatch.add_encoded``). Turning objects into columns first costs as much as
encoding them (``docs/benchmarks.md``); the columns pay where the data is born as columns, in the
importers. ``tests/replay/test_logwriter.py`` checks that the segment files are byte for byte those
of ``EventLog.append`` given the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ledger.codec import union_schema
from ledger.events import EVENT_TYPES, Event
from ledger.log import EventLog
from ledger.log.avro_encode import union_encoder
from ledger.log.batch import EventBatch
from ledger.log.checks import FULL_NAMES, check_batch, explain_unencodable

__all__ = ["LogWriter"]


class LogWriter:
    """Append a replay driver's batches to an embedded log: outside events validated, the rest trusted.

    ``write(events, outside)`` is the driver's batch writer: ``outside`` lists the positions (in
    ``events``) of events that came from outside the replay; each is validated as
    ``EventLog.append`` validates it, and one bad event refuses the whole batch with the same
    message. Deduplication, atomicity and durability are the log's (``append_batch``).
    """

    def __init__(self, log: EventLog) -> None:
        self._log = log
        encoder = union_encoder(union_schema())  # type: ignore[arg-type]  # the log's schema is a union (a list)
        branches = encoder.branches
        self._branches: dict[type[Event], tuple[str, Callable[[dict[str, Any], bytearray], None]]] = {
            cls: (FULL_NAMES[name], branches[FULL_NAMES[name]]) for name, cls in EVENT_TYPES.items()
        }
        self.written = 0

    def write(self, events: Sequence[Event], outside: Sequence[int]) -> int:
        """Validate the outside events, encode every event, append them as one block; return how many were written."""
        at = 0
        while at < len(outside):  # a run of neighbouring positions is validated in one call
            end = at + 1
            while end < len(outside) and outside[end] == outside[end - 1] + 1:
                end += 1
            check_batch(events[outside[at] : outside[end - 1] + 1], start=outside[at])  # names the batch item
            at = end
        ids: list[str] = []
        ends: list[int] = []
        out = bytearray()
        add_id, add_end = ids.append, ends.append
        branches = self._branches
        for index, event in enumerate(events):
            record = event.__dict__
            add_id(record["event_id"])
            pair = branches.get(type(event))
            if pair is None:
                check_batch([event], start=index)  # raises, naming the batch item: not a gpuledger event
                raise AssertionError(type(event))
            full, branch = pair
            try:
                branch(record, out)
            except (ValueError, TypeError, OverflowError, KeyError) as exc:
                raise explain_unencodable([(full, record)], exc) from None
            add_end(len(out))
        offsets = np.zeros(len(ends) + 1, np.int32)
        offsets[1:] = ends
        records = pa.Array.from_buffers(pa.binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(out)])
        with EventBatch() as batch:
            batch.add_encoded(records, ids)
            written = self._log.append_batch(batch)
        self.written += written
        return written
