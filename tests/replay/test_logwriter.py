"""A replay's log written as bytes (outside events validated, the rest trusted) is the validated log."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import DecisionCore
from ledger.core.knobs import Knobs
from ledger.errors import EventValidationError
from ledger.events import CheckpointWritten, Event, WorkloadSubmitted
from ledger.log import EventLog
from ledger.replay.demo_month import generate
from ledger.replay.driver import ReplayDriver
from ledger.replay.logwriter import LogWriter
from ledger.replay.run import inputs_from_budgets
from tests.factories import at
from tests.log.strategies import any_event
from tests.replay.helpers import H, lab, segment_bytes, submit


def _replay(out: Path, *, direct: bool, inputs: list[Event], setup: list[Event], batch: int) -> EventLog:
    """Replay into a log at ``out``, through LogWriter (``direct``) or through ``EventLog.append``."""
    log = EventLog(out)
    core = DecisionCore(Knobs(policy="fairshare"), "demo" if setup[0].cluster == "demo" else "lab")
    driver = ReplayDriver(core, core.cluster, LogWriter(log) if direct else log.append, batch=batch)
    driver.feed(setup)
    driver.feed(inputs)
    driver.run()
    log.close()
    return log


def test_a_busy_day_of_the_demo_month_writes_the_same_segment_bytes_as_validated_appends(tmp_path: Path) -> None:
    month = generate(7)
    first_days = [s for s in month.submissions if s.time < month.start + timedelta(days=1)]
    replay = inputs_from_budgets(month.budgets, first_days, start=month.start)
    # small batches: many blocks, and outside events at every position of a batch
    direct = _replay(tmp_path / "direct", direct=True, inputs=replay.inputs, setup=replay.setup, batch=997)
    checked = _replay(tmp_path / "checked", direct=False, inputs=replay.inputs, setup=replay.setup, batch=997)
    kinds = {type(e).__name__ for e in checked}
    assert {"CheckpointWritten", "WorkloadPreempted", "WorkloadCompleted", "SchedulingDecision"} <= kinds
    assert len(direct) == len(checked) > 10_000
    assert segment_bytes(direct.path) == segment_bytes(checked.path)


def test_checkpoints_of_any_size_and_time_are_written_as_the_logs_encoder_writes_them(tmp_path: Path) -> None:
    events = [
        CheckpointWritten(event_id=eid, cluster=cluster, time=at(minute), workload_id=wid, progress_s=progress)
        for eid, cluster, minute, wid, progress in [
            ("c/w/ckpt1", "c", 0, "w", 0),
            ("c/w/ckpt2", "c", 0, "w", 63),  # the last one-byte varint
            ("c/w/ckpt3", "c", 0.5, "w", 64),  # the first two-byte one
            ("x" * 200, "c" * 70, 1e6, "ü" * 40, 2**62),  # long strings, non-ASCII, a far time, a huge progress
            ("k/ü/ckpt1", "k", -1, "ü", 2**31),
        ]
    ]
    direct, checked = EventLog(tmp_path / "direct"), EventLog(tmp_path / "checked")
    LogWriter(direct).write(events, [])
    checked.append(events)
    assert segment_bytes(direct.path) == segment_bytes(checked.path)
    assert list(direct) == events


def test_a_bad_submission_from_outside_is_refused_with_the_logs_own_message_and_nothing_written(
    tmp_path: Path,
) -> None:
    good = submit(0, "w1", "a", 8, 2 * H, interval_s=H // 2)
    # built without validation, as a careless importer might: 0 GPUs
    bad = WorkloadSubmitted.model_construct(**{**good.__dict__, "event_id": "lab/t/w2", "workload_id": "w2", "gpus": 0})
    later = submit(30, "w3", "b", 8, H)
    setup = lab().events(at(0))

    def refusal(direct: bool, out: Path) -> tuple[str, EventLog]:
        with pytest.raises(EventValidationError) as caught:
            _replay(out, direct=direct, inputs=[good, bad, later], setup=list(setup), batch=20_000)
        return str(caught.value), EventLog(out, readonly=True)

    message, direct_log = refusal(True, tmp_path / "direct")
    expected, checked_log = refusal(False, tmp_path / "checked")
    assert message == expected
    assert "(event 'lab/t/w2')" in message and "gpus" in message and "value 0" in message
    assert len(direct_log) == len(checked_log) == 0


def test_core_outputs_are_written_without_validation_but_outside_inputs_never_are(tmp_path: Path) -> None:
    """The trust is by origin: the same bad event is refused as an input, and taken as the driver's own output."""
    bad = CheckpointWritten.model_construct(event_id="c/w/ckpt1", cluster="c", time=at(0), workload_id="", progress_s=1)
    writer = LogWriter(EventLog(tmp_path / "log"))
    with pytest.raises(EventValidationError, match=r"batch item 1 \(event 'c/w/ckpt1'\).*workload_id"):
        writer.write([bad, bad], [1])
    assert writer.write([bad], []) == 1  # trusted code's output: written as it is, as the log's encoder would



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(any_event, min_size=1, max_size=12, unique_by=lambda e: e.event_id))
def test_any_valid_events_are_written_as_the_bytes_of_a_validated_append(
    tmp_path_factory: pytest.TempPathFactory, events: list[Event]
) -> None:
    root = tmp_path_factory.mktemp("logs")
    direct, checked = EventLog(root / "direct"), EventLog(root / "checked")
    LogWriter(direct).write(events, list(range(0, len(events), 2)))  # every other one from outside
    checked.append(events)
    assert segment_bytes(direct.path) == segment_bytes(checked.path)
