"""The compiled replay driver and log writer (built by default): the same log, byte for byte, as their sources."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import ledger.replay
from tests.replay.helpers import segment_bytes

ROOT = Path(__file__).resolve().parents[2]
compiled_only = pytest.mark.skipif(
    not ledger.replay.COMPILED, reason="the replay driver is not compiled (no C compiler, or make pure)"
)

# a day of the demo month, replayed into argv[1]; run by this process's build and by a pure-Python one
_REPLAY = """
import sys
if sys.argv[2] == "pure":
    import bench._pure_core
    bench._pure_core.install()
from datetime import timedelta
import ledger.core, ledger.replay
from ledger.core.knobs import Knobs
from ledger.replay.demo_month import generate
from ledger.replay.run import inputs_from_budgets, replay
assert ledger.replay.COMPILED == ledger.core.COMPILED == (sys.argv[2] == "compiled")
month = generate(7)
day = [s for s in month.submissions if s.time < month.start + timedelta(days=1)]
replay(inputs_from_budgets(month.budgets, day, start=month.start), Knobs(policy="fairshare"), sys.argv[1])
"""


def _digest(log_dir: Path) -> str:
    return hashlib.sha256(b"".join(segment_bytes(log_dir).values())).hexdigest()


@compiled_only
def test_the_driver_and_log_writer_are_compiled() -> None:
    for name in ("driver", "logwriter"):
        module = importlib.import_module(f"ledger.replay.{name}")
        assert not str(module.__file__).endswith(".py"), f"ledger.replay.{name} runs from its sources"


@compiled_only
def test_a_compiled_replay_writes_the_pure_replays_log_byte_for_byte(tmp_path: Path) -> None:
    for build in ("compiled", "pure"):
        subprocess.run([sys.executable, "-c", _REPLAY, str(tmp_path / build), build], cwd=ROOT, check=True)
    compiled, pure = tmp_path / "compiled" / "events", tmp_path / "pure" / "events"
    assert len(segment_bytes(pure)) >= 1
    assert _digest(compiled) == _digest(pure)
