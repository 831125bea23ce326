"""Imports hand the log checked records: times as integer µs read exactly as ``parse_local_time`` reads them,
values the event schema cannot hold rejected by line, and the trusted append keeping every log guarantee."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.adapters.columns import times
from ledger.adapters.common import RowError, WallClock, parse_local_time
from ledger.adapters.csv_trace import CsvOptions, import_csv, parse_column_map
from ledger.adapters.slurm import SlurmOptions, import_sacct_file
from ledger.errors import EventValidationError, LogError
from ledger.log import EventLog

from .helpers import DATA, assert_all_valid

ZONES = [UTC, ZoneInfo("America/Los_Angeles"), ZoneInfo("Europe/Berlin"), ZoneInfo("Australia/Lord_Howe")]


@settings(max_examples=300, deadline=None)
@given(
    wall=st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30)),
    zone=st.sampled_from(ZONES),
    sep=st.sampled_from("T "),
)
def test_the_wall_clock_reads_every_time_as_the_slow_parser_does_cached_or_not(
    wall: datetime, zone: ZoneInfo, sep: str
) -> None:
    text = wall.replace(microsecond=0).isoformat(sep)
    clock = WallClock(zone)
    expected = ev.to_us(parse_local_time(text, zone, "t"))
    assert clock.us(text, "t") == expected  # first sight: parsed and remembered
    assert clock.us(text, "t") == expected  # from the caches
    # a neighbour sharing the day and the minute comes from the caches too
    other = (wall.replace(microsecond=0, second=0) + timedelta(seconds=(wall.second + 17) % 60)).isoformat(sep)
    assert clock.us(other, "t") == ev.to_us(parse_local_time(other, zone, "t"))


@settings(max_examples=60, deadline=None)
@given(
    walls=st.lists(st.datetimes(min_value=datetime(1999, 12, 30), max_value=datetime(2100, 1, 2)), min_size=1,
                   max_size=40),
    zone=st.sampled_from(ZONES),
    sep=st.sampled_from("T "),
    odd=st.lists(st.sampled_from(["2026-02-30T10:00:00", "2026-13-01 00:00:00", "2026-03-02T24:00:00",
                                  "2026-03-02T10:00", "2026-03-02T10:00:00+02:00", "yesterday", "2o26-03-02T10:00:00"]),
                 max_size=3),
)  # fmt: skip
def test_a_column_of_times_reads_each_as_the_slow_parser_does_or_refuses_it_with_its_words(
    walls: list[datetime], zone: ZoneInfo, sep: str, odd: list[str]
) -> None:
    texts = [w.replace(microsecond=0).isoformat(sep) for w in walls] + odd
    us, refused, why = times(pa.array(texts, pa.string()), zone, "t")
    for k, text in enumerate(texts):
        try:
            expected = ev.to_us(parse_local_time(text, zone, "t"))
        except RowError as exc:
            assert refused[k] and why(k) == str(exc)
        else:
            assert not refused[k] and us[k] == expected, text


def test_the_autumn_hour_that_occurs_twice_is_read_as_the_first_and_the_spring_gap_as_before_the_change() -> None:
    clock = WallClock(ZoneInfo("America/Los_Angeles"))
    assert ev.from_us(clock.us("2026-11-01 01:30:00", "t")) == datetime(2026, 11, 1, 8, 30, tzinfo=UTC)  # PDT
    assert ev.from_us(clock.us("2026-03-08 02:30:00", "t")) == datetime(2026, 3, 8, 10, 30, tzinfo=UTC)  # PST


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-13-01T00:00:00", "Submit '2026-13-01T00:00:00' is not an ISO 8601 time"),
        ("2026-03-02T25:00:00", "Submit '2026-03-02T25:00:00' is not an ISO 8601 time"),
        ("1999-12-31T23:59:59", "Submit 1999-12-31T23:59:59+00:00 lies outside 2000..2100"),
        ("2100-01-01 00:00:00", "Submit 2100-01-01T00:00:00+00:00 lies outside 2000..2100"),
    ],
)
def test_a_bad_time_names_the_field_and_the_value_even_when_its_day_is_already_known(text: str, reason: str) -> None:
    clock = WallClock(UTC)
    clock.us("2026-03-02T10:00:00", "Submit")  # day and times of day cached
    with pytest.raises(RowError) as err:
        clock.us(text, "Submit")
    assert str(err.value) == reason


def test_values_the_schema_cannot_hold_are_rejected_by_line_not_left_for_the_log() -> None:
    columns = parse_column_map("workload_id=id,submit=submit,start=start,gpus=gpus,priority=prio,min_runtime=min")
    lines = [
        "id,submit,start,gpus,prio,min",
        "ok,2026-03-02T10:00:00,2026-03-02T10:05:00,8,0,",
        "huge,2026-03-02T10:00:00,,4294967296,0,",
        "loud,2026-03-02T10:00:00,,8,2147483648,",
        "late,2099-12-31T23:00:00,2099-12-31T23:30:00,8,0,7200",
    ]
    res = import_csv(lines, "t.csv", CsvOptions(columns=columns))
    assert [(r.line, r.reason.split(" ")[0]) for r in res.rejected] == [(3, "gpus"), (4, "priority"), (5, "the")]
    assert "protected window" in res.rejected[2].reason
    assert res.workloads == 1
    assert_all_valid(res.events)


def test_a_sacct_job_with_more_gpus_than_avro_holds_is_rejected_by_its_line() -> None:
    from ledger.adapters.slurm import import_sacct

    header = "JobID|Cluster|Account|User|State|Submit|Start|End|AllocTRES"
    lines = [
        header,
        "1|c|a|u|COMPLETED|2026-03-02T10:00:00|2026-03-02T10:01:00|2026-03-02T11:00:00|gres/gpu=8",
        "2|c|a|u|COMPLETED|2026-03-02T10:00:00|2026-03-02T10:01:00|2026-03-02T11:00:00|gres/gpu=4294967296",
    ]
    res = import_sacct(lines, "s.log")
    assert [(r.line, r.reason) for r in res.rejected] == [(3, "gpus 4294967296 is not between 1 and 2147483647")]
    assert res.workloads == 1
    assert_all_valid(res.events)


def test_a_csv_row_that_never_ran_cannot_end_before_it_was_submitted() -> None:
    columns = parse_column_map("workload_id=id,submit=submit,start=start,end=end,gpus=gpus")
    lines = ["id,submit,start,end,gpus", "a,2026-03-02T10:00:00,,2026-03-02T09:00:00,8"]
    res = import_csv(lines, "t.csv", CsvOptions(columns=columns))
    assert [(r.line, r.reason) for r in res.rejected] == [
        (2, "end 2026-03-02T09:00:00 is before submit 2026-03-02T10:00:00")
    ]


def test_a_real_sacct_slice_goes_through_the_trusted_append_and_reads_back_as_the_same_events(tmp_path: Path) -> None:
    res = import_sacct_file(DATA / "slurm" / "pozidriv-slice.log", SlurmOptions(gpus_for_cpu_jobs=1))
    assert res.records and not res.rejected
    with EventLog(tmp_path / "events") as log:
        assert log.append_records(res.records) == len(res.records)
        assert log.append_records(res.records) == 0  # ids derived from the source: a re-import adds nothing
    back = list(EventLog(tmp_path / "events", readonly=True))
    assert back == res.events
    assert_all_valid(back)


def test_the_trusted_append_refuses_an_unknown_type_and_a_read_only_log_and_writes_nothing(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events") as log:
        at = ev.to_us(datetime(2026, 3, 2, tzinfo=UTC))
        good = ("WorkloadRequeued", {"event_id": "c/x/1/requeue1", "cluster": "c", "time": at, "schema_version": 1,
                                     "workload_id": "1"})  # fmt: skip
        with pytest.raises(EventValidationError, match="WorkloadRequeud"):
            log.append_records([good, ("WorkloadRequeud", good[1])])
        with pytest.raises(EventValidationError, match="workload_id"):
            bad = {**good[1], "event_id": "c/x/2/requeue1", "workload_id": 7}  # Avro cannot encode it
            log.append_records([good, ("WorkloadRequeued", bad)])
        assert len(log) == 0
    with pytest.raises(LogError, match="read-only"):
        EventLog(tmp_path / "events", readonly=True).append_records([good])
