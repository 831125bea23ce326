"""``compare`` replays its settings in a pool of processes: the same table and run directories as one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.cli import main
from ledger.replay.demo_month import generate
from ledger.replay.trace import write_trace
from tests.replay.helpers import segment_bytes

SETTINGS = ["--policy", "fairshare,priority", "--max-min-runtime", "1h,8h"]  # four settings


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small demo month (about 100 workloads, replayed for five days) as a trace and a budgets file."""
    where = tmp_path_factory.mktemp("month")
    demo = generate(7, scale=0.01)
    write_trace(where / "trace.csv", demo.submissions)
    (where / "budgets.yaml").write_text(demo.budgets.to_yaml())
    return where / "trace.csv", where / "budgets.yaml"


def _compare(month: tuple[Path, Path], out: Path, jobs: int, *extra: str) -> int:
    trace, budgets = month
    args = ["compare", str(trace), "--budgets", str(budgets), "--out", str(out), "--format", "json"]
    return main([*args, "--jobs", str(jobs), "--until", "5d", *SETTINGS, *extra])


def test_settings_replayed_side_by_side_match_those_replayed_one_by_one(
    month: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _compare(month, tmp_path / "serial", 1, "--quiet") == 0
    serial = capsys.readouterr().out
    assert _compare(month, tmp_path / "pool", 2) == 0
    pooled, progress = capsys.readouterr()
    assert json.loads(pooled) == json.loads(serial) and pooled == serial
    runs = sorted(p.name for p in (tmp_path / "serial").iterdir())
    assert len(runs) == 4 and runs == sorted(p.name for p in (tmp_path / "pool").iterdir())
    for run in runs:
        one, side = tmp_path / "serial" / run, tmp_path / "pool" / run
        assert segment_bytes(side / "events") == segment_bytes(one / "events"), run
        for name in ("audit.json", "replay.json"):
            assert (side / name).read_bytes() == (one / name).read_bytes(), (run, name)
    # one line per finished run, in whatever order they finish, then the total
    lines = [line for line in progress.splitlines() if line.startswith("[")]
    assert sorted(line.split("]")[0] for line in lines) == ["[1/4", "[2/4", "[3/4", "[4/4"]
    labels = [s["setting"] for s in json.loads(pooled)["settings"]]  # four settings: the sweep's rows
    assert sorted(line.split("] ")[1].split(":")[0] for line in lines) == sorted(labels)


def test_jobs_must_be_positive(month: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _compare(month, tmp_path / "x", 0, "--quiet") != 0
    assert "--jobs 0: expected 1 or more" in capsys.readouterr().err


def test_a_compare_cut_short_by_ctrl_c_is_replaced_by_its_rerun(
    month: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "sweep"
    trace, budgets = month
    cli = "import sys; from ledger.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", cli, "compare", str(trace), "--budgets", str(budgets), "--out", str(out),
         "--jobs", "1", "--quiet", "--until", "5d", *SETTINGS],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("*/.events.building")):
        time.sleep(0.02)  # Ctrl-C while a setting's log is being written
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    left = sorted(p.name for p in out.iterdir())
    assert (left and len(left) < 4) or list(out.glob("*/.events.building")), left  # it was cut short
    # the rerun knows what it left: refused as an earlier run without --force, replaced with it
    assert _compare(month, out, 1, "--quiet") != 0
    assert "holds an earlier run" in capsys.readouterr().err
    assert _compare(month, out, 1, "--quiet", "--force") == 0
    assert len(json.loads(capsys.readouterr().out)["settings"]) == 4
