"""``compare`` with three settings or more: the sweep view, one row per setting, the best of each measure marked."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from ledger.cli import main
from tests.replay.helpers import segment_bytes

ROOT = Path(__file__).resolve().parents[2]
LAB = [str(ROOT / "examples/lab/trace.csv"), "--budgets", str(ROOT / "examples/lab/budgets.yaml")]
EIGHT = ["--policy", "fairshare,priority", "--max-min-runtime", "1h,8h", "--window", "3d,7d"]


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eight-setting sweep of the lab, its runs kept."""
    out = tmp_path_factory.mktemp("sweep") / "runs"
    assert main(["compare", *LAB, *EIGHT, "--quiet", "--format", "json", "--out", str(out)]) == 0
    return out


def _compare(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["compare", *LAB, *EIGHT, "--quiet", "--jobs", "1", *extra]) == 0
    out, err = capsys.readouterr()
    return out, err


def test_settings_priority_never_reads_are_replayed_once_and_said_to_be(
    eight: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the window is fair share's alone: the four priority settings are two replays (cap 1h, cap 8h)
    runs = sorted(p.name for p in eight.iterdir())
    assert len(runs) == 6 and sum(r.split("-")[1] == "priority" for r in runs) == 2
    out, err = _compare(capsys, "--format", "json")
    assert "Under priority, the window cannot change a decision" in err and "2 of its 4 settings" in err
    rows = json.loads(out)["settings"]
    assert len(rows) == 8
    same = {r["setting"]: r["same_decisions_as"] for r in rows}
    assert same["priority window 1w cap 1h"] == "priority window 3d cap 1h"
    assert same["fairshare window 1w cap 1h"] is None  # fair share reads its window: replayed
    by = {r["setting"]: r["values"] for r in rows}
    assert by["priority window 1w cap 8h"] == by["priority window 3d cap 8h"]


def test_the_skipped_settings_would_have_decided_byte_for_byte_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the claim, checked on the lab: priority with a 3-day or a 7-day window, upfront or accrued charge
    logs = []
    for i, extra in enumerate((["--window", "3d"], ["--window", "7d", "--charge", "accrued"])):
        out = tmp_path / f"r{i}"
        assert main(["replay", *LAB, "--policy", "priority", *extra, "--out", str(out), "--quiet"]) == 0
        logs.append(segment_bytes(out / "events"))
    assert logs[0] == logs[1]


def test_the_sweep_rows_mark_the_best_value_of_each_measure(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _compare(capsys, "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 8 and table[0]["setting"] == "fairshare window 3d cap 1h"
    for measure, lower in (("discarded_share", True), ("owed_ratio", False), ("preemptions", True)):
        values = [float(r[measure]) for r in table]
        top = min(values) if lower else max(values)
        marked = [r["setting"] for r in table if measure in r["best"].split()]
        assert marked == [r["setting"] for r, v in zip(table, values, strict=True) if v == top], measure
    json_rows = json.loads(_compare(capsys, "--format", "json")[0])["settings"]
    assert [r["setting"] for r in json_rows] == [r["setting"] for r in table]  # the same rows


def test_the_sweep_page_is_a_table_and_trade_off_charts_not_eight_columns(capsys: pytest.CaptureFixture[str]) -> None:
    page, _ = _compare(capsys, "--format", "html")
    assert page.count("<tr><td class='n'>") == 8  # one row per setting
    assert "class='cols'" not in page  # not the columns view
    assert len(re.findall(r'aria-label="(Fairness against work thrown away|Debug waits against preemptions)"',
                          page)) == 2
    assert "Pareto front" in page and "★" in page
    assert "same decisions as priority window 3d cap 1h" in page
    assert "Under priority, the window cannot change a decision" in page
    assert main(["compare", *LAB, "--policy", "fairshare,priority", "--quiet", "--format", "html"]) == 0
    assert "class='cols'" in capsys.readouterr().out  # two settings: the columns view

