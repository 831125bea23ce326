"""The importers' output is pinned: the same files give the same records, bytes, ids and account, byte for byte.

Event ids are derived from the source record and users have already imported with them, so a
re-import must keep adding nothing: the ids, every value, the encoded block and the import
summary (rows read, skips, every rejection with its line and reason) of each test file, clean
or with malformed lines mixed in, are pinned as digests taken before any speed-up. A change that
alters any of them fails here; if a change of output is ever meant, it needs a migration note,
not a new digest.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ledger.adapters.common import ImportResult
from ledger.adapters.csv_trace import CsvOptions, import_csv, import_csv_file, parse_column_map
from ledger.adapters.philly import import_philly_file
from ledger.adapters.sink import append_imports_to_log
from ledger.adapters.slurm import SlurmOptions, import_sacct, import_sacct_file
from ledger.codec import union_schema
from ledger.log import EventLog
from ledger.log import batch as log_batch
from ledger.log.checks import FULL_NAMES
from ledger.log.container import BlockEncoder
from tests.replay.helpers import segment_bytes

from .helpers import DATA

SLURM = DATA / "slurm"


def digest(res: ImportResult) -> str:
    """Return a digest of everything an import yields: records (ids and values), their encoded block, the summary."""
    h = hashlib.sha256()
    h.update(json.dumps(res.records, sort_keys=True, default=list).encode())
    block = BlockEncoder(union_schema(), bytes(16)).encode([(FULL_NAMES[t], r) for t, r in res.records])
    h.update(block)
    rejected = [str(r).replace(str(DATA), "DATA") for r in res.rejected]  # messages name the file: not where it sits
    summary = [res.rows_read, res.workloads, sorted(res.skipped.items()), rejected, res.notes]
    h.update(json.dumps(summary).encode())
    return h.hexdigest()[:24]


def _mangled_sacct() -> list[str]:
    """The pozidriv slice with a malformed field every few lines, each kind of fault once per cycle."""
    out = []
    for k, line in enumerate((SLURM / "pozidriv-slice.log").read_text().splitlines()):
        f = line.split("|")
        match k % 23:
            case 3:
                f[10] = "2016-13-01T00:00:00"  # no such month
            case 5:
                f.pop()  # a field short
            case 7:
                f[16] = "BOGUS"  # no Slurm state
            case 9:
                f[12], f[13] = f[13], f[12]  # end before start
            case 11:
                f[17] = "two"  # NNodes
            case 13:
                f[23] = "1:2:3:4"  # time limit
            case 15:
                f[0] = f[1] = " "  # empty JobID
            case 17:
                f[12] = "2016-12-01 7:00:00"  # not the fixed form: the general parser's message
            case 19:
                f[21] = "cpu=4,gres/gpu:k80=2,gres/gpu=2"  # a GPU job
            case 21:
                f[13] = "Unknown"  # not ended
            case 22:
                f[10] = "1999-12-31T23:59:59"  # before the ledger's range
        out.append("|".join(f) + "\n")
    return out


def _full_csv(mangle: bool) -> list[str]:
    """The pozidriv rows as an id,submit,start,end,gpus,budget CSV (the benchmark's shape), optionally with faults."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "submit", "start", "end", "gpus", "budget"])
    for k, line in enumerate((SLURM / "pozidriv-slice.log").read_text().splitlines()):
        f = line.split("|")
        row = [f[0], f[10], f[12], f[13], str(1 + k % 3), f"{f[2]}/{f[5]}/{f[8]}"]
        if mangle:
            match k % 19:
                case 2:
                    row[4] = "1.5"
                case 4:
                    row[1] = "yesterday"
                case 6:
                    row[2] = ""  # never ran, yet ended: cancelled while waiting
                case 8:
                    row[0] = "977669"  # a repeated id
                case 10:
                    row[5] = "a//b"
                case 12:
                    row.pop()
                case 14:
                    row[4] = "0"
                case 16:
                    row[3] = ""  # still running
                case 18:
                    row[1] = "1480000000"  # Unix seconds
        w.writerow(row)
    return buf.getvalue().splitlines(keepends=True)


FULL_MAP = "workload_id=id,submit=submit,start=start,end=end,gpus=gpus,budget=budget"
TEAM_MAP = "workload_id=id,submit=submitted,start=started,end=finished,gpus=gpus,budget=team,user=user,outcome=status"
ITP_MAP = "workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu"

CASES: dict[str, Callable[[], ImportResult]] = {
    "pozidriv, GPU jobs only": lambda: import_sacct_file(SLURM / "pozidriv-slice.log"),
    "pozidriv, CPU jobs as 1 GPU": lambda: import_sacct_file(
        SLURM / "pozidriv-slice.log", SlurmOptions(gpus_for_cpu_jobs=1)
    ),
    "pozidriv, New York time, resumable": lambda: import_sacct_file(
        SLURM / "pozidriv-slice.log",
        SlurmOptions(tz=ZoneInfo("America/New_York"), gpus_for_cpu_jobs=2, resumable=True, min_runtime_s=600),
    ),
    "pozidriv with malformed lines": lambda: import_sacct(
        _mangled_sacct(), "mangled.log", SlurmOptions(gpus_for_cpu_jobs=1, tz=ZoneInfo("Europe/Berlin"))
    ),
    "phillips": lambda: import_sacct_file(SLURM / "phillips-slice.log", SlurmOptions(gpus_for_cpu_jobs=1)),
    "requeues, steps, arrays": lambda: import_sacct_file(
        SLURM / "requeues-steps-arrays.txt", SlurmOptions(tz=ZoneInfo("America/Los_Angeles"))
    ),
    "unit accounting logs": lambda: import_sacct_file(SLURM / "unit-accounting-logs.log", SlurmOptions(cluster="u")),
    "unit job arrays": lambda: import_sacct_file(SLURM / "unit-job-arrays.log", SlurmOptions(gpus_for_cpu_jobs=1)),
    "unit non-ended": lambda: import_sacct_file(
        SLURM / "unit-non-ended-job-state.log", SlurmOptions(gpus_for_cpu_jobs=1)
    ),
    "unit unknown state": lambda: import_sacct_file(
        SLURM / "unit-unknown-job-state.log", SlurmOptions(gpus_for_cpu_jobs=1)
    ),
    "philly": lambda: import_philly_file(DATA / "philly" / "jobs-slice.json"),
    "ITP": lambda: import_csv_file(
        DATA / "itp" / "cluster10.csv",
        CsvOptions(columns=parse_column_map(ITP_MAP), epoch="2021-03-04T00:00:00", cluster="itp10", budget="itp/c10"),
    ),
    "team export": lambda: import_csv_file(
        DATA / "csv" / "team-export.csv", CsvOptions(columns=parse_column_map(TEAM_MAP), tz=ZoneInfo("Asia/Tokyo"))
    ),
    "full CSV": lambda: import_csv(_full_csv(False), "full.csv", CsvOptions(columns=parse_column_map(FULL_MAP))),
    "full CSV with malformed rows": lambda: import_csv(
        _full_csv(True), "full.csv", CsvOptions(columns=parse_column_map(FULL_MAP), tz=ZoneInfo("America/Chicago"))
    ),
}

PINNED = {
    "ITP": "8591eb666dc7118c6084aa0d",
    "full CSV": "8338921c512e2065ae261956",
    "full CSV with malformed rows": "5f230fc2938465ad12e3da4f",
    "phillips": "033059e3710fab0338640788",
    "philly": "9adf9773c81757c12bd2c5c8",
    "pozidriv with malformed lines": "28eacfedddf9aacf2228320b",
    "pozidriv, CPU jobs as 1 GPU": "3c0c582a008348f9040daa0d",
    "pozidriv, GPU jobs only": "4e6dc4138c96b5ce4a07da7f",
    "pozidriv, New York time, resumable": "4dc918f5aef5ffe16070d27e",
    "requeues, steps, arrays": "36dc30ffe1127fe5c3a0b600",
    "team export": "770614f5bcf4283d2e86ad4e",
    "unit accounting logs": "bf989448374d3443c1e56d88",
    "unit job arrays": "042cc5a75234bf7481cf4b6c",
    "unit non-ended": "10d596f9aff9fe89bb83eaec",
    "unit unknown state": "9aefafcee14ed4556dff197f",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_import_gives_exactly_the_records_ids_bytes_and_summary_it_gave_before(case: str) -> None:
    res = CASES[case]()
    assert res.records or res.skipped or res.rejected, "a pinned case must produce something"
    assert digest(res) == PINNED[case]


def test_the_malformed_cases_do_reject_lines_so_their_messages_are_pinned_too() -> None:
    assert len(CASES["pozidriv with malformed lines"]().rejected) >= 100
    assert len(CASES["full CSV with malformed rows"]().rejected) >= 50


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_column_batch_writes_every_pinned_import_as_the_record_by_record_writer(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log an import writes through its batch of columns (held in memory, or sorted into runs on disk)."""
    res = CASES[case]()
    with EventLog(tmp_path / "records") as log:
        log.append_records(res.records)  # each record encoded by the per-record encoder: the pinned block
    for memory in (None, 2048):
        monkeypatch.setattr(log_batch, "MEMORY", memory or log_batch.MEMORY)
        append_imports_to_log(tmp_path / f"columns-{memory}", [CASES[case]()])
        assert segment_bytes(tmp_path / f"columns-{memory}") == segment_bytes(tmp_path / "records")
