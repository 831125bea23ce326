"""The embedded event log (the default store, no broker): an append-only directory of Avro segments.

``EventLog(path)`` appends durable, validated, de-duplicated batches and reads them back in append
order; ``open_log(source)`` opens the log of a run directory or a log directory. See
``ledger.log.eventlog`` for what the log guarantees.

``COMPILED`` says whether the log's byte helpers and its record encoders generated from the schemas
run compiled (built with the core; the same bytes). As for the core, where a source no longer
matches what was compiled (or ``GPULEDGER_PURE=1`` is set) the package runs its Python sources.
"""

from __future__ import annotations

from ledger.log import avro_bytes as _avro_bytes
from ledger.log.eventlog import SEGMENT_BYTES, EventLog, open_log

COMPILED = not str(_avro_bytes.__file__).endswith(".py")

__all__ = ["COMPILED", "SEGMENT_BYTES", "EventLog", "open_log"]
