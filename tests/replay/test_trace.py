"""Reading workload traces: good rows become submissions, each bad row is named by line, field and reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.errors import InputError
from ledger.events import validated
from ledger.replay.trace import COLUMNS, parse_time, read_trace, write_trace

HEADER = ",".join(COLUMNS)
GOOD = "pre-1,2026-03-02T00:00:00Z,lab/lm/pretrain,ana,32,28800,true,172800,1800,600,1,training"


def write(tmp_path: Path, *rows: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_a_good_row_becomes_a_submission_carrying_the_hints(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, GOOD), "lab")
    (sub,) = trace.submissions
    assert trace.rejected == []
    assert (sub.workload_id, sub.budget, sub.user, sub.gpus) == ("pre-1", "lab/lm/pretrain", "ana", 32)
    assert (sub.min_runtime_s, sub.resumable, sub.priority, sub.kind) == (28800, True, 1, "training")
    assert (sub.work_s, sub.checkpoint_interval_s, sub.restart_s) == (172800, 1800, 600)
    assert sub.time == datetime(2026, 3, 2, tzinfo=UTC)
    assert validated(sub) == sub


def test_each_bad_row_is_rejected_with_its_line_field_and_reason_and_the_rest_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        GOOD,
        "b-1,yesterday,lab/lm/pretrain,ana,8,600,true,600,0,0,0,debug",  # line 3: time
        "b-2,2026-03-02T01:00:00,lab/lm/pretrain,ana,0,600,true,600,0,0,0,debug",  # line 4: gpus
        "b-3,2026-03-02T01:00:00,lab/lm/pretrain,ana,8,600,maybe,600,0,0,0,debug",  # line 5: resumable
        "ok-2,1772413200,lab/lm/pretrain,bo,8,600,false,600,,,,",  # line 6: good, epoch seconds, defaults
        "b-4,2026-03-02T01:00:00,lab/lm/pretrain,ana,8,600,true,600,0,0,0,nap",  # line 7: kind
        "pre-1,2026-03-02T02:00:00Z,lab/lm/pretrain,ana,8,600,true,600,0,0,0,debug",  # line 8: duplicate
        "b-5,2026-03-02T01:00:00,lab//x,ana,8,600,true,600,0,0,0,debug",  # line 9: budget path
        "b-6,2026-03-02T01:00:00,lab/lm/pretrain,ana,8,-5,true,600,0,0,0,debug",  # line 10: min runtime
    )
    trace = read_trace(path, "lab")
    assert [s.workload_id for s in trace.submissions] == ["pre-1", "ok-2"]
    got = [(r.line, r.field, r.value) for r in trace.rejected]
    assert got == [
        (3, "submit_time", "yesterday"),
        (4, "gpus", "0"),
        (5, "resumable", "maybe"),
        (7, "kind", "nap"),
        (8, "workload_id", "pre-1"),
        (9, "budget", "lab//x"),
        (10, "min_runtime_s", "-5"),
    ]
    assert "already submitted on line 2" in trace.rejected[4].reason
    assert str(trace.rejected[1]).startswith(f"{path}:4: gpus = '0': must be at least 1")
    ok = trace.submissions[1]
    assert ok.time == datetime(2026, 3, 2, 1, tzinfo=UTC)
    assert (ok.priority, ok.kind, ok.checkpoint_interval_s, ok.restart_s) == (0, "batch", 0, 0)


def test_strict_refuses_the_whole_trace_naming_the_bad_lines(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "b-1,2026-03-02T01:00:00,lab/lm/pretrain,ana,two,600,true,600,0,0,0,debug")
    with pytest.raises(InputError, match=r"trace.csv:3: gpus = 'two': expected a whole number"):
        read_trace(path, "lab", strict=True)


def test_unknown_budgets_and_impossible_widths_are_rejected_when_the_cluster_is_known(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        GOOD,
        "w-1,2026-03-02T01:00:00,lab/lm/pretrain,ana,2048,600,true,600,0,0,0,debug",
        "w-2,2026-03-02T01:00:00,lab/nowhere,ana,8,600,true,600,0,0,0,debug",
    )
    trace = read_trace(path, "lab", budgets={"lab", "lab/lm", "lab/lm/pretrain"}, max_gpus=1024)
    assert [(r.line, r.field) for r in trace.rejected] == [(3, "gpus"), (4, "budget")]


def test_a_header_without_the_required_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("workload_id,submit_time,gpus\nx,2026-03-02T00:00:00Z,8\n")
    with pytest.raises(InputError, match="header lacks column"):
        read_trace(path, "lab")


def test_json_lines_traces_read_like_csv_ones_and_bad_json_is_a_rejected_line(tmp_path: Path) -> None:
    row = dict(zip(COLUMNS, GOOD.split(","), strict=True))
    row.update(gpus=32, resumable=True, work_s=172800)
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(row) + "\n\n{not json\n" + json.dumps({**row, "workload_id": "x", "gpus": -1}) + "\n")
    trace = read_trace(path, "lab")
    assert [s.workload_id for s in trace.submissions] == ["pre-1"]
    assert [(r.line, r.field) for r in trace.rejected] == [(3, "(line)"), (4, "gpus")]


def test_times_without_an_offset_are_utc_and_offsets_are_converted() -> None:
    assert parse_time("2026-03-02T08:00:00") == datetime(2026, 3, 2, 8, tzinfo=UTC)
    assert parse_time("2026-03-02T10:00:00+02:00") == datetime(2026, 3, 2, 8, tzinfo=UTC)
    assert parse_time(1772438400) == datetime(2026, 3, 2, 8, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_time("1e30")


def test_a_written_trace_reads_back_the_same_submissions(tmp_path: Path) -> None:
    first = read_trace(write(tmp_path, GOOD, "ok-2,1772413200,lab/lm/pretrain,bo,8,600,false,600,,,,"), "lab")
    write_trace(tmp_path / "again.csv", first.submissions)
    again = read_trace(tmp_path / "again.csv", "lab")
    assert [s.model_dump(exclude={"event_id"}) for s in again.submissions] == [
        s.model_dump(exclude={"event_id"}) for s in first.submissions
    ]


def test_a_row_with_more_fields_than_the_header_is_rejected_not_cut_short(tmp_path: Path) -> None:
    # Line 3 carries a thirteenth value the header has no column for (a stray comma, a shifted row):
    # its values cannot be trusted to sit under the right columns, and the extra one would be
    # silently dropped. It is set aside, naming the line and the count, like an unreadable line.
    path = write(tmp_path, GOOD, "x-1,2026-03-02T01:00:00Z,lab/lm/pretrain,ana,8,600,true,600,0,0,0,debug,oops")
    trace = read_trace(path, "lab")
    assert [s.workload_id for s in trace.submissions] == ["pre-1"]
    (bad,) = trace.rejected
    assert (bad.line, bad.field) == (3, "(line)")
    assert str(bad) == f"{path}:3: has 13 fields, the header 12: 'oops' has no column"


def test_epoch_seconds_out_of_range_are_told_as_such_not_as_an_unreadable_time(tmp_path: Path) -> None:
    # 1e12 epoch seconds is the year 33658, milliseconds mistaken for seconds: the row is rejected
    # saying the number lies outside the span a log can hold, not that it is no time at all.
    path = write(tmp_path, GOOD, "ms-1,1772438400000,lab/lm/pretrain,ana,8,600,true,600,0,0,0,debug")
    (bad,) = read_trace(path, "lab").rejected
    assert (bad.line, bad.field, bad.value) == (3, "submit_time", "1772438400000")
    assert bad.reason == "epoch seconds must lie between 2000-01-01 and 2100-01-01"
    with pytest.raises(ValueError, match="epoch seconds must lie between"):
        parse_time("-5")


def test_a_json_value_that_is_no_text_is_rejected_for_a_text_field(tmp_path: Path) -> None:
    # JSON Lines can carry an object, a list or a boolean where a name belongs: the row was replayed
    # with the value's Python spelling as the name ("{'x': 1}" as the user, "['lab/lm']" as the path).
    row = dict(zip(COLUMNS, GOOD.split(","), strict=True))
    lines = [
        {**row, "workload_id": "u-obj", "user": {"x": 1}},
        {**row, "workload_id": "b-list", "budget": ["lab", "lm"]},
        {**row, "workload_id": True},
        {**row, "workload_id": "fine", "user": 7},  # a number is text enough for a name
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    trace = read_trace(path, "lab")
    assert [s.workload_id for s in trace.submissions] == ["fine"] and trace.submissions[0].user == "7"
    assert [(r.line, r.field, r.reason) for r in trace.rejected] == [
        (1, "user", "expected text"), (2, "budget", "expected text"), (3, "workload_id", "expected text"),
    ]
