"""The SDK: a home-grown scheduler's day recorded call by call, durable, idempotent, resumable after a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger import Ledger
from ledger import events as ev
from ledger.errors import ConfigError, EventValidationError
from ledger.log import EventLog
from tests.adapters.helpers import waits_from_events

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def minutes(m: float) -> datetime:
    return T0 + timedelta(minutes=m)


def read(path: Path) -> list[ev.Event]:
    with EventLog(path, readonly=True) as log:
        return list(log)


def test_a_schedulers_morning_lands_in_the_log_with_attempts_and_protection_filled_in(tmp_path: Path) -> None:
    with Ledger("lab", log=tmp_path / "events") as ledger:
        ledger.submit("train-7", budget="ai2/olmo", user="ada", gpus=16, min_runtime_s=3600, time=minutes(0))
        started = ledger.start("train-7", nodes=["lab-n001", "lab-n002"], time=minutes(5))
        ledger.checkpoint("train-7", progress_s=1800, time=minutes(35))
        ledger.preempt("train-7", "fair_share", preempted_by="eval-2", time=minutes(70))
        ledger.requeue("train-7", time=minutes(70))
        again = ledger.start("train-7", nodes=["lab-n003", "lab-n004"], time=minutes(90))
        ledger.complete("train-7", "succeeded", time=minutes(200))
    assert (started.gpus, started.attempt, started.allocated) == (16, 1, True)
    assert started.protected_until == minutes(65)
    assert again.attempt == 2
    events = read(tmp_path / "events")
    assert [e.type_name for e in events] == [
        "WorkloadSubmitted", "WorkloadStarted", "CheckpointWritten", "WorkloadPreempted", "WorkloadRequeued",
        "WorkloadStarted", "WorkloadCompleted",
    ]  # fmt: skip
    assert waits_from_events(events) == {"9-64": [5 * 60, 20 * 60]}
    assert events[3].event_id == "lab/sdk/train-7/preempt1"


def test_repeating_calls_after_a_crash_records_nothing_twice_and_attempts_continue(tmp_path: Path) -> None:
    with Ledger("lab", log=tmp_path) as ledger:
        ledger.submit("j", budget="ai2", user="u", gpus=1, min_runtime_s=0, time=minutes(0))
        ledger.start("j", nodes=["lab-n001"], time=minutes(1))
    # the scheduler restarts and replays its last calls, then carries on
    with Ledger("lab", log=tmp_path) as ledger:
        ledger.submit("j", budget="ai2", user="u", gpus=1, min_runtime_s=0, time=minutes(0))
        ledger.preempt("j", "user", time=minutes(2))
        ledger.requeue("j", time=minutes(2))
        restarted = ledger.start("j", nodes=["lab-n002"], time=minutes(3))
    events = read(tmp_path)
    assert len(events) == 5
    assert restarted.attempt == 2 and restarted.gpus == 1
    assert restarted.allocated is False and restarted.protected_until == minutes(3)  # min runtime 0: unallocated


def test_bad_calls_name_the_field_and_write_nothing(tmp_path: Path) -> None:
    with Ledger("lab", log=tmp_path) as ledger:
        with pytest.raises(EventValidationError, match="gpus"):
            ledger.submit("j", budget="ai2", user="u", gpus=0, min_runtime_s=60)
        with pytest.raises(EventValidationError, match="budget"):
            ledger.submit("j", budget="ai2//x", user="u", gpus=1, min_runtime_s=60)
        with pytest.raises(EventValidationError, match="not submitted"):
            ledger.start("ghost", nodes=["lab-n001"])
    assert read(tmp_path) == []
    with pytest.raises(ConfigError):
        Ledger("lab")
