"""A replay's events into its embedded log as Avro bytes, validating only what came from outside.

``EventLog.append`` validates every event again before writing it (readers rebuild events without
validating, so nothing unchecked may reach a segment). In a replay almost every event is made by
trusted code: the decision core's outputs (built field by field from its own state) and the
driver's simulated checkpoints and completions; over the demo month only 3 % of the events come
from outside (the trace's submissions, the budget tree, capacity). Validating the other 97 % again
took ~13 % of a compiled replay. ``LogWriter`` therefore validates the outside events exactly as
the log does (``check_batch``, the same messages, the same batch positions) and writes the rest
without re-validation, as the bytes the log's own encoder writes (``EventLog.append_encoded``).

The simulated checkpoints (59 % of the events of the demo month) are written straight from their
fields: a workload's id bytes are encoded once and remembered, and each instant's time bytes once.
Every other event goes through the log's compiled encoder (``ledger.log.avro_encode``).
``tests/replay/test_logwriter.py`` checks that the segment files are byte for byte those of
``EventLog.append`` given the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ledger.codec import union_schema
from ledger.events import EVENT_TYPES, CheckpointWritten, Event, to_us
from ledger.log import EventLog
from ledger.log.avro_encode import string_bytes, union_encoder, varint, zigzag_bytes
from ledger.log.checks import FULL_NAMES, check_batch, explain_unencodable

__all__ = ["LogWriter"]

# The fields a checkpoint is written with, in order: if the schema says otherwise, no direct writing.
_CHECKPOINT_FIELDS = ("event_id", "cluster", "time", "schema_version", "workload_id", "progress_s")
_ID_LIMIT = 1 << 17  # remembered workload ids (bounded; a month holds ~10,000-100,000 workloads)


def _put_varint(out: bytearray, n: int) -> None:
    """Append the varint bytes of an already zig-zagged, non-negative n (a plain loop: compiled, it is the fastest)."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _checkpoint_head() -> bytes | None:
    """Return the union index bytes of CheckpointWritten, or None if its fields are not the ones written here."""
    for index, schema in enumerate(union_schema()):
        if str(schema["name"]).rpartition(".")[2] == "CheckpointWritten":
            fields = tuple(f["name"] for f in schema["fields"])
            return varint(index << 1) if fields == _CHECKPOINT_FIELDS else None
    return None


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
        head = _checkpoint_head()
        self._head = head or b""
        self._direct = head is not None
        self._ids: dict[str, bytes] = {}  # workload id -> its bytes
        self._cluster: tuple[str, bytes] = ("", string_bytes(""))
        self._time: tuple[object, bytes] = (None, b"")
        self.written = 0

    def write(self, events: Sequence[Event], outside: Sequence[int]) -> int:
        """Validate the outside events, encode every event, append them as one batch; return how many were written."""
        for index in outside:
            check_batch((events[index],), start=index)  # raises EventValidationError naming the batch item
        ids: list[str] = []
        encoded: list[bytes] = []
        add_id, add = ids.append, encoded.append
        branches = self._branches
        direct = self._direct
        for event in events:
            record = event.__dict__
            cls = type(event)
            add_id(record["event_id"])
            if cls is CheckpointWritten and direct:
                data = self._checkpoint(record)
                if data is not None:
                    add(data)
                    continue
            full, branch = branches[cls]
            out = bytearray()
            try:
                branch(record, out)
            except (ValueError, TypeError, OverflowError, KeyError) as exc:
                raise explain_unencodable([(full, record)], exc) from None
            add(bytes(out))
        written = self._append(ids, encoded)
        self.written += written
        return written

    def _checkpoint(self, record: dict[str, Any]) -> bytes | None:
        """Return a CheckpointWritten record's bytes from its fields and remembered pieces (None: not plain)."""
        when = record["time"]
        if when is not self._time[0]:
            if when.__class__ is not datetime or when.tzinfo is None:
                return None  # not what the driver makes: the log's encoder handles (or refuses) it
            us = to_us(when)
            self._time = (when, zigzag_bytes(us))
        cluster: str = record["cluster"]
        if cluster != self._cluster[0]:
            self._cluster = (cluster, string_bytes(cluster))
        wid: str = record["workload_id"]
        wid_bytes = self._ids.get(wid)
        if wid_bytes is None:
            if len(self._ids) >= _ID_LIMIT:
                self._ids.clear()
            wid_bytes = self._ids[wid] = string_bytes(wid)
        event_id: bytes = record["event_id"].encode()
        out = bytearray(self._head)
        _put_varint(out, len(event_id) << 1)
        out += event_id
        out += self._cluster[1]
        out += self._time[1]
        version: int = record["schema_version"]
        _put_varint(out, (version << 1) ^ (version >> 63))
        out += wid_bytes
        progress: int = record["progress_s"]
        _put_varint(out, (progress << 1) ^ (progress >> 63))
        return bytes(out)
