"""``gpuledger import``: the summary, the log it appends to, --strict, idempotent re-import, audits on the result."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from ledger.adapters.slurm import parse_gpus
from ledger.cli import main
from ledger.log import EventLog
from tests.adapters.helpers import DATA, size_bucket

POZIDRIV = DATA / "slurm" / "pozidriv-slice.log"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "lab"


def quantile_cont(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (DuckDB's quantile_cont)."""
    a = sorted(values)
    pos = (len(a) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return a[lo] + (a[hi] - a[lo]) * (pos - lo)


def test_import_prints_a_summary_and_a_second_import_adds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "log"
    assert main(["import", "slurm", str(POZIDRIV), "--out", str(out), "--gpus-for-cpu-jobs", "1"]) == 0
    first = capsys.readouterr()
    assert "rows read:   526" in first.out and "WorkloadPreempted    86" in first.out
    with EventLog(out, readonly=True) as log:
        n = len(log)
    assert f"appended {n} new events" in first.err  # status on stderr, the summary on stdout

    assert main(["import", "slurm", str(POZIDRIV), "--out", str(out), "--gpus-for-cpu-jobs", "1"]) == 0
    assert f"appended 0 new events to {out} ({n} already in the log)" in capsys.readouterr().err
    with EventLog(out, readonly=True) as log:
        assert len(log) == n


def test_strict_refuses_the_whole_import_when_one_line_is_malformed(tmp_path: Path) -> None:
    lines = POZIDRIV.read_text().splitlines()
    lines[40] = lines[40].replace("COMPLETED", "EXPLODED")
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "log"
    assert main(["import", "slurm", str(bad), "--out", str(out), "--strict", "--gpus-for-cpu-jobs", "1"]) == 2
    assert not out.exists()  # nothing written, not even an empty log
    # without --strict the rest goes in and the bad line is reported
    assert main(["import", "slurm", str(bad), "--out", str(out), "--gpus-for-cpu-jobs", "1"]) == 0
    with EventLog(out, readonly=True) as log:
        ids = {r["workload_id"] for _, r in log.records()}
    assert lines[40].split("|")[0] not in ids and len(ids) == 525


def test_wait_by_size_audit_of_an_imported_file_equals_the_files_own_columns(tmp_path: Path) -> None:
    from ledger.queries import audit

    out = tmp_path / "log"
    for path in (POZIDRIV, DATA / "slurm" / "phillips-slice.log"):
        assert main(["import", "slurm", str(path), "--out", str(out), "--gpus-for-cpu-jobs", "1"]) == 0
    direct: dict[str, list[float]] = {}
    for path in (POZIDRIV, DATA / "slurm" / "phillips-slice.log"):
        for line in path.read_text().splitlines():
            f = line.split("|")
            if f[24] == "None assigned":
                continue  # cancelled while pending: never started, no wait
            wait = (datetime.fromisoformat(f[12]) - datetime.fromisoformat(f[10])).total_seconds()
            direct.setdefault(size_bucket(parse_gpus(f[22]) or 1), []).append(wait)

    got = {b["size"]: b for b in audit(out)["wait_by_size"]["buckets"] if b["jobs"]}
    assert set(got) == set(direct) == {"1", "2-8"}
    for size, waits in direct.items():
        b = got[size]
        assert b["jobs"] == len(waits)
        assert b["mean_s"] == pytest.approx(sum(waits) / len(waits))
        for key, q in (("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99)):
            assert b[key] == pytest.approx(quantile_cont(waits, q)), (size, key)


def test_import_without_out_is_a_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "slurm", str(DATA / "slurm" / "unit-accounting-logs.log")]) == 0
    captured = capsys.readouterr()
    assert "no GPUs (CPU job)                        3" in captured.out
    assert "dry run: 3 events, nothing written" in captured.err


ITP_MAP = "workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu"
EVERY_FORMAT = [
    ("slurm", DATA / "slurm" / "requeues-steps-arrays.txt", [], "|EXPLODED|"),
    ("philly", DATA / "philly" / "jobs-slice.json", [], '"num_gpus": "lots",'),
    ("csv", DATA / "itp" / "cluster10.csv", ["--map", ITP_MAP, "--epoch", "2021-03-04T00:00:00"], "x,soon,1,1"),
    ("kueue", DATA / "kueue" / "watch-events.json", [], '{"type": "MODIFIED", "object": {"metadata": {}}}'),
]


@pytest.mark.parametrize(("fmt", "path", "extra", "bad"), EVERY_FORMAT, ids=[f[0] for f in EVERY_FORMAT])
def test_every_adapter_is_idempotent_and_strict(
    fmt: str, path: Path, extra: list[str], bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "log"
    assert main(["import", fmt, str(path), "--out", str(out), *extra]) == 0
    with EventLog(out, readonly=True) as log:
        n = len(log)
    assert n > 0
    assert main(["import", fmt, str(path), "--out", str(out), *extra]) == 0
    assert f"appended 0 new events to {out} ({n} already in the log)" in capsys.readouterr().err

    # one malformed record: reported with its line; --strict refuses the file and writes nothing
    text = path.read_text()
    if fmt == "slurm":
        lines = text.splitlines()
        lines[3] = lines[3].replace("|COMPLETED|", bad)
        broken = "\n".join(lines) + "\n"
    elif fmt == "philly":
        broken = text.replace('"num_gpus": 4,', bad, 1)
    else:
        broken = text.rstrip("\n") + "\n" + bad + "\n"
    bad_file = tmp_path / f"bad-{path.name}"
    bad_file.write_text(broken)
    fresh = tmp_path / "fresh"
    assert main(["import", fmt, str(bad_file), "--out", str(fresh), "--strict", *extra]) == 2
    assert not fresh.exists()
    assert f"{bad_file}:" in capsys.readouterr().err


BOM = b"\xef\xbb\xbf"  # what Excel's "CSV UTF-8", Notepad and PowerShell put before the first header


@pytest.mark.parametrize(("fmt", "source", "options"), [
    ("slurm", DATA / "slurm" / "requeues-steps-arrays.txt", []),  # with a header line
    ("slurm", POZIDRIV, ["--gpus-for-cpu-jobs", "1"]),
    ("csv", DATA / "csv" / "team-export.csv",
     ["--cluster", "lab", "--map", "workload_id=id,submit=submitted,start=started,end=finished,gpus=gpus,budget=team"]),
    ("philly", DATA / "philly" / "jobs-slice.json", []),
    ("kueue", DATA / "kueue" / "workloads-list.json", ["--cluster", "k8s-east"]),
])  # fmt: skip
def test_an_export_saved_with_a_byte_order_mark_imports_as_it_does_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, source: Path, options: list[str]
) -> None:
    marked = tmp_path / f"marked{source.suffix}"
    marked.write_bytes(BOM + source.read_bytes())
    assert main(["import", fmt, str(source), "--out", str(tmp_path / "plain"), *options]) == 0
    plain = capsys.readouterr().out
    assert main(["import", fmt, str(marked), "--out", str(tmp_path / "marked"), *options]) == 0
    assert capsys.readouterr().out == plain.replace(str(source), str(marked))
    with EventLog(tmp_path / "plain", readonly=True) as a, EventLog(tmp_path / "marked", readonly=True) as b:
        assert list(a.records()) == list(b.records())


def test_an_itp_trace_a_json_budgets_file_and_sacctmgr_associations_with_a_byte_order_mark_read_as_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    itp = tmp_path / "cluster10.csv"
    itp.write_bytes(BOM + (DATA / "itp" / "cluster10.csv").read_bytes())
    assert main(["replay", str(itp), "--out", str(tmp_path / "run"), "--quiet"]) == 0  # recognised by its header
    budgets = tmp_path / "budgets.json"  # JSON, which (unlike YAML) does not skip a byte-order mark itself
    budgets.write_bytes(BOM + json.dumps(yaml.safe_load((EXAMPLES / "budgets.yaml").read_text())).encode())
    assert main(["replay", str(EXAMPLES / "trace.csv"), "--budgets", str(budgets), "--out", str(tmp_path / "lab"),
                 "--quiet"]) == 0
    assoc = tmp_path / "assoc.txt"
    assoc.write_bytes(BOM + (DATA / "slurm" / "sacctmgr-assoc.txt").read_bytes())
    assert main(["budgets", "from-slurm", str(assoc), "--out", str(tmp_path / "b.yaml")]) == 0
    assert main(["budgets", "from-slurm", str(DATA / "slurm" / "sacctmgr-assoc.txt"),
                 "--out", str(tmp_path / "plain.yaml")]) == 0
    capsys.readouterr()
    strip = [line for line in (tmp_path / "b.yaml").read_text().splitlines() if not line.startswith("#")]
    assert strip == [line for line in (tmp_path / "plain.yaml").read_text().splitlines() if not line.startswith("#")]
