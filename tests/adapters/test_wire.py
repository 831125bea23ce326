"""The importers write their events' Avro bytes directly: exactly the log's encoder's bytes for the same records,
and the log takes them with every guarantee of a trusted append (one batch, ids already present skipped)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.adapters.common import ImportResult
from ledger.adapters.csv_trace import CsvOptions, import_csv, parse_column_map
from ledger.adapters.history import History, Run, add_history, history_records
from ledger.adapters.sink import append_imports_to_log
from ledger.adapters.slurm import SlurmOptions, import_sacct_file
from ledger.codec import union_schema
from ledger.errors import EventValidationError
from ledger.log import EventLog
from ledger.log.avro_encode import union_encoder
from ledger.log.checks import FULL_NAMES

from .helpers import DATA

T0 = ev.to_us(ev.EARLIEST) + 1
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80)
times = st.integers(T0, T0 + 80 * 365 * 86_400_000_000)


@st.composite
def histories(draw: st.DrawFn) -> History:
    submit = draw(times)
    runs = []
    t = submit
    for _ in range(draw(st.integers(0, 3))):
        start = t + draw(st.integers(0, 10**12))
        end = draw(st.none() | st.just(start + draw(st.integers(0, 10**12))))
        run = Run(start, end, draw(st.lists(names, max_size=3).map(tuple)))
        run.preempted = draw(st.none() | st.sampled_from(["fair_share", "host_drain", "host_failure", "user"]))
        run.requeued = draw(st.booleans())
        runs.append(run)
        t = end if end is not None else start
    outcome = draw(st.none() | st.sampled_from(["succeeded", "failed", "cancelled"]))
    return History(
        workload_id=draw(names),
        submit=submit,
        budget=draw(names),
        user=draw(names),
        gpus=draw(st.integers(1, 2**31 - 1)),
        min_runtime_s=draw(st.integers(0, 86_400 * 30)),
        resumable=draw(st.booleans()),
        runs=runs,
        outcome=outcome,
        end=t if outcome is not None else None,
        nodes=draw(st.integers(0, 2**31 - 1)),
        priority=draw(st.integers(-(2**31), 2**31 - 1)),
        kind=draw(st.sampled_from(["batch", "training", "debug", "interactive", "other"])),
        work_s=draw(st.none() | st.integers(0, 2**63 - 1)),
    )


@settings(max_examples=300, deadline=None)
@given(hs=st.lists(histories(), min_size=1, max_size=4), cluster=names)
def test_the_bytes_written_directly_are_the_log_encoders_bytes_of_the_same_records(
    hs: list[History], cluster: str
) -> None:
    res = ImportResult("test", "t")
    for h in hs:
        add_history(res, h, cluster, "csv")
    records: list[tuple[str, dict[str, object]]] = []
    for h in hs:
        history_records(h, cluster, "csv", records)
    wire = res.wire()
    assert wire is not None
    encoder = union_encoder(union_schema())  # type: ignore[arg-type]
    assert [data for *_, data in wire] == [encoder.encode(FULL_NAMES[name], r) for name, r in records]
    assert [(t, name, eid) for t, name, eid, _ in wire] == [(r["time"], name, r["event_id"]) for name, r in records]


def test_an_import_into_the_log_reads_back_as_its_records_and_a_second_import_adds_nothing(tmp_path: Path) -> None:
    res = import_sacct_file(DATA / "slurm" / "requeues-steps-arrays.txt")
    assert res.wire() is not None and not res.rejected
    log = tmp_path / "events"
    assert append_imports_to_log(log, [res]) == len(res.records)
    assert append_imports_to_log(log, [res]) == 0  # ids derived from the source: a re-import adds nothing
    with EventLog(log, readonly=True) as read:
        assert [e.event_id for e in read] == [r["event_id"] for _, r in res.records]
        assert list(read) == res.events


def test_text_utf8_cannot_hold_goes_to_the_logs_encoder_which_refuses_the_batch_naming_the_value(
    tmp_path: Path,
) -> None:
    opts = CsvOptions(columns=parse_column_map("workload_id=id,submit=submit,gpus=gpus,user=user"))
    res = import_csv(
        ["id,submit,gpus,user", "a,2026-03-02T10:00:00,1,ada", "b,2026-03-02T10:00:00,1,\ud800"], "t", opts
    )
    assert res.workloads == 2 and res.wire() is None  # no direct bytes for a lone surrogate
    with pytest.raises(EventValidationError, match=r"'csv/csv/b/submit': WorkloadSubmitted.user: text that UTF-8"):
        append_imports_to_log(tmp_path / "events", [res])
    with EventLog(tmp_path / "events") as log:
        assert len(log) == 0  # nothing half-written


def test_encoded_records_need_one_id_each(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events") as log, pytest.raises(ValueError, match="1 event ids for 2"):
        log.append_encoded(["a"], [b"", b""])


def test_kueue_style_events_added_whole_are_encoded_by_the_logs_encoder_in_the_same_order() -> None:
    res = import_sacct_file(DATA / "slurm" / "unit-job-arrays.log", SlurmOptions(gpus_for_cpu_jobs=1))
    extra = ev.WorkloadRequeued(event_id="x/1", cluster="c", time=ev.from_us(T0), workload_id="w")
    res.add_event(extra)
    res.sort_events()
    wire = res.wire()
    assert wire is not None
    assert [eid for _, _, eid, _ in wire] == [r["event_id"] for _, r in res.records]


def test_encoded_appends_skip_ids_already_in_the_log_and_repeats_inside_the_batch(tmp_path: Path) -> None:
    res = import_sacct_file(DATA / "slurm" / "requeues-steps-arrays.txt")
    wire = res.wire()
    assert wire is not None
    ids, data = [eid for _, _, eid, _ in wire], [d for *_, d in wire]
    with EventLog(tmp_path / "events") as log:
        assert log.append_encoded(ids[:5], data[:5]) == 5
        # the first five again, then all of them with one repeated: only the rest are new, each once
        assert log.append_encoded(ids + ids[7:8], data + data[7:8]) == len(ids) - 5
        assert log.append_encoded(ids, data) == 0
        assert [e.event_id for e in log] == ids
    with EventLog(tmp_path / "events", readonly=True) as read:
        assert list(read) == res.events
