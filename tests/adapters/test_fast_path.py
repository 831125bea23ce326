"""The column-wise fast path and the per-row reader give the same import, row for row, whatever the file holds.

Files mix the common rows with every kind the fast path must hand over (bad dates, bad GPU
counts, odd TRES, job steps, requeue duplicates, pending array ranges, revoked jobs, unknown
states, short rows) in several time zones; the fast import must equal the per-row import in its
events' ids and bytes, its records, and its account (rows read, skips, every rejection).
"""

from __future__ import annotations

import io
import random
from zoneinfo import ZoneInfo

import pytest

from ledger.adapters.common import ImportResult
from ledger.adapters.csv_trace import CsvOptions, import_csv_bytes, import_csv_rows, parse_column_map
from ledger.adapters.slurm import SlurmOptions, import_sacct_bytes, import_sacct_rows

from .helpers import DATA

SLURM = DATA / "slurm"


def _account(res: ImportResult) -> tuple[object, ...]:
    return (res.rows_read, res.workloads, sorted(res.skipped.items()), [str(r) for r in res.rejected], res.notes)


def assert_same(fast: ImportResult, rows: ImportResult) -> None:
    """Assert two imports of one file are the same import."""
    assert _account(fast) == _account(rows)
    assert fast.wire_columns() == rows.wire_columns()
    assert fast.records == rows.records


def _faults(f: list[str], k: int, rng: random.Random) -> list[str]:
    """Return a pozidriv row (26 fields) with the fault number ``k`` (0: none) put in."""
    g = list(f)
    match k:
        case 1:
            g[10] = "2016-02-30T00:00:00"  # no such day
        case 2:
            g[12] = "2016-12-01 7:00:00"  # not the fixed form
        case 3:
            g[22] = "billing=1,gres/gpu=x"  # a TRES without a count
        case 4:
            g[22] = f"cpu=4,gres/gpu:v100={rng.randint(1, 8)},gres/gpu={rng.randint(1, 8)}"
        case 5:
            g[22] = "gres/gpu=99999999999"  # beyond a 32-bit count
        case 6:
            g[0] = g[1] = f"{f[0]}.batch"  # a step of its job
        case 7:
            g[0] = g[1] = f"{f[0]}.0"
            g[22] = "gres/gpu=2"  # a step with GPUs, for a job that may have none
        case 8:
            g[16] = "REQUEUED"  # an earlier run of a requeued job (its duplicate follows)
        case 9:
            g[0] = g[1] = f"{f[0].split('_')[0]}_[1-3,7%2]"  # a pending array range
            g[16] = "PENDING"
        case 10:
            g[16] = "REVOKED"
        case 11:
            g[16] = "SOMETHING"
        case 12:
            g[13] = "Unknown"  # COMPLETED but not ended: rejected
        case 13:
            g[23] = "1:2:3:4"
        case 14:
            g[17] = " 2"  # NNodes with a space: the per-row reader strips it
        case 15:
            g[8] = ""  # no user: the UID stands in
        case 16:
            g[24] = "None assigned"
        case 17:
            g[12], g[13] = g[13], g[12]  # ends before it starts
        case 18:
            g[10] = "2100-01-01T00:00:00"  # past the ledger's range
        case 19:
            g[16] = "PREEMPTED"
        case 20:
            g[16] = "NODE_FAIL"
        case 21:
            g[23] = "UNLIMITED"
        case 22:
            g[2] = " "  # no cluster
        case 23:
            g[0] = g[1] = f"{f[0]}_{rng.randint(1, 8)}"  # an array task, perhaps one a range names
    return g


def mixed_sacct(seed: int, short_rows: bool = False) -> bytes:
    """The pozidriv slice with faults of every kind mixed in at random, some rows repeated."""
    rng = random.Random(seed)
    base = [line.split("|") for line in (SLURM / "pozidriv-slice.log").read_text().splitlines() if line]
    out = []
    for f in base:
        k = rng.randrange(24) if rng.random() < 0.5 else 0
        out.append(_faults(f, k, rng))
        if k == 8 or rng.random() < 0.03:
            out.append(list(f))  # the job's next record, or an identical repeat
    if short_rows:
        out[len(out) // 2] = out[len(out) // 2][:-1]
    return "".join("|".join(g) + "\n" for g in out).encode()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Europe/Berlin"])
def test_a_sacct_file_mixing_every_kind_of_row_imports_the_same_either_way(seed: int, zone: str) -> None:
    data = mixed_sacct(seed)
    opts = SlurmOptions(tz=ZoneInfo(zone), gpus_for_cpu_jobs=seed % 2, resumable=seed == 3, min_runtime_s=600 * seed)
    fast = import_sacct_bytes(data, "mixed.log", opts)
    if opts.gpus_for_cpu_jobs:  # (else the common rows are CPU jobs, skipped)
        assert fast.batches and len(fast.batches[0]) > 100, "the fast path must take the common rows"
    assert fast.rejected, "the file must hold rows the per-row reader rejects"
    rows = import_sacct_rows(data.decode().splitlines(keepends=True), "mixed.log", opts)
    assert_same(fast, rows)


def test_a_file_with_a_header_and_a_cluster_option_imports_the_same_either_way() -> None:
    text = (SLURM / "requeues-steps-arrays.txt").read_text()
    opts = SlurmOptions(tz=ZoneInfo("America/Los_Angeles"), cluster="lab")
    fast = import_sacct_bytes(text.encode(), "r.txt", opts)
    assert_same(fast, import_sacct_rows(text.splitlines(keepends=True), "r.txt", opts))


def test_a_file_the_fast_path_cannot_split_is_read_row_by_row_with_the_same_result() -> None:
    data = mixed_sacct(1, short_rows=True)
    fast = import_sacct_bytes(data, "short.log", SlurmOptions(gpus_for_cpu_jobs=1))
    rows = import_sacct_rows(data.decode().splitlines(keepends=True), "short.log", SlurmOptions(gpus_for_cpu_jobs=1))
    assert any("fields, found" in str(r) for r in rows.rejected)
    assert_same(fast, rows)


def mixed_csv(seed: int, iso: bool, line_end: str) -> bytes:
    """The pozidriv rows as a CSV (ISO times, or whole seconds), faults of every kind mixed in at random."""
    rng = random.Random(seed)
    out = ["id,submit,start,end,gpus,budget,duration"]
    for f in (SLURM / "pozidriv-slice.log").read_text().splitlines():
        g = f.split("|")
        if iso:
            row = [g[0], g[10], g[12], g[13], str(rng.randint(1, 4)), f"{g[2]}/{g[5]}", ""]
        else:
            row = [g[0], str(rng.randint(0, 10**6)), "", "", str(rng.randint(1, 4)), "", str(rng.randint(0, 9999))]
            if rng.random() < 0.5:
                row[2] = str(int(row[1]) + rng.randint(0, 5000))
        match rng.randrange(20) if rng.random() < 0.5 else 0:
            case 1:
                row[4] = "1.5"  # fractional GPUs
            case 2:
                row[4] = "0"  # not a GPU workload
            case 3:
                row[1] = "yesterday"
            case 4:
                row[2] = ""  # never ran (yet may have ended)
            case 5:
                row[3] = ""  # still running
            case 6:
                row[0] = out[-1].split(",")[0] if len(out) > 1 else row[0]  # the id of the row before
            case 7:
                row[0] = f" {out[-1].split(',')[0].strip()}"  # the id of the row before, once stripped
            case 8:
                row[5] = "a//b"
            case 9:
                row.pop()  # a field short
            case 10:
                row.append("x")  # one too many
            case 11:
                row[1] = "1480000000"  # Unix seconds among ISO times
            case 12:
                row[2], row[1] = row[1], row[2]  # starts before it was submitted
            case 13:
                row[6] = "12.0"  # a duration the fast path leaves alone
            case 14:
                row[4] = "4 "
            case 15:
                row[1] = "2016-12-01 7:00:00"
            case 16:
                row[4] = "99999999999"  # beyond a 32-bit count
            case 17:
                row[5] = ""  # the --budget default
            case 18:
                row[2] = "2099-12-31T23:00:00"  # its protected window ends after 2100
            case 19:
                row[0] = ""
        out.append(",".join(row))
    out.insert(len(out) // 2, "")  # a blank line
    return (line_end.join(out) + line_end).encode()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    ("iso", "zone", "epoch", "line_end"),
    [(True, "UTC", None, "\n"), (True, "America/Chicago", None, "\r\n"), (False, "UTC", "2021-03-04T00:00:00", "\n")],
)
def test_a_csv_file_mixing_every_kind_of_row_imports_the_same_either_way(
    seed: int, iso: bool, zone: str, epoch: str | None, line_end: str
) -> None:
    data = mixed_csv(seed, iso, line_end)
    cols = "workload_id=id,submit=submit,start=start,end=end,gpus=gpus,budget=budget"
    if not iso:
        cols += ",duration=duration"
    opts = CsvOptions(columns=parse_column_map(cols), tz=ZoneInfo(zone), epoch=epoch, budget="lab/default")
    fast = import_csv_bytes(data, "mixed.csv", opts)
    assert fast.batches and len(fast.batches[0]) > 100, "the fast path must take the common rows"
    assert fast.rejected, "the file must hold rows the per-row reader rejects"
    rows = import_csv_rows(io.StringIO(data.decode(), newline=""), "mixed.csv", opts)
    assert_same(fast, rows)


def test_a_csv_with_quotes_or_other_fields_is_read_row_by_row_with_the_same_result() -> None:
    data = (DATA / "csv" / "team-export.csv").read_bytes()
    cols = "workload_id=id,submit=submitted,start=started,end=finished,gpus=gpus,budget=team,user=user,outcome=status"
    opts = CsvOptions(columns=parse_column_map(cols), tz=ZoneInfo("Asia/Tokyo"))
    fast = import_csv_bytes(data, "team.csv", opts)
    assert not fast.batches
    assert_same(fast, import_csv_rows(io.StringIO(data.decode(), newline=""), "team.csv", opts))


@pytest.mark.parametrize("where", ["job name", "user"])
def test_bytes_that_are_not_utf8_import_the_same_either_way(where: str) -> None:
    lines = mixed_sacct(2).split(b"\n")
    field = 25 if where == "job name" else 8
    for k in range(3, len(lines) - 1, 40):
        f = lines[k].split(b"|")
        f[field] = f[field] + b"\xff\xfe"
        lines[k] = b"|".join(f)
    data = b"\n".join(lines)
    opts = SlurmOptions(gpus_for_cpu_jobs=1)
    fast = import_sacct_bytes(data, "bad.log", opts)
    rows = import_sacct_rows(data.decode("utf-8", errors="replace").splitlines(keepends=True), "bad.log", opts)
    assert_same(fast, rows)
    assert bool(fast.batches) == (where == "job name")  # a field the rules read: the per-row reader takes the file
