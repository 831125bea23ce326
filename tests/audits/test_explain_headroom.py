"""`gpuledger explain` tells when the fill headroom, not a lack of GPUs, kept free fill waiting."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.cli import main
from ledger.commands._runs import run_one
from ledger.commands.explain import run_headroom, run_settings
from ledger.core.knobs import Knobs
from ledger.queries.explain import explain
from ledger.replay.run import inputs_from_budgets
from tests.replay.helpers import H, lab, submit


def _run(tmp_path: Path, headroom: float, policy: str = "fairshare") -> Path:
    # 16 GPUs on two hosts. Team a's 8-GPU run holds one host and team b's 2-GPU run part of the other
    # for an hour; a 4-GPU free-fill job arrives a minute later, when 6 GPUs are free, and a 1-GPU
    # one at minute 10.
    subs = [
        submit(0, "a-run", "a", 8, H, min_runtime_s=1800),
        submit(0, "b-run", "b", 2, H, min_runtime_s=1800),
        submit(1, "fill", "a", 4, H, min_runtime_s=0),
        submit(10, "small", "b", 1, 1800, min_runtime_s=0),
    ]
    out = tmp_path / f"run-{policy}-{headroom}"
    run_one(inputs_from_budgets(lab(16), subs), Knobs(policy=policy, fill_headroom=headroom), out, quiet=True)
    return out


def test_explain_names_the_fill_headroom_that_kept_free_fill_out_of_free_room(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, 0.25)  # 4 of the 16 GPUs kept from fill: of the 6 free, fill may take 2
    # the run's own, from replay.json, whether the run or its log is named
    assert run_headroom(run_settings(str(run))) == run_headroom(run_settings(str(run / "events"))) == 0.25
    result = explain(run, "fill", fill_headroom=0.25)
    assert result["summary"]["waited_s"] == H - 60  # it started when the allocated runs ended
    kept = [m for m in result["story"] if m.get("fill_headroom")]
    assert kept and kept[0]["time"].startswith("2026") and kept[0]["fill_headroom"] == {
        "free_gpus": 6, "most_on_one_host": 6, "headroom_gpus": 4, "share": 0.25, "capacity_gpus": 16}
    assert main(["explain", str(run), "fill"]) == 0  # the command reads the run's own headroom
    text = capsys.readouterr().out
    assert (
        "it waited although 6 GPUs were free (6 on one host, room for its 4): the fill headroom (--fill-headroom 25 %: "
        "4 of the 16 GPUs) is kept free of new free fill while allocated work runs or waits, so free fill could take "
        "only 2 of them"
    ) in text
    assert "small (lab/b, 1 GPU) started instead" in text  # the 1-GPU fill fit in those 2
    assert text.count("--fill-headroom") == 1  # said once for the wait, not at every moment of it
    # an allocated workload's story never blames the fill headroom
    assert not [m for m in explain(run, "b-run", fill_headroom=0.25)["story"] if m.get("fill_headroom")]


def test_explain_does_not_blame_the_headroom_when_the_run_kept_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, 0.0)
    assert run_headroom(run_settings(str(run))) == 0.0
    assert explain(run, "fill")["summary"]["waited_s"] == 0  # it started at once in the free 6 GPUs
    assert run_headroom(run_settings(str(_run(tmp_path, 0.03, policy="priority")))) == 0.0  # a fair-share rule only
    assert run_headroom(run_settings(str(tmp_path / "no-such-run"))) == 0.03  # a bare log: the default
    headroom_run = _run(tmp_path, 0.25)
    # the setting given on the command line wins over the run's own: with 0 nothing is kept
    assert main(["explain", str(headroom_run), "fill", "--fill-headroom", "0"]) == 0
    assert "--fill-headroom" not in capsys.readouterr().out
    assert main(["explain", str(headroom_run), "fill", "--fill-headroom", "150%"]) == 2
    assert "--fill-headroom '150%'" in capsys.readouterr().err
