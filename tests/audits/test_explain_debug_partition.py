"""`gpuledger explain` tells a batch run that the debug partition's free room was never its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.cli import main
from ledger.commands._runs import run_one
from ledger.core.knobs import Knobs
from ledger.queries.explain import DebugPartition, explain
from ledger.replay.run import inputs_from_budgets
from tests.replay.helpers import H, lab, submit


def _day(tmp_path: Path, gpus: int, train_gpus: int, knobs: Knobs) -> Path:
    """Replay the day: a's training run on every host but the last, b's batch run, then a's debug run."""
    subs = [
        submit(0, "a-train", "a", train_gpus, 7 * H, min_runtime_s=8 * H),
        submit(1, "b-batch", "b", 8, H, min_runtime_s=1800),
        submit(5, "a-debug", "a", 8, 600, min_runtime_s=600),
    ]
    run = tmp_path / "run"
    run_one(inputs_from_budgets(lab(gpus), subs), knobs, run, quiet=True)
    return run


def test_a_batch_run_waiting_beside_a_free_debug_host_is_told_why_it_could_not_take_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 16 GPUs on two hosts, the second (lab-n001) the debug partition. Team a's 8-GPU run holds the
    # first host for 7 h under 8 h of protection; team b's batch run asks for 8 GPUs a minute later
    # and waits with the debug host free, while a's 10-minute debug run starts there at once.
    run = _day(tmp_path, gpus=16, train_gpus=8, knobs=Knobs(debug_hosts=1))
    assert main(["explain", str(run), "b-batch"]) == 0  # the run's own partition, from replay.json
    text = capsys.readouterr().out
    assert "a-debug (lab/a, 8 GPUs) started instead" in text
    assert "first debug run in the fair-share order that fits the debug partition" in text
    assert (
        "The cluster's last host was a debug partition, which starts only allocated runs protected at most "
        "15.0 min on one host, and free fill: its minimum runtime of 30.0 min kept it off that room"
    ) in text
    # a debug run's own story, and a story told without the partition, say nothing of it
    one_host = DebugPartition(1, (), 900, 8)
    assert "debug partition" not in str(explain(run, "a-debug", debug_partition=one_host)["story"])
    assert "debug partition, which" not in str(explain(run, "b-batch")["story"])


def test_a_partition_sized_from_demand_is_told_with_the_size_it_had_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 17 hosts, the default rules. 96 one-GPU debug runs of 15 minutes at 08:00 are the day's debug demand
    # (one GPU busy on average): the pass of that instant sizes the partition at one host (lab-n016). Team
    # a's 128-GPU run takes the other 16 for 7 h; b's batch run waits beside the debug host, which keeps
    # room the batch run may not take.
    subs = [
        *(submit(0, f"a-debug{k}", "a", 1, 300, min_runtime_s=900) for k in range(96)),
        submit(10, "a-train", "a", 128, 7 * H, min_runtime_s=8 * H),
        submit(11, "b-batch", "b", 8, H, min_runtime_s=1800),
    ]
    run = tmp_path / "run"
    run_one(inputs_from_budgets(lab(136), subs), Knobs(), run, quiet=True)
    assert main(["explain", str(run), "b-batch"]) == 0  # replay.json: debug_hosts null, its sizes recorded
    assert "The cluster's last host was a debug partition" in capsys.readouterr().out
    assert main(["explain", str(run), "a-debug0"]) == 0  # the first debug runs start on the partition
    assert "lab-n016" in capsys.readouterr().out
