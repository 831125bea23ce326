"""Imports go into the log through the log's own encoder, with every guarantee of a trusted append
(one batch, nothing half-written, ids already present skipped)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ledger import events as ev
from ledger.adapters.csv_trace import CsvOptions, import_csv, parse_column_map
from ledger.adapters.sink import append_imports_to_log
from ledger.adapters.slurm import SlurmOptions, import_sacct_file
from ledger.codec import union_schema
from ledger.errors import EventValidationError
from ledger.log import EventLog
from ledger.log.avro_encode import union_encoder
from ledger.log.batch import EventBatch
from ledger.log.checks import FULL_NAMES

from .helpers import DATA

T0 = ev.to_us(ev.EARLIEST) + 1


def test_an_import_into_the_log_reads_back_as_its_records_and_a_second_import_adds_nothing(tmp_path: Path) -> None:
    res = import_sacct_file(DATA / "slurm" / "requeues-steps-arrays.txt")
    assert not res.rejected
    log = tmp_path / "events"
    assert append_imports_to_log(log, [res]) == len(res.records)
    assert append_imports_to_log(log, [res]) == 0  # ids derived from the source: a re-import adds nothing
    with EventLog(log, readonly=True) as read:
        assert [e.event_id for e in read] == [r["event_id"] for _, r in res.records]
        assert list(read) == res.events


def test_text_utf8_cannot_hold_is_refused_by_the_logs_encoder_naming_the_value(tmp_path: Path) -> None:
    opts = CsvOptions(columns=parse_column_map("workload_id=id,submit=submit,gpus=gpus,user=user"))
    res = import_csv(
        ["id,submit,gpus,user", "a,2026-03-02T10:00:00,1,ada", "b,2026-03-02T10:00:00,1,\ud800"], "t", opts
    )
    assert res.workloads == 2
    with pytest.raises(EventValidationError, match=r"'csv/csv/b/submit': WorkloadSubmitted.user: text that UTF-8"):
        append_imports_to_log(tmp_path / "events", [res])
    with EventLog(tmp_path / "events") as log:
        assert len(log) == 0  # nothing half-written


def test_events_added_whole_are_sorted_in_among_the_histories_and_read_back_in_that_order(tmp_path: Path) -> None:
    res = import_sacct_file(DATA / "slurm" / "unit-job-arrays.log", SlurmOptions(gpus_for_cpu_jobs=1))
    first = min(r["time"] for _, r in res.records)
    extra = ev.WorkloadRequeued(event_id="x/1", cluster="c", time=ev.from_us(first), workload_id="w")
    res.add_event(extra)
    times = [r["time"] for _, r in res.records]
    assert times == sorted(times) and "x/1" in [r["event_id"] for _, r in res.records]
    append_imports_to_log(tmp_path / "events", [res])
    with EventLog(tmp_path / "events", readonly=True) as read:
        assert [e.event_id for e in read] == [r["event_id"] for _, r in res.records]


def test_encoded_records_need_one_id_each() -> None:
    with EventBatch() as batch, pytest.raises(ValueError, match="1 event ids for 2"):
        batch.add_encoded(pa.array([b"", b""], pa.binary()), ["a"])


def test_encoded_records_skip_ids_already_in_the_log_and_repeats_inside_the_batch(tmp_path: Path) -> None:
    records = import_sacct_file(DATA / "slurm" / "requeues-steps-arrays.txt").records
    encoder = union_encoder(union_schema())  # type: ignore[arg-type]  # the log's schema is a union (a list)
    ids, data = [r["event_id"] for _, r in records], [encoder.encode(FULL_NAMES[n], r) for n, r in records]

    def append(log: EventLog, ids: list[str], data: list[bytes]) -> int:
        with EventBatch() as batch:
            batch.add_encoded(pa.array(data, pa.binary()), ids)
            return log.append_batch(batch)

    with EventLog(tmp_path / "events") as log:
        assert append(log, ids[:5], data[:5]) == 5
        # the first five again, then all of them with one repeated: only the rest are new, each once
        assert append(log, ids + ids[7:8], data + data[7:8]) == len(ids) - 5
        assert append(log, ids, data) == 0
