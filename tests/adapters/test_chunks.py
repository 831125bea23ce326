"""A file read a few lines at a time gives what it gives read whole: the same events, bytes, rejections and counts.

The readers take a file a piece at a time (``ledger.adapters.lines.SIZE`` bytes) and the import's
batch keeps its events in sorted runs on disk past its memory. Here the pieces are made a few
dozen bytes long and the batch's memory a few kilobytes, so that jobs, repeated ids and
contradictory records fall across chunk boundaries, and every pinned file must still read as it
reads in one chunk.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ledger.adapters import csv_trace, lines, slurm
from ledger.adapters.common import ImportResult
from ledger.adapters.csv_trace import CsvOptions, import_csv, import_csv_bytes, import_csv_file, parse_column_map
from ledger.adapters.slurm import SlurmOptions, import_sacct, import_sacct_bytes, import_sacct_file
from ledger.cli import main
from ledger.log import batch as log_batch

from .helpers import DATA
from .test_output_pinned import FULL_MAP, ITP_MAP, TEAM_MAP, _full_csv, _mangled_sacct

SLURM = DATA / "slurm"
SACCT_FILES = sorted(p.name for p in SLURM.iterdir() if p.suffix in (".log", ".txt") and "sacctmgr" not in p.name
                     and "sinfo" not in p.name)  # fmt: skip


def account(res: ImportResult) -> tuple[Any, ...]:
    """Everything an import tells: its records in order, rejections, skips, counts and notes."""
    return res.records, res.rejected, res.skipped, res.rows_read, res.workloads, res.notes


def in_small_pieces(monkeypatch: pytest.MonkeyPatch, read: Callable[[], ImportResult], size: int) -> ImportResult:
    monkeypatch.setattr(lines, "SIZE", size)
    try:
        return read()
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("name", SACCT_FILES)
@pytest.mark.parametrize(("size", "tables"), [(40, 1), (333, slurm.TABLES)])
def test_a_sacct_file_read_a_few_lines_at_a_time_reads_as_it_reads_whole(
    name: str, size: int, tables: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read 40 bytes at a time with every chunk's records waiting on disk, or 333 at a time kept in memory."""
    opts = SlurmOptions(gpus_for_cpu_jobs=1, tz=ZoneInfo("America/Los_Angeles"))
    whole = import_sacct_file(SLURM / name, opts)

    def read() -> ImportResult:
        monkeypatch.setattr(slurm, "TABLES", tables)
        return import_sacct_file(SLURM / name, opts)

    assert account(in_small_pieces(monkeypatch, read, size)) == account(whole)


def test_sacct_lines_given_as_strings_read_in_chunks_as_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = SlurmOptions(gpus_for_cpu_jobs=1, tz=ZoneInfo("Europe/Berlin"))
    whole = import_sacct(_mangled_sacct(), "mangled.log", opts)
    monkeypatch.setattr(slurm, "LINES", 7)
    monkeypatch.setattr(slurm, "TABLES", 1)
    assert account(import_sacct(_mangled_sacct(), "mangled.log", opts)) == account(whole)
    assert len(whole.rejected) >= 100


def test_a_requeued_job_whose_records_and_steps_lie_in_different_chunks_is_one_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Job 5001 ran twice (a preemption, then a completion); its records and steps are read four lines at a time."""
    opts = SlurmOptions(tz=ZoneInfo("America/Los_Angeles"))
    text = (SLURM / "requeues-steps-arrays.txt").read_text()
    whole = import_sacct(text.splitlines(keepends=True), "r.txt", opts)
    monkeypatch.setattr(slurm, "LINES", 4)
    res = import_sacct(text.splitlines(keepends=True), "r.txt", opts)
    assert account(res) == account(whole)
    story = [(name, r["event_id"].rsplit("/", 1)[1]) for name, r in res.records if r["workload_id"] == "5001"]
    assert story == [
        ("WorkloadSubmitted", "submit"), ("WorkloadStarted", "start1"), ("WorkloadPreempted", "preempt1"),
        ("WorkloadRequeued", "requeue1"), ("WorkloadStarted", "start2"), ("WorkloadCompleted", "end"),
    ]  # fmt: skip
    assert res.skipped["job step (folded into its job)"] == 5  # 5001's four (over three chunks) and 5007's
    assert res.skipped["job step whose job is not in the file"] == 1


def test_records_of_one_job_that_contradict_each_other_across_chunks_are_refused_by_the_last_ones_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head = "JobID|Cluster|Account|User|State|Submit|Start|End|AllocTRES"
    rows = [
        "7|c|a|u|PREEMPTED|2026-03-02T09:00:00|2026-03-02T09:10:00|2026-03-02T11:00:00|gres/gpu=4",
        *(f"{k}|c|a|u|COMPLETED|2026-03-02T09:00:00|2026-03-02T09:01:00|2026-03-02T09:30:00|gres/gpu=1"
          for k in range(100, 106)),
        # the second run of job 7 starts before its first ended: the records cannot both be true
        "7|c|a|u|COMPLETED|2026-03-02T10:00:00|2026-03-02T10:30:00|2026-03-02T12:00:00|gres/gpu=4",
    ]  # fmt: skip
    whole = import_sacct([head, *rows], "c.log")
    monkeypatch.setattr(slurm, "LINES", 3)
    split = import_sacct([head, *rows], "c.log")
    assert account(split) == account(whole)
    assert [(r.line, r.reason.split(":")[0]) for r in split.rejected] == [(9, "JobID 7")]
    assert "before the run of line 2 ended" in split.rejected[0].reason
    assert split.workloads == 6


def test_a_sacct_file_with_a_form_feed_and_carriage_returns_is_split_as_python_splits_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The carriage returns come late in the file, the form feed early: the file is read twice, then whole."""
    good = (SLURM / "pozidriv-slice.log").read_text().splitlines()[:30]
    text = "\n".join(good[:3]) + "\x0c" + "\n".join(good[3:20]) + "\n" + "\r\n".join(good[20:]) + "\r\n"
    path = tmp_path / "odd.log"
    path.write_bytes(text.encode())
    expected = import_sacct(text.splitlines(keepends=True), str(path), SlurmOptions(gpus_for_cpu_jobs=1))
    got = in_small_pieces(monkeypatch, lambda: import_sacct_file(path, SlurmOptions(gpus_for_cpu_jobs=1)), 500)
    assert account(got) == account(expected)
    assert import_sacct_bytes(text.encode(), str(path), SlurmOptions(gpus_for_cpu_jobs=1)).records == got.records


CSV_CASES: dict[str, tuple[Callable[[], list[str]], CsvOptions]] = {
    "ITP": (lambda: (DATA / "itp" / "cluster10.csv").read_text().splitlines(keepends=True),
            CsvOptions(columns=parse_column_map(ITP_MAP), epoch="2021-03-04T00:00:00", cluster="itp10")),
    "team export": (lambda: (DATA / "csv" / "team-export.csv").read_text().splitlines(keepends=True),
                    CsvOptions(columns=parse_column_map(TEAM_MAP), tz=ZoneInfo("Asia/Tokyo"))),
    "full CSV": (lambda: _full_csv(False), CsvOptions(columns=parse_column_map(FULL_MAP))),
    "full CSV with malformed rows": (lambda: _full_csv(True),
                                     CsvOptions(columns=parse_column_map(FULL_MAP), tz=ZoneInfo("America/Chicago"))),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CSV_CASES))
@pytest.mark.parametrize("size", [30, 1000])
def test_a_csv_split_by_pyarrow_in_small_pieces_reads_as_the_csv_module_reads_it_whole(
    case: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, opts = CSV_CASES[case]
    whole = import_csv(text(), "t.csv", opts)  # the csv module, every row at once
    data = "".join(text()).encode()
    assert account(in_small_pieces(monkeypatch, lambda: import_csv_bytes(data, "t.csv", opts), size)) == account(whole)


def test_line_breaks_of_every_kind_and_blank_lines_count_as_the_csv_module_counts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "id,submit,gpus\r\na,100,1\r\n\r\nb,100,2\rc,100,x\n   \nd,100,1,9\ne,100,3"
    opts = CsvOptions(columns=parse_column_map("workload_id=id,submit=submit,gpus=gpus"), epoch="2026-03-02")
    whole = import_csv(io.StringIO(text, newline=""), "t.csv", opts, plain=True)
    assert [(r.line, r.reason) for r in whole.rejected] == [
        (5, "gpus 'x' is not a number"), (7, "expected 3 fields, found 4")
    ]  # fmt: skip
    for size in (5, 17, 64):
        assert account(in_small_pieces(monkeypatch, lambda: import_csv_bytes(text.encode(), "t.csv", opts), size)) == (
            account(whole)
        )
    monkeypatch.setattr(csv_trace, "ROWS", 2)  # the csv module's rows, two at a time: lines count on
    assert account(import_csv(io.StringIO(text, newline=""), "t.csv", opts, plain=True)) == account(whole)


def test_a_workload_id_repeated_chunks_later_is_refused_naming_the_line_it_was_first_read_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = ["id,submit,gpus", *(f"job{k},{100 + k},1" for k in range(40)), "job3,900,2", "job39,901,1"]
    opts = CsvOptions(columns=parse_column_map("workload_id=id,submit=submit,gpus=gpus"), epoch="2026-03-02")
    res = in_small_pieces(monkeypatch, lambda: import_csv_bytes("\n".join(rows).encode(), "t.csv", opts), 50)
    assert [(r.line, r.reason) for r in res.rejected] == [
        (42, "workload_id 'job3' already on line 5"), (43, "workload_id 'job39' already on line 41")
    ]  # fmt: skip
    assert res.workloads == 40


def test_a_file_read_from_disk_in_pieces_with_a_quote_goes_to_the_csv_module_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quoted field may hold a line break: a file with one quote anywhere is read by the csv module."""
    text = "id,submit,gpus,user\n" + "".join(f"j{k},{k},1,u\n" for k in range(30)) + 'late,5,1,"a\nb"\n'
    path = tmp_path / "q.csv"
    path.write_text(text)
    opts = CsvOptions(columns=parse_column_map("workload_id=id,submit=submit,gpus=gpus,user=user"), epoch="2026-03-02")
    res = in_small_pieces(monkeypatch, lambda: import_csv_file(path, opts), 40)
    assert account(res) == account(import_csv(io.StringIO(text, newline=""), str(path), opts))
    assert ("WorkloadSubmitted", "a\nb") in [(n, r["user"]) for n, r in res.records]


def test_an_import_whose_batch_outgrows_its_memory_writes_the_same_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sorted runs on disk, merged as the block is written: the bytes of an import held in memory."""
    files = [str(SLURM / "pozidriv-slice.log"), str(SLURM / "requeues-steps-arrays.txt")]
    assert main(["import", "slurm", *files, "--gpus-for-cpu-jobs", "1", "--out", str(tmp_path / "whole")]) == 0
    monkeypatch.setattr(log_batch, "MEMORY", 4096)
    monkeypatch.setattr(lines, "SIZE", 2000)
    assert main(["import", "slurm", *files, "--gpus-for-cpu-jobs", "1", "--out", str(tmp_path / "runs")]) == 0
    segment = "00000001.avro"
    assert (tmp_path / "runs" / segment).read_bytes() == (tmp_path / "whole" / segment).read_bytes()
    capsys.readouterr()
