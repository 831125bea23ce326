"""Events written a column at a time are the per-record encoder's bytes, whatever form their columns take.

The column encoder writes whole numbers, strings, booleans, doubles and arrays of strings itself,
and hands constants, coded columns and any other type to the per-record encoder's field functions:
each property below draws events of every type, turns them into columns of every form the log
takes (numpy arrays, masked arrays, pyarrow arrays, coded columns, constants, a DuckDB relation),
and checks every record's bytes against the per-record encoder's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.codec import union_schema
from ledger.errors import EventValidationError
from ledger.log import EventLog
from ledger.log.avro_columns import Coded, ColumnEncoder
from ledger.log.avro_encode import UnencodableValue, union_encoder
from ledger.log.batch import EventBatch
from ledger.log.checks import FULL_NAMES, check_batch
from tests.log.strategies import STRATEGIES

ENCODER = union_encoder(union_schema())  # type: ignore[arg-type]  # the log's schema is a union
COLUMNS = ColumnEncoder(ENCODER)
FORMS = ("arrow", "numpy", "coded", "objects")
SEGMENT = "00000001.avro"


def kinds(full: str) -> dict[str, tuple[str, bool]]:
    """Return each field's vectorised kind and whether it may be null, as the column encoder sees it."""
    return {f.spec.name: (f.kind, f.nullable is not None) for f in COLUMNS.fields[full]}


def column(values: list[Any], kind: str, nullable: bool, form: str) -> Any:
    """Return a field's values as a column of the given form (the natural one for its kind where a form fits none)."""
    if form == "coded":
        distinct = list(dict.fromkeys(values))
        return Coded(np.array([distinct.index(v) for v in values], np.int64), distinct)
    if form == "objects":
        out = np.empty(len(values), dtype=object)
        for k, v in enumerate(values):
            out[k] = v
        return out
    numbers = kind in ("int", "long", "time")
    if numbers:
        values = [ev.to_us(v) if kind == "time" and v is not None else v for v in values]
    if form == "numpy" and kind in ("int", "long", "time", "boolean", "double"):
        dtype = {"boolean": np.bool_, "double": np.float64}.get(kind, np.int64)
        if nullable:
            return np.ma.MaskedArray([0 if v is None else v for v in values], mask=[v is None for v in values],
                                     dtype=dtype)  # fmt: skip
        return np.array(values, dtype)
    arrow = {"int": pa.int64(), "long": pa.int64(), "time": pa.int64(), "boolean": pa.bool_(), "double": pa.float64(),
             "string": pa.string(), "enum": pa.string(), "strings": pa.list_(pa.string())}.get(kind)  # fmt: skip
    if arrow is None:
        return column(values, kind, nullable, "objects")
    return pa.array([list(v) if isinstance(v, tuple) else v for v in values], arrow)


def as_columns(full: str, records: list[dict[str, Any]], form: str) -> dict[str, Any]:
    return {name: column([r[name] for r in records], kind, nullable, form) for name, (kind, nullable) in
            kinds(full).items() if name in records[0]}  # fmt: skip


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@pytest.mark.parametrize("form", FORMS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_event_written_as_columns_is_the_per_record_encoders_bytes(
    type_name: str, form: str, data: st.DataObject
) -> None:
    events = data.draw(st.lists(STRATEGIES[type_name], min_size=1, max_size=8))
    records = [record for _, record in check_batch(events)]
    full = FULL_NAMES[type_name]
    got = COLUMNS.encode(full, as_columns(full, records, form), len(records)).to_pylist()
    assert got == [ENCODER.encode(full, r) for r in records]


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_constant_column_and_a_duckdb_relation_write_the_same_bytes(type_name: str, data: st.DataObject) -> None:
    event = data.draw(STRATEGIES[type_name])
    ((full, record),) = check_batch([event])
    constants = {name: (list(v) if isinstance(v, tuple) else v) for name, v in record.items()}
    assert COLUMNS.encode(full, constants, 3).to_pylist() == [ENCODER.encode(full, record)] * 3


def test_a_duckdb_relation_of_checkpoints_writes_the_segment_their_records_write(tmp_path: Path) -> None:
    """A query makes an hour of checkpoints for three workloads; the log takes the relation's columns as they come."""
    start = ev.to_us(ev.EARLIEST) + 86_400_000_000
    relation = duckdb.sql(
        f"SELECT 'c/w' || (i % 3) || '/ck' || i AS event_id, 'c' AS cluster, {start} + i * 600000000 AS time, "
        "'w' || (i % 3) AS workload_id, i * 600 AS progress_s FROM range(18) t(i)"
    )
    records = [("CheckpointWritten", {
        "event_id": f"c/w{i % 3}/ck{i}", "cluster": "c", "time": start + i * 600_000_000, "schema_version": 1,
        "workload_id": f"w{i % 3}", "progress_s": i * 600,
    }) for i in range(18)]  # fmt: skip
    with EventBatch() as batch, EventLog(tmp_path / "columns") as log:
        batch.add("CheckpointWritten", relation)
        assert log.append_batch(batch) == 18
    with EventLog(tmp_path / "records") as log:
        log.append_records(records)
    assert (tmp_path / "columns" / SEGMENT).read_bytes() == (tmp_path / "records" / SEGMENT).read_bytes()


def test_a_value_outside_its_type_is_refused_as_the_per_record_encoder_refuses_it() -> None:
    full = FULL_NAMES["WorkloadStarted"]
    columns = {
        "event_id": pa.array(["ok", "wide"]), "cluster": "c", "time": np.array([1, 2]), "workload_id": "w",
        "nodes": pa.array([["h1"], ["h2"]]), "gpus": np.array([8, 2**31]), "allocated": True,
        "protected_until": np.array([5, 6]),
    }  # fmt: skip
    with pytest.raises(UnencodableValue) as refused:
        COLUMNS.encode(full, columns, 2)
    per_record = ENCODER.explain([(full, {**_row(columns, 1), "event_id": "wide"})], ValueError())
    assert (str(refused.value), refused.value.event_id) == (str(per_record), "wide")
    assert "WorkloadStarted.gpus: does not fit an Avro int (32-bit signed); value 2147483648" in str(refused.value)


def test_a_null_in_a_field_that_holds_none_and_a_symbol_outside_an_enum_are_refused_naming_the_event() -> None:
    with EventBatch() as batch:
        with pytest.raises(EventValidationError, match=r"'b'.*WorkloadCompleted\.outcome.*'done'"):
            batch.add("WorkloadCompleted", {
                "event_id": pa.array(["a", "b"]), "cluster": "c", "time": np.array([1, 2]), "workload_id": "w",
                "outcome": pa.array(["failed", "done"]),
            }, 2)  # fmt: skip
        with pytest.raises(EventValidationError, match=r"WorkloadRequeued\.workload_id"):
            batch.add("WorkloadRequeued", {
                "event_id": pa.array(["a"]), "cluster": "c", "time": np.array([1]), "workload_id": pa.array([None],
                                                                                                            pa.string()),
            }, 1)  # fmt: skip
        assert len(batch) == 0  # nothing of a refused call was taken


def _row(columns: dict[str, Any], row: int) -> dict[str, Any]:
    def one(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value[row].item()
        if isinstance(value, pa.Array):
            return value[row].as_py()
        return value

    return {name: one(value) for name, value in columns.items()}
