"""Load an event log into DuckDB: records are batched per event type into Arrow tables, then registered.

The projection never inserts row by row: each event type's records are buffered as the
decoder hands them over, turned into Arrow record batches every ``HOT`` decoded records (Arrow
converts the dicts column by column in C, while they are still in the CPU cache), merged into
batches of about ``BATCH`` rows, and the batches of one type become one Arrow table that DuckDB
scans in place. ``build_intervals`` then builds the compact tables the audits read.
Times become integer microseconds (``BIGINT``) so every
GPU-time sum in the audits is exact integer arithmetic.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from datetime import datetime
from importlib import resources
from typing import Any

import duckdb
import pyarrow as pa

from ledger.errors import InputError
from ledger.events import Event

BATCH = 65_536  # rows per Arrow batch DuckDB scans
HOT = 16_384  # records decoded between two conversions to Arrow
_TS = pa.timestamp("us", tz="UTC")
_STR = pa.string()
_NAMES = pa.list_(pa.string())

# event type -> (table name, fields kept); ``time`` and other timestamps are listed in _TIMES.
_FIELDS: dict[str, tuple[str, list[tuple[str, pa.DataType]]]] = {
    "WorkloadSubmitted": (
        "ev_submitted",
        [
            ("event_id", _STR), ("time", _TS), ("workload_id", _STR), ("budget", _STR), ("user", _STR),
            ("gpus", pa.int64()), ("min_runtime_s", pa.int64()), ("resumable", pa.bool_()),
            ("priority", pa.int64()), ("kind", _STR), ("restart_s", pa.int64()),
        ],
    ),
    "WorkloadStarted": (
        "ev_started",
        [
            ("event_id", _STR), ("time", _TS), ("workload_id", _STR), ("nodes", _NAMES), ("gpus", pa.int64()),
            ("allocated", pa.bool_()), ("protected_until", _TS), ("attempt", pa.int64()),
        ],
    ),
    "CheckpointWritten": (
        "ev_checkpoint",
        [("event_id", _STR), ("time", _TS), ("workload_id", _STR), ("progress_s", pa.int64())],
    ),
    "WorkloadPreempted": (
        "ev_preempted",
        [("event_id", _STR), ("time", _TS), ("workload_id", _STR), ("reason", _STR), ("preempted_by", _STR)],
    ),
    "WorkloadRequeued": ("ev_requeued", [("event_id", _STR), ("time", _TS), ("workload_id", _STR)]),
    "WorkloadCompleted": (
        "ev_completed",
        [("event_id", _STR), ("time", _TS), ("workload_id", _STR), ("outcome", _STR)],
    ),
    "BudgetNodeDefined": (
        "ev_node",
        [
            ("event_id", _STR), ("time", _TS), ("path", _STR), ("parent", _STR), ("share", pa.float64()),
            ("level", _STR), ("team_level", _STR),
        ],
    ),
    "AllocationChanged": (
        "ev_allocation",
        [("event_id", _STR), ("time", _TS), ("path", _STR), ("share", pa.float64()), ("set_by", _STR)],
    ),
    "AllocationRefused": (
        "ev_refused",
        [
            ("event_id", _STR), ("time", _TS), ("path", _STR), ("share", pa.float64()), ("set_by", _STR),
            ("refused_event_id", _STR), ("reason", _STR),
        ],
    ),
    "HostHealthChanged": (
        "ev_health",
        [("event_id", _STR), ("time", _TS), ("host", _STR), ("state", _STR)],
    ),
    "ClusterCapacityChanged": (
        "ev_capacity",
        [("event_id", _STR), ("time", _TS), ("cluster", _STR), ("gpus", pa.int64()), ("gpus_per_node", pa.int64())],
    ),
    "SchedulingDecision": (
        "ev_decision",
        [
            ("event_id", _STR), ("time", _TS), ("action", _STR), ("workload_id", _STR), ("reason", _STR),
            ("for_workload", _STR), ("budget_ratio", pa.float64()), ("queue_position", pa.int64()),
        ],
    ),
}

TABLES: tuple[str, ...] = tuple(table for table, _ in _FIELDS.values())


def _schemas(time_type: pa.DataType) -> dict[str, pa.Schema]:
    return {
        name: pa.schema([(f, time_type if t == _TS else t) for f, t in fields])
        for name, (_, fields) in _FIELDS.items()
    }


# Datetimes convert to a zone-less timestamp type: Arrow still turns aware datetimes into UTC instants,
# but skips the per-value time-zone lookup the zoned type costs (about half the conversion of a time).
_NAIVE = pa.timestamp("us")
_AS_DATETIME = _schemas(_NAIVE)
_AS_MICROS = _schemas(pa.int64())
# Audits read only the time of SchedulingDecision events (for the period); explain reads them whole.
_SLIM = {"SchedulingDecision": [("event_id", _STR), ("time", _TS)]}
_SLIM_DATETIME = {name: pa.schema([(f, _NAIVE if t == _TS else t) for f, t in fields])
                  for name, fields in _SLIM.items()}
_SLIM_MICROS = {name: pa.schema([(f, pa.int64() if t == _TS else t) for f, t in fields])
                for name, fields in _SLIM.items()}


def layout(*, decisions: bool) -> str:
    """Return the projection's tables and fields as text (what a kept projection must have been made with)."""
    micros = {name: _SLIM_MICROS[name] if not decisions and name in _SLIM else schema
              for name, schema in _AS_MICROS.items()}
    return repr([(_FIELDS[name][0], [(f.name, str(f.type)) for f in schema]) for name, schema in micros.items()])


class _Buffer:
    """Records of one event type: converted to small Arrow batches often, merged into BATCH-row batches."""

    __slots__ = ("batches", "rows", "seqs", "slim", "small", "small_rows", "type_name")

    def __init__(self, type_name: str, slim: bool = False) -> None:
        self.type_name = type_name
        self.slim = slim
        self.rows: list[dict[str, Any]] = []
        self.seqs: list[int] = []
        self.batches: list[pa.RecordBatch] = []
        self.small: list[pa.RecordBatch] = []
        self.small_rows = 0

    def flush(self) -> None:
        if not self.rows:
            return
        # Readers may hand timestamps over as datetimes (logical types) or raw integer micros.
        micros = not isinstance(self.rows[0]["time"], datetime)
        if self.slim:
            schema = (_SLIM_MICROS if micros else _SLIM_DATETIME)[self.type_name]
        else:
            schema = (_AS_MICROS if micros else _AS_DATETIME)[self.type_name]
        try:
            batch = pa.RecordBatch.from_pylist(self.rows, schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as exc:
            raise InputError(f"{self.type_name} record near log position {self.seqs[0]}: {exc}") from None
        cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in batch.columns]
        cols.append(pa.array(self.seqs, pa.int64()))
        self.small.append(pa.RecordBatch.from_arrays(cols, names=[*batch.schema.names, "seq"]))
        self.small_rows += len(self.rows)
        self.rows = []
        self.seqs = []
        if self.small_rows >= BATCH:
            self.merge()

    def merge(self) -> None:
        """Join the small batches into one (DuckDB scans a few large batches faster than many small ones)."""
        if len(self.small) == 1:
            self.batches.append(self.small[0])
        elif self.small:
            self.batches.extend(pa.Table.from_batches(self.small).combine_chunks().to_batches())
        self.small = []
        self.small_rows = 0

    def table(self) -> pa.Table:
        self.flush()
        self.merge()
        if self.batches:
            return pa.Table.from_batches(self.batches)
        schema = (_SLIM_MICROS if self.slim else _AS_MICROS)[self.type_name].append(pa.field("seq", pa.int64()))
        return schema.empty_table()


def load_arrow(records: Iterable[tuple[str, dict[str, Any]]], *, decisions: bool = True) -> dict[str, pa.Table]:
    """Return one Arrow table per event type from ``(type_name, record)`` pairs (times as integer micros).

    With ``decisions=False`` the SchedulingDecision table keeps only event ids and times (audits need
    no more; it saves memory on large logs).
    """
    # The buffered dicts are acyclic and short-lived; the cyclic collector would rescan them
    # over and over while they pile up, so it is paused for the load.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        loader = Loader(decisions=decisions)
        loader.add(records)
        return loader.tables()
    finally:
        if was_enabled:
            gc.enable()


class Loader:
    """The projection's Arrow tables, built from ``(type_name, record)`` pairs handed over in log order.

    ``load_arrow`` hands it a whole log at once; a replay hands it each batch of events as the log
    takes them (``add_events``), so the run's audit needs no second reading of the log it just wrote.
    """

    def __init__(self, *, decisions: bool = True) -> None:
        self.buffers = {name: _Buffer(name, slim=not decisions and name in _SLIM) for name in _FIELDS}
        self.short: dict[str, _Buffer] = {}
        self.seq = 0  # log position of the next record
        self.due = HOT
        self.whole = True  # a replay that hands over its events sets this False if the log skipped some

    def add(self, records: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Take the next records of the log, in order."""
        buffers, short = self.buffers, self.short
        seq, due = self.seq, self.due
        for type_name, record in records:
            buf = short.get(type_name)
            if buf is None:
                name = type_name.rsplit(".", 1)[-1]
                if name not in buffers:
                    raise InputError(f"log position {seq}: unknown event type {type_name!r}")
                buf = short[type_name] = buffers[name]
            buf.rows.append(record)
            buf.seqs.append(seq)
            if seq >= due:
                # Convert every type's recent records together while their dicts are still in the CPU
                # cache: converting 65,536 records of one type at once touched dicts decoded long before.
                due = seq + HOT
                for b in buffers.values():
                    b.flush()
            seq += 1
        self.seq, self.due = seq, due

    def add_events(self, events: Iterable[Event]) -> None:
        """Take the next events of the log, in order (their fields are the log's records)."""
        self.add((e.type_name, e.__dict__) for e in events)

    def tables(self) -> dict[str, pa.Table]:
        """Return one Arrow table per event type table (``ev_*``) of everything taken."""
        return {_FIELDS[name][0]: buf.table() for name, buf in self.buffers.items()}


def register(tables: dict[str, pa.Table], con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """Return a connection with ``tables`` (``load_arrow``, ``Loader.tables``) as ``ev_*`` and the compact tables."""
    con = con if con is not None else duckdb.connect()
    for table, arrow in tables.items():
        con.register(table, arrow)  # zero-copy: DuckDB scans the Arrow table in place
    build_intervals(con)
    return con


def project(
    records: Iterable[tuple[str, dict[str, Any]]], con: duckdb.DuckDBPyConnection | None = None, *,
    decisions: bool = True,
) -> duckdb.DuckDBPyConnection:
    """Load ``(type_name, record)`` pairs into a DuckDB connection as views ``ev_*`` (one per event type)."""
    return register(load_arrow(records, decisions=decisions), con)


# Tables only the pairing and the anomalies read; dropped once the anomalies are listed.
_PAIRING_TABLES = ("life", "cand_runs", "loose_ends", "runs_checked")


def build_intervals(con: duckdb.DuckDBPyConnection) -> None:
    """Build the compact tables every audit reads (workloads, run intervals, preemptions, anomalies) in ``con``.

    Needs the ``ev_*`` tables. The result does not depend on the audit period, so it is built once per load.
    """
    con.execute(sql_text("intervals"))
    con.execute(sql_text("anomalies"))
    for table in _PAIRING_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")


def sql_text(name: str) -> str:
    """Return the text of ``queries/<name>.sql``."""
    return resources.files("ledger.queries").joinpath(f"{name}.sql").read_text(encoding="utf-8")


__all__ = ["BATCH", "TABLES", "Loader", "build_intervals", "layout", "load_arrow", "project", "register", "sql_text"]
