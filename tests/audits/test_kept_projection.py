"""A replay keeps its projected log beside it; auditing the run again takes it only while it is the log's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.commands._runs import run_one
from ledger.core.knobs import Knobs
from ledger.log import EventLog
from ledger.queries import audit, projection, snapshot
from ledger.queries.detail import FOLDER
from ledger.replay.run import load_inputs
from tests.factories import Events

LAB = Path(__file__).resolve().parents[2] / "examples" / "lab"


@pytest.fixture
def lab_run(tmp_path: Path) -> Path:
    inputs = load_inputs(LAB / "trace.csv", LAB / "budgets.yaml")
    run = tmp_path / "run"
    run_one(inputs, Knobs(policy="fairshare", gpus_per_node=inputs.gpus_per_node), run, quiet=True)
    return run


def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the logs decoded from now on."""
    calls: list[int] = []
    load = projection.load_arrow
    monkeypatch.setattr(projection, "load_arrow", lambda *a, **k: calls.append(1) or load(*a, **k))
    return calls


def test_auditing_a_finished_run_again_reads_its_kept_projection_not_the_log(
    lab_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (lab_run / FOLDER / snapshot.SUBFOLDER / "key.json").exists()
    calls = decoded(monkeypatch)
    again = audit(lab_run)
    assert calls == []
    from_log = audit(lab_run / "events")  # a log directory given as such is always decoded
    assert calls == [1]
    assert again == from_log == json.loads((lab_run / "audit.json").read_text()) | {"tables": again["tables"]}


def test_a_log_appended_to_after_the_replay_is_decoded_again_and_the_new_event_counted(
    lab_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = audit(lab_run)
    log = EventLog(lab_run / "events")
    E = Events(cluster="lab")
    log.append([E.submit(6000, "late-1", "lab/vision/detect", gpus=8)])
    log.close()
    calls = decoded(monkeypatch)
    after = audit(lab_run)
    assert calls == [1]
    assert after["tables"]["workloads"]["rows"] == before["tables"]["workloads"]["rows"] + 1


def test_a_torn_or_foreign_kept_projection_is_ignored(lab_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = lab_run / FOLDER / snapshot.SUBFOLDER / "key.json"
    key.write_text("{not json")
    calls = decoded(monkeypatch)
    assert audit(lab_run)["tables"]["workloads"]["rows"] == 12 and calls == [1]
    key.write_text(json.dumps({"sha256": "0" * 64, "tables": []}))
    assert audit(lab_run)["tables"]["workloads"]["rows"] == 12 and calls == [1, 1]
