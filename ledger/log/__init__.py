"""The embedded event log (the default store, no broker): an append-only directory of Avro segments.

``EventLog(path)`` appends durable, validated, de-duplicated batches and reads them back in append
order; ``open_log(source)`` opens the log of a run directory or a log directory. See
``ledger.log.eventlog`` for what the log guarantees.
"""

from __future__ import annotations

from ledger.log.eventlog import SEGMENT_BYTES, EventLog, open_log

__all__ = ["SEGMENT_BYTES", "EventLog", "open_log"]
