"""`gpuledger explain` word for word: on imported Slurm records and on a replay of the lab example.

The golden texts are the stories a person reads; a change to them is a change to what explain
claims, so it is made on purpose (rewrite the file from the command's output and read the diff).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.cli import main

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden")


def _explain(capsys: pytest.CaptureFixture[str], source: Path, wid: str) -> str:
    capsys.readouterr()
    assert main(["explain", str(source), wid]) == 0
    return capsys.readouterr().out


def test_explain_on_imported_slurm_records_says_what_they_show_and_labels_the_ledgers_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # job 1004648 of pozidriv: Slurm recorded it PREEMPTED at 01:54 after 26 minutes; sacct says nothing of why
    log = tmp_path / "poz" / "events"
    assert main(["import", "slurm", str(ROOT / "tests/data/slurm/pozidriv-slice.log"), "--gpus-for-cpu-jobs", "1",
                 "--budgets", str(ROOT / "tests/data/budgets/pozidriv-seven-accounts.yaml"), "--out", str(log)]) == 0
    text = _explain(capsys, log, "1004648")
    assert text == (GOLDEN / "explain-pozidriv-1004648.txt").read_text(encoding="utf-8")
    # never the ledger's own scheduling story as the cause
    for invented in ("ranked ahead", "protected until", "waited for room", "fair share)", "started instead"):
        assert invented not in text, invented
    assert "the scheduler's own reasons are not in its records" in text


def test_explain_on_a_replay_quotes_the_core_including_the_hold_that_preempted_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "lab"
    assert main(["replay", str(ROOT / "examples/lab/trace.csv"), "--budgets", str(ROOT / "examples/lab/budgets.yaml"),
                 "--out", str(run), "--quiet"]) == 0
    text = _explain(capsys, run, "seg-1")
    assert text == (GOLDEN / "explain-lab-seg-1.txt").read_text(encoding="utf-8")
    # one set of units: GPU-hours, hours and minutes, standings as percentages
    assert "GPU-seconds" not in text and not re.search(r"\de-\d", text) and not re.search(r"\b\d+m\b", text)
    # det-2 (16 GPUs, two whole hosts) was held for at 02:00 and took seg-1's host when the hold's time came
    assert "on a host held since 2026-03-02 02:00 UTC for det-2 (16 GPUs), whose time has come" in text
    # seg-1 is then held for in turn: its hold's time lies ahead (a hold never preempts at the instant it is
    # granted), and the spans are quoted in units people read
    assert "holding 2 hosts for seg-1 (16 GPUs) until 2026-03-02 03:20 UTC, when the last protected window on them " \
           "ends (in 60.0 min)" in text
    assert "on the hosts held for it since 2026-03-02 02:20 UTC (60.0 min)" in text and "until now" not in text
    assert "held by pre-1" in _explain(capsys, run, "det-2")  # det-2's own story names what held the room


def test_a_long_wait_is_told_across_its_whole_span_not_only_its_first_hours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # w (16 GPUs) waits 48 hours on a 16-GPU cluster while twelve 8-GPU jobs of org/b run in pairs,
    # four hours a pair: the story picks moments from the start, middle and end of the wait and sums up all of it
    from tests.audits.conftest import write_log
    from tests.factories import Events

    E = Events()
    evs = [E.capacity(0, 16), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0), E.node(0, "org/b", 1.0),
           E.submit(0, "w", "org/a", gpus=16)]
    for i in range(12):
        t = i * 240
        for j in (0, 1):
            wid = f"b{i}-{j}"
            evs += [E.submit(t, wid, "org/b", gpus=8), E.start(t, wid, (f"lab-n00{j}",), 8), E.complete(t + 240, wid)]
    evs += [E.start(48 * 60, "w", ("lab-n000", "lab-n001"), 16), E.complete(49 * 60, "w")]
    write_log(tmp_path / "run" / "events", sorted(evs, key=lambda e: e.time))
    text = _explain(capsys, tmp_path / "run", "w")
    told = [line for line in text.splitlines() if "started while it waited" in line]
    assert len(told) == 5
    assert told[0].startswith("- 2026-03-02T04:00:00Z") and told[-1].startswith("- 2026-03-03T20:00:00Z")
    assert ("Over the whole wait, 2026-03-02T00:00:00Z to 2026-03-04T00:00:00Z (2.0 d): 22 other workload(s) "
            "started, 0 as wide as it or wider, 22 allocated (5 of them told above, spread over the wait); the most "
            "GPUs free at any moment of it was 0 of 16 (it needs 16).") in text
