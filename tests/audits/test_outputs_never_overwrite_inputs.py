"""No command writes onto what it reads, and none replaces an existing file unless told to with --force."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ledger.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_audit_never_writes_inside_the_log_it_reads_even_with_force(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = sorted((run_dir / "events").iterdir())[0]
    before = segment.read_bytes()
    for force in ([], ["--force"]):
        code, err = _run(capsys, "audit", str(run_dir), "--format", "html", "--out", str(segment), *force)
        assert code != 0 and "lies inside the input" in err and "Traceback" not in err
        code, err = _run(capsys, "audit", str(run_dir / "events"), "--out", str(run_dir / "events" / "x.txt"), *force)
        assert code != 0 and "lies inside the input" in err
        # the run's own audit.json lies in the run directory the audit reads
        own = str(run_dir / "audit.json")
        code, err = _run(capsys, "audit", str(run_dir), "--format", "json", "--out", own, *force)
        assert code != 0 and "lies inside the input" in err
    assert segment.read_bytes() == before
    assert main(["audit", str(run_dir), "--format", "json"]) == 0  # the log still reads


def test_audit_replaces_an_existing_file_only_with_force(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    out.write_text("someone's notes")
    code, err = _run(capsys, "audit", str(run_dir), "--format", "html", "--out", str(out))
    assert code != 0 and f"--out {out}: already exists; pass --force" in err
    assert out.read_text() == "someone's notes"
    code, _ = _run(capsys, "audit", str(run_dir), "--format", "html", "--out", str(out), "--force")
    assert code == 0 and out.read_text().startswith("<!DOCTYPE html>")


def test_budgets_never_writes_onto_its_input_and_replaces_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assoc = tmp_path / "assoc.txt"
    assoc.write_bytes((ROOT / "tests/data/slurm/sacctmgr-tree.txt").read_bytes())
    before = assoc.read_bytes()
    code, err = _run(capsys, "budgets", "from-slurm", str(assoc), "--gpus", "64", "--out", str(assoc), "--force")
    assert code != 0 and "is the input" in err and assoc.read_bytes() == before
    out = tmp_path / "budgets.yaml"
    assert _run(capsys, "budgets", "from-slurm", str(assoc), "--gpus", "64", "--out", str(out))[0] == 0
    code, err = _run(capsys, "budgets", "from-slurm", str(assoc), "--gpus", "64", "--out", str(out))
    assert code != 0 and "already exists" in err
    assert _run(capsys, "budgets", "from-slurm", str(assoc), "--gpus", "64", "--out", str(out), "--force")[0] == 0


def test_import_refuses_a_file_that_lies_inside_the_log_it_appends_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"
    log.mkdir()
    inside = log / "slice.log"
    inside.write_bytes((ROOT / "tests/data/slurm/pozidriv-slice.log").read_bytes())
    code, err = _run(capsys, "import", "slurm", str(inside), "--gpus-for-cpu-jobs", "1", "--out", str(log))
    assert code != 0 and "holds the input" in err
    assert [p.name for p in log.iterdir()] == ["slice.log"]


def test_a_runs_audit_json_is_readable_like_its_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "lab"
    assert main(["replay", str(ROOT / "examples/lab/trace.csv"), "--budgets", str(ROOT / "examples/lab/budgets.yaml"),
                 "--out", str(run), "--quiet"]) == 0
    umask = os.umask(0)
    os.umask(umask)
    for name in ("audit.json", "replay.json"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o666 & ~umask, name
