"""`gpuledger explain` tells a run of the priority or fifo baseline in that policy's terms, not fair share's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.cli import main
from ledger.commands._runs import run_one
from ledger.core.knobs import Knobs
from ledger.errors import InputError
from ledger.queries.explain import explain
from ledger.replay.run import inputs_from_budgets
from tests.replay.helpers import H, lab, submit


def _run(tmp_path: Path, policy: str) -> Path:
    # One 8-GPU host. Team a's "low" holds it for the first hour. At minute 4 team b submits "early"
    # (priority 0), at minute 5 team a "mine" (priority 1), at minute 6 team b "urgent" (priority 5):
    # each wants the whole host for an hour, so each waits for the one before it to finish.
    subs = [
        submit(0, "low", "a", 8, H),
        submit(4, "early", "b", 8, H),
        submit(5, "mine", "a", 8, H, priority=1),
        submit(6, "urgent", "b", 8, H, priority=5),
    ]
    out = tmp_path / policy
    run_one(inputs_from_budgets(lab(8), subs), Knobs(policy=policy), out, quiet=True)
    return out


def _waiting_text(run: Path, wid: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["explain", str(run), wid]) == 0  # the policy is read from the run's replay.json
    return capsys.readouterr().out


def test_under_priority_a_higher_priority_run_of_another_team_goes_first_and_no_standing_is_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # low ends at 1:00, urgent (priority 5) runs 1:00-2:00, mine (priority 1) 2:00-3:00, early last.
    text = _waiting_text(_run(tmp_path, "priority"), "mine", capsys)
    assert "urgent (lab/b, 8 GPUs, priority 5) started instead (higher priority: 5 against 1)" in text
    assert "under the priority baseline" in text
    assert "stood" not in text and "usage ÷ allocation" not in text  # fair share's words have no place here
    text = _waiting_text(_run(tmp_path, "priority"), "early", capsys)
    assert "mine (lab/a, 8 GPUs, priority 1) started instead (higher priority: 1 against 0)" in text


def test_under_fifo_the_earlier_submission_goes_first_whatever_its_priority(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # low ends at 1:00, then early (submitted at minute 4) runs 1:00-2:00 ahead of mine (minute 5).
    run = _run(tmp_path, "fifo")
    text = _waiting_text(run, "mine", capsys)
    assert "early (lab/b, 8 GPUs, priority 0) started instead (submitted earlier)" in text
    assert "under the fifo baseline" in text and "stood" not in text
    assert explain(run, "mine", policy="fifo")["policy"] == "fifo"
    with pytest.raises(InputError, match="policy 'lottery'"):
        explain(run, "mine", policy="lottery")


def test_a_fair_share_run_is_still_told_by_its_teams_standing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _waiting_text(_run(tmp_path, "fairshare"), "mine", capsys)
    # the standing and reason are the scheduler's own, quoted from its decision to start urgent
    assert "Standings are usage ÷ allocation over the run's lookback window" in text
    assert ("urgent (lab/b, 8 GPUs) started instead; the scheduler's reason: lab/b has used 0 % of its allocation "
            "over the 7.0 d window; first in the fair-share order among work that fits") in text
