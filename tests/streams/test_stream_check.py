"""``gpuledger stream-check``: a replayed run through Kafka and the worker, compared with the run, both clock modes."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ledger.core import Knobs
from ledger.events import Event, to_us
from ledger.log import open_log
from ledger.replay.demo_month import DEMO, generate
from ledger.replay.run import inputs_from_budgets, replay
from ledger.streams.equivalence import check_offline, compare
from ledger.streams.sources import is_core_output
from tests.streams.harness import ROOT
from tests.streams.scenarios import checkpoint_heavy, lab_month


def _same_instant_inputs(events: list[Event]) -> int:
    """Return how many instants hold more than one input."""
    times = Counter(to_us(e.time) for e in events if not is_core_output(e))
    return sum(1 for n in times.values() if n > 1)


@pytest.mark.parametrize("rate", [0.0, 1e9], ids=["idle-clock-off", "history-replay"])
def test_the_worker_service_decides_what_the_replay_decided_where_thousands_of_instants_hold_several_inputs(
    rate: float,
) -> None:
    ledger = checkpoint_heavy()  # a busy cluster: checkpoints of many workloads fall in the same minute
    assert _same_instant_inputs(list(ledger.events)) > 4000
    result = check_offline(ledger.events, knobs=Knobs(), idle_clock_rate=rate)
    assert result.equal, result.lines()
    assert result.got == len(ledger.outputs)


@pytest.mark.slow
def test_the_demo_month_through_the_worker_service_is_equivalent_to_its_replay_in_both_clock_modes(
    tmp_path: Path,
) -> None:
    month = generate(7, mix=DEMO)
    run = tmp_path / "run"
    knobs = Knobs(gpus_per_node=month.budgets.gpus_per_node)
    replay(inputs_from_budgets(month.budgets, list(month.submissions), start=month.start), knobs, run, until=month.end)
    assert _same_instant_inputs(list(open_log(run))) > 10_000
    for rate in ("0", "1e9"):
        out = subprocess.run(
            [sys.executable, "-m", "ledger.cli", "stream-check", str(run), "--offline", "--idle-clock-rate", rate],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr[-3000:]
        assert "missing: 0" in out.stdout and "mismatched: 0" in out.stdout and "unexpected: 0" in out.stdout
        assert out.stdout.strip().endswith("equivalent")


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("rate", ["0", "1e9"], ids=["idle-clock-off", "history-replay"])
def test_stream_check_finds_the_worker_equivalent_to_the_replay(
    kafka_bootstrap: str, tmp_path: Path, rate: str
) -> None:
    month = generate(7, scale=0.1, mix=DEMO)
    run = tmp_path / "run"
    knobs = Knobs(gpus_per_node=month.budgets.gpus_per_node)
    # replayed to its end: a run stopped at the month's end leaves wake-ups the history-replay worker plays
    replay(inputs_from_budgets(month.budgets, list(month.submissions), start=month.start), knobs, run)
    assert _same_instant_inputs(list(open_log(run))) > 200
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


def test_stream_check_says_when_it_runs_other_knobs_than_the_run_was_replayed_with(tmp_path: Path) -> None:
    lab = ROOT / "examples" / "lab"
    run = tmp_path / "run"

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ledger.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, check=False)

    replayed = cli("replay", str(lab / "trace.csv"), "--budgets", str(lab / "budgets.yaml"), "--out", str(run),
                   "--debug-hosts", "1", "--quiet")
    assert replayed.returncode == 0, replayed.stderr
    # the manager forgets the run's debug partition: the check says so before its NOT equivalent is read
    forgot = cli("stream-check", str(run), "--offline")
    assert forgot.returncode == 1
    assert "debug_hosts 1 in the run, auto here" in forgot.stderr
    same = cli("stream-check", str(run), "--offline", "--debug-hosts", "1")
    assert same.returncode == 0, same.stdout
    assert "note:" not in same.stderr
