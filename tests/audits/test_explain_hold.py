"""`explain` tells a wide run's wait in words: the hosts held for it, until when, and its start there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.cli import main
from ledger.commands._runs import run_one
from ledger.core.knobs import Knobs
from ledger.replay.run import inputs_from_budgets
from tests.replay.helpers import H, lab, submit


def test_explain_says_which_hosts_were_held_for_a_wide_run_and_until_when(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four hosts. Team b takes each with a run protected an hour, ten minutes apart; at minute 35
    # team a asks for two whole hosts. The two hosts whose windows end first (1:00 and 1:10) are held
    # for it, and it starts there at 1:10.
    subs = [submit(10 * i, f"b{i}", "b", 8, 3 * H) for i in range(4)]
    subs.append(submit(35, "wide", "a", 16, 2 * H))
    out = tmp_path / "run"
    run_one(inputs_from_budgets(lab(32), subs), Knobs(), out, quiet=True)
    assert main(["explain", str(out), "wide"]) == 0
    text = capsys.readouterr().out
    assert "decided to hold: first in the fair-share order and neither free room nor preemption seats it" in text
    assert "holding 2 hosts for wide (16 GPUs) until" in text and "when the last protected window on them ends" in text
    assert "on the hosts held for it since" in text
