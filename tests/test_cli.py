"""The console script's conventions: one-line errors (exit 2), exit 1 when every record was rejected,
status on stderr and data on stdout, --out and --force, --version, --format."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from ledger.cli import main

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab"
SACCT = ROOT / "tests" / "data" / "slurm" / "unit-accounting-logs.log"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, command: str) -> str:
    """Return the error line; fail if stderr is a traceback or more than the error (and listed rows)."""
    assert "Traceback" not in err
    first = err.splitlines()[0]
    assert first.startswith(f"gpuledger {command}: error: "), err
    return first


@pytest.fixture
def lab(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copy(LAB / "trace.csv", tmp_path / "trace.csv")
    shutil.copy(LAB / "budgets.yaml", tmp_path / "budgets.yaml")
    return tmp_path / "trace.csv", tmp_path / "budgets.yaml"


@pytest.fixture
def run_dir(lab: tuple[Path, Path], tmp_path: Path) -> Path:
    trace, budgets = lab
    assert main(["replay", str(trace), "--budgets", str(budgets), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    return tmp_path / "run"


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 8)
    return path


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("gpuledger 0.")


# (argv, command, message): each one a bad argument or path, exit 2, one line naming it
def bad_paths(tmp: Path, lab: tuple[Path, Path], binary: Path) -> list[tuple[list[str | Path], str, str]]:
    trace, budgets = lab
    a_file = tmp / "a-file"
    a_file.write_text("x\n")
    foreign = tmp / "someone-elses"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    return [
        (["import", "slurm", tmp / "nope" / "x"], "import", f"{tmp / 'nope' / 'x'}: no such file to import"),
        (["import", "slurm", tmp], "import", f"{tmp}: is a directory; expected a file to import"),
        (["import", "slurm", binary], "import", f"{binary}: not a text file (it holds NUL bytes)"),
        (["import", "philly", binary], "import", f"{binary}: not a text file (it holds NUL bytes)"),
        (["import", "kueue", binary], "import", f"{binary}: not a text file (it holds NUL bytes)"),
        (["import", "slurm", SACCT, "--out", a_file], "import", f"--out {a_file}: is a file; expected a directory"),
        (["replay", tmp / "nope.csv", "--budgets", budgets, "--out", tmp / "r"], "replay",
         f"{tmp / 'nope.csv'}: no such trace, run directory or event log"),
        (["replay", trace, "--budgets", tmp / "nope.yaml", "--out", tmp / "r"], "replay",
         f"{tmp / 'nope.yaml'}: no such budgets file"),
        (["replay", trace, "--budgets", tmp, "--out", tmp / "r"], "replay",
         f"{tmp}: is a directory; expected a budgets file"),
        (["replay", trace, "--budgets", binary, "--out", tmp / "r"], "replay",
         f"{binary}: not a budgets file: not UTF-8 text"),
        (["replay", binary, "--budgets", budgets, "--out", tmp / "r"], "replay", f"{binary}: not UTF-8 text"),
        (["replay", trace, "--budgets", budgets, "--out", a_file], "replay",
         f"--out {a_file}: is a file; expected a directory (new or empty)"),
        (["replay", trace, "--budgets", budgets, "--out", foreign, "--force"], "replay",
         f"--out {foreign}: holds files gpuledger did not write (notes.txt)"),
        (["replay", trace, "--budgets", budgets, "--out", tmp / "r", "--until", "someday"], "replay",
         "--until 'someday': expected an ISO 8601 time or a duration such as 30d"),
        (["compare", trace, "--budgets", budgets, "--out", a_file], "compare", f"--out {a_file}: is a file"),
        (["compare", trace, "--budgets", budgets, "--preemption-strategy", "maybe"], "compare",
         "--preemption-strategy 'maybe': expected final-share or instant, or a comma list"),
        (["compare", trace, "--budgets", budgets, "--policy", "lottery"], "compare",
         "policy 'lottery': expected one of"),
        (["compare", trace, "--budgets", budgets, "--max-preemptions", "1,two"], "compare",
         "--max-preemptions 'two': expected a whole number, or a comma list of them"),
        (["compare", trace, "--budgets", budgets, "--max-preemptions", "-1"], "compare",
         "--max-preemptions -1: must be 0 or more"),
        (["compare", trace, "--budgets", budgets, "--fill-headroom", "lots"], "compare",
         "--fill-headroom 'lots': expected a share such as 3% or 0.03"),
        (["replay", trace, "--budgets", budgets, "--out", tmp / "r", "--fill-headroom", "100%"], "replay",
         "--fill-headroom '100%': must be at least 0 and less than 100%"),
        (["audit", tmp / "nope"], "audit", f"{tmp / 'nope'}: no such run directory or event log"),
        (["audit", a_file], "audit", f"{a_file}: neither a run directory"),
        (["explain", tmp / "nope", "w1"], "explain", f"{tmp / 'nope'}: no such run directory or event log"),
        (["demo", "--out", foreign], "demo", f"--out {foreign}: holds files gpuledger did not write (notes.txt)"),
        (["demo", "--out", tmp / "d", "--scale", "0"], "demo", "--scale 0.0: must be more than 0"),
    ]


def test_every_bad_path_is_one_line_with_exit_2(
    lab: tuple[Path, Path], binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, command, message in bad_paths(tmp_path, lab, binary):
        code, out, err = run(capsys, *argv)
        line = one_line_error(err, command)
        assert code == 2, (argv, err)
        assert message in line, (argv, line)
        assert len(err.splitlines()) == 1, (argv, err)
        assert out == "", argv
    assert not (tmp_path / "r").exists()  # nothing was started for a bad argument


def test_audit_refuses_bad_periods_and_outputs(run_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--since", "2027-01-01"],
         "--since 2027-01-01T00:00:00Z is after the log's last event (2026-03-05T"),
        (["--until", "2020-01-01"], "--until 2020-01-01T00:00:00Z is not after the log's first event"),
        (["--since", "yesterday"], "--since 'yesterday': not an ISO 8601 time"),
        (["--since", "2026-03-03", "--until", "2026-03-02"], "--until 2026-03-02 is not after --since 2026-03-03"),
        (["--out", str(tmp_path)], f"--out {tmp_path}: is a directory; expected a file name"),
        (["--out", str(tmp_path / "no" / "x.txt")], f"--out {tmp_path / 'no' / 'x.txt'}: directory"),
        (["--format", "html", "--report", "owed-hours"], "--report: the HTML report is the whole audit"),
        (["--window", "90m"], "--window 90m: the fairness window must be a positive whole number of hours"),
    ]
    for extra, message in cases:
        code, out, err = run(capsys, "audit", run_dir, *extra)
        assert code == 2 and out == "", (extra, err)
        assert message in one_line_error(err, "audit"), (extra, err)


def test_a_time_past_the_end_of_2099_is_refused_as_such_not_as_malformed(
    lab: tuple[Path, Path], run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2200-01-01 is well-formed, but no event can carry it: the replay clock stops at the end of 2099
    trace, budgets = lab
    with trace.open("a") as fh:  # a bad row: rejected_rows.txt would be the first file written
        fh.write("bad-1,2026-03-02T09:00:00Z,lab/vision/detect,bo,eight,3600,true,3600,0,0,0,batch\n")
    last = "after the last instant an event log can hold (2099-12-31T23:59:59.999999Z)"
    cases: list[tuple[list[str | Path], str, str]] = [
        (["replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--until", "2200-01-01"], "replay",
         f"--until '2200-01-01': {last}"),
        (["replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--until", "36500d"], "replay",
         f"--until '36500d' (2126-02-06T00:00:00Z): {last}"),  # 100 years after the first submission
        (["replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--until", "1999-12-31"], "replay",
         "--until '1999-12-31': before the first instant an event log can hold (2000-01-01T00:00:00Z)"),
        (["compare", trace, "--budgets", budgets, "--out", tmp_path / "r", "--until", "2100-01-01"], "compare",
         f"--until '2100-01-01': {last}"),
        (["audit", run_dir, "--until", "2200-01-01"], "audit", f"--until '2200-01-01': {last}"),
        (["audit", run_dir, "--since", "9999-12-31T23:00:00-05:00"], "audit",
         f"--since '9999-12-31T23:00:00-05:00': {last}"),
    ]
    for argv, command, message in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", (argv, err)
        assert err == f"gpuledger {command}: error: {message}\n"
    assert not (tmp_path / "r").exists()  # nothing written, not even the rejected rows
    # the last instant itself is a stop time like any other
    code, _, _ = run(capsys, "replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--quiet",
                     "--until", "2099-12-31T23:59:59.999999Z")
    assert code == 0


def test_a_trace_with_every_row_rejected_exits_1_naming_line_and_field(
    lab: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, budgets = lab
    trace = tmp_path / "bad.jsonl"
    trace.write_text(
        '{"workload_id": "a", "submit_time": "2026-03-02T00:00:00Z", "budget": "lab/vision/detect", "user": "x"}\n'
        '["not", "an", "object"]\n'
        '{"workload_id": "b", "submit_time": 5, "budget": "lab/vision/detect", "user": "x", "gpus": 1}\n'
        "{oops\n"
    )
    code, out, err = run(capsys, "replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--quiet")
    assert code == 1 and out == ""
    assert one_line_error(err, "replay").endswith("every row was rejected (4 bad row(s)):")
    assert f"{trace}:1: field gpus is missing" in err
    assert f"{trace}:2: expected a JSON object per line" in err
    assert f"{trace}:3: submit_time = 5:" in err
    assert f"{trace}:4: not valid JSON" in err
    assert "= None" not in err and "(line)" not in err
    assert not (tmp_path / "r").exists()


def test_an_import_whose_every_record_is_rejected_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "not-sacct.txt"
    text.write_text("this is\nnot an export\nof sacct\n")
    code, out, err = run(capsys, "import", "slurm", text)
    assert code == 1
    assert "rejected" in out  # the summary (data) still says which lines and why
    assert f"gpuledger import: error: {text}: every record was rejected (3)" in err
    code, _, err = run(capsys, "import", "slurm", SACCT, text, "--out", tmp_path / "log")
    assert code == 1 and "appended" in err  # the good file is still imported; the exit code tells


def test_an_import_of_an_export_with_no_record_exits_1_and_creates_no_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an empty file, an empty JSON list and a sacct header alone: most likely the wrong file, never "done"
    empty_list, header = tmp_path / "jobs.json", tmp_path / "sacct.txt"
    empty_list.write_text("[]\n")
    header.write_text("JobID|User|Account|State|Submit|Start|End|AllocTRES\n")
    for fmt, path in [("philly", Path("/dev/null")), ("kueue", empty_list), ("slurm", header)]:
        log = tmp_path / f"log-{fmt}"
        code, out, err = run(capsys, "import", fmt, path, "--out", log)
        assert code == 1
        assert "rows read:   0" in out
        assert err.splitlines() == [
            f"gpuledger import: error: {path}: holds no record (an empty {fmt} export)",
            f"nothing written to {log} (no events)",
        ]
        assert not log.exists()  # not even a directory holding a lock file
    # next to a file that has records, the empty one still sets the exit code; the good one is appended
    code, _, err = run(capsys, "import", "slurm", header, SACCT, "--out", tmp_path / "log")
    assert code == 1
    assert f"gpuledger import: error: {header}: holds no record (an empty slurm export)" in err
    assert f"appended 3 new events to {tmp_path / 'log'}" in err


def test_out_refuses_an_earlier_run_unless_force_which_clears_stale_files(
    lab: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, budgets = lab
    out = tmp_path / "run"
    with trace.open("a") as fh:
        fh.write("bad-1,2026-03-02T09:00:00Z,lab/vision/detect,bo,eight,3600,true,3600,0,0,0,batch\n")
    code, _, err = run(capsys, "replay", trace, "--budgets", budgets, "--out", out, "--quiet")
    assert code == 0 and (out / "rejected_rows.txt").exists() and "1 row(s) rejected" in err
    shutil.copy(LAB / "trace.csv", trace)  # the bad row fixed
    code, _, err = run(capsys, "replay", trace, "--budgets", budgets, "--out", out, "--quiet")
    assert code == 2
    earlier = "audit, audit.json, events, rejected_rows.txt"
    assert f"--out {out}: holds an earlier run ({earlier}); pass --force" in err
    code, _, _ = run(capsys, "replay", trace, "--budgets", budgets, "--out", out, "--quiet", "--force")
    assert code == 0
    # the stale file gone
    assert sorted(p.name for p in out.iterdir()) == ["audit", "audit.json", "events", "replay.json"]
    code, _, err = run(capsys, "replay", out, "--out", out, "--quiet", "--force")
    assert code == 2 and f"--out {out}: holds the input {out}" in err


def test_out_inside_the_input_run_or_log_is_refused_and_nothing_is_written(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a replay of a run (or of its log) written into that run would land among the files it reads
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    cases: list[tuple[list[str | Path], str, str]] = [
        (["replay", run_dir, "--out", run_dir / "sub", "--quiet"], "replay",
         f"--out {run_dir / 'sub'}: lies inside the input {run_dir}; write the run somewhere else"),
        (["replay", run_dir / "events", "--out", run_dir / "events" / "a" / "b", "--quiet"], "replay",
         f"--out {run_dir / 'events' / 'a' / 'b'}: lies inside the input {run_dir / 'events'}"),
        (["compare", run_dir, "--out", run_dir / "cmp", "--policy", "fairshare,fifo", "--quiet"], "compare",
         f"--out {run_dir / 'cmp'}: lies inside the input {run_dir}; write the run somewhere else"),
    ]
    for argv, command, message in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", (argv, err)
        assert message in one_line_error(err, command) and len(err.splitlines()) == 1, (argv, err)
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # nothing written
    # beside the input, not inside it: a directory whose name merely starts with the input's is fine
    code, _, _ = run(capsys, "replay", run_dir, "--out", f"{run_dir}-again", "--quiet")
    assert code == 0


def test_status_goes_to_stderr_and_data_to_stdout(
    lab: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, budgets = lab
    code, out, err = run(capsys, "replay", trace, "--budgets", budgets, "--out", tmp_path / "r", "--format", "json")
    assert code == 0
    assert json.loads(out)["columns"] == ["fairshare"]  # stdout is only data
    assert "replayed" in err and "wrote" in err
    code, out, err = run(capsys, "audit", tmp_path / "r", "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and err == ""  # html goes to stdout like the rest
    code, out, err = run(capsys, "audit", tmp_path / "r", "--format", "html", "--out", tmp_path / "a.html")
    assert code == 0 and out == "" and err == f"wrote {tmp_path / 'a.html'}\n"
    code, out, _ = run(capsys, "replay", trace, "--budgets", budgets, "--out", tmp_path / "r2", "--format", "csv",
                       "--quiet")
    assert code == 0 and next(csv.reader(io.StringIO(out))) == ["measure", "unit", "fairshare"]


def test_compare_varies_a_boolean_knob_side_by_side(lab: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trace, budgets = lab
    code, out, _ = run(capsys, "compare", trace, "--budgets", budgets, "--preemption-strategy",
                       "final-share,instant", "--quiet", "--format", "json", "--out", tmp_path / "runs")
    assert code == 0
    table = json.loads(out)
    assert table["columns"] == ["final-share", "instant"]
    knobs = [json.loads((d / "replay.json").read_text())["knobs"] for d in sorted((tmp_path / "runs").iterdir())]
    assert [k.endswith("instant") for k in knobs] == [False, True]
    code, out, _ = run(capsys, "compare", trace, "--budgets", budgets, "--swap-margin", "--preempt-cycle", "0s,60s",
                       "--quiet", "--format", "csv")
    assert code == 0 and out.splitlines()[0] == "measure,unit,cycle 0s,cycle 1m"
    code, out, _ = run(capsys, "compare", trace, "--budgets", budgets, "--max-preemptions", "1,2", "--quiet",
                       "--format", "csv")
    assert code == 0 and out.splitlines()[0] == "measure,unit,max 1 preemptions,max 2 preemptions"
    code, out, _ = run(capsys, "compare", trace, "--budgets", budgets, "--fill-headroom", "0,3%", "--quiet",
                       "--format", "csv")
    assert code == 0 and out.splitlines()[0] == "measure,unit,fill headroom 0%,fill headroom 3%"
    code, _, err = run(capsys, "compare", trace, "--budgets", budgets, "--quiet", "--out", tmp_path / "runs")
    assert code == 2 and "pass --force" in err
    code, out, _ = run(capsys, "compare", trace, "--budgets", budgets, "--quiet", "--out", tmp_path / "runs",
                       "--force", "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>")
    assert [d.name for d in (tmp_path / "runs").iterdir()] == ["01-fairshare"]
