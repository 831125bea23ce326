"""A replay's events into its embedded log as Avro bytes, validating only what came from outside.

``EventLog.append`` validates every event again before writing it (readers rebuild events without
validating, so nothing unchecked may reach a segment). In a replay almost every event is made by
trusted code: the decision core's outputs (built field by field from its own state) and the
driver's simulated checkpoints and completions; over the demo month only 3 % of the events come
from outside (the trace's submissions, the budget tree, capacity). Validating the other 97 % again
took ~13 % of a compiled replay. ``LogWriter`` therefore validates the outside events exactly as
the log does (``check_batch``, the same messages, the same batch positions) and writes the rest
without re-validation, as the bytes the log's own encoder writes (``EventLog.append_encoded``).

Every event goes through the log's compiled record encoders (``ledger.log.avro_encode``, the one
place that turns an event into Avro bytes). ``tests/replay/test_logwriter.py`` checks that the
segment files are byte for byte those of ``EventLog.append`` given the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ledger.codec import union_schema
from ledger.events import EVENT_TYPES, Event
from ledger.log import EventLog
from ledger.log.avro_encode import union_encoder
from ledger.log.checks import FULL_NAMES, check_batch, explain_unencodable

__all__ = ["LogWriter"]


class LogWriter:
    """Append a replay driver's batches to an embedded log: outside events validated, the rest trusted.

    ``write(events, outside)`` is the driver's batch writer: ``outside`` lists the positions (in
    ``events``) of events that came from outside the replay; each is validated as
    ``EventLog.append`` validates it, and one bad event refuses the whole batch with the same
    message. Deduplication, atomicity and durability are the log's (``append_encoded``).
    """

    def __init__(self, log: EventLog) -> None:
        self._append = log.append_encoded
        encoder = union_encoder(union_schema())  # type: ignore[arg-type]  # the log's schema is a union (a list)
        branches = encoder.branches
        self._branches: dict[type[Event], tuple[str, Callable[[dict[str, Any], bytearray], None]]] = {
            cls: (FULL_NAMES[name], branches[FULL_NAMES[name]]) for name, cls in EVENT_TYPES.items()
        }
        self.written = 0

    def write(self, events: Sequence[Event], outside: Sequence[int]) -> int:
        """Validate the outside events, encode every event, append them as one batch; return how many were written."""
        for index in outside:
            check_batch((events[index],), start=index)  # raises EventValidationError naming the batch item
        ids: list[str] = []
        encoded: list[bytes] = []
        add_id, add = ids.append, encoded.append
        branches = self._branches
        for event in events:
            record = event.__dict__
            add_id(record["event_id"])
            full, branch = branches[type(event)]
            out = bytearray()
            try:
                branch(record, out)
            except (ValueError, TypeError, OverflowError, KeyError) as exc:
                raise explain_unencodable([(full, record)], exc) from None
            add(bytes(out))
        written = self._append(ids, encoded)
        self.written += written
        return written
