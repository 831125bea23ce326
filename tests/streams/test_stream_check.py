"""``gpuledger stream-check``: a replayed run through Kafka and the worker, compared with the run, both clock modes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core import Knobs
from ledger.replay.demo_month import generate
from ledger.replay.run import inputs_from_budgets, replay
from ledger.streams.equivalence import compare
from tests.streams.harness import ROOT
from tests.streams.scenarios import lab_month

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.parametrize("rate", ["0", "1e9"], ids=["idle-clock-off", "history-replay"])
def test_stream_check_finds_the_worker_equivalent_to_the_replay(
    kafka_bootstrap: str, tmp_path: Path, rate: str
) -> None:
    month = generate(7, scale=0.01, researchers=20)
    run = tmp_path / "run"
    replay(inputs_from_budgets(month.budgets, list(month.submissions)), Knobs(), run)
    out = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "stream-check", str(run), "--bootstrap", kafka_bootstrap,
         "--idle-clock-rate", rate, "--timeout", "300"],
        cwd=ROOT, capture_output=True, text=True, timeout=400, check=False,
    )
    print(out.stdout, out.stderr[-3000:])
    assert out.returncode == 0, out.stdout
    assert "missing: 0" in out.stdout and "mismatched: 0" in out.stdout and "duplicated: 0" in out.stdout
    assert out.stdout.strip().endswith("equivalent")


def test_the_comparison_names_missing_duplicated_and_changed_decisions() -> None:
    ledger = lab_month()
    want = ledger.outputs
    changed = want[3].model_copy(update={"time": want[4].time}) if want[3].time != want[4].time else None
    got = [*want[:3], *([changed] if changed else []), *want[5:], want[6]]
    result = compare(want, got, ledger.inputs, 1e9)
    assert result.missing == [want[4].event_id] + ([] if changed else [want[3].event_id])
    assert result.duplicated == [want[6].event_id]
    assert result.mismatched == ([want[3].event_id] if changed else [])
    assert not result.equal and result.lines()[-1] == "NOT equivalent"
