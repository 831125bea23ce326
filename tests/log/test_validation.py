"""A bad event is rejected with a message naming the field and the value, and nothing of its batch is appended."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger import events as ev
from ledger.errors import EventValidationError
from ledger.log import EventLog
from tests.factories import Events, at


def _submission(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "event_id": "lab-bad", "cluster": "lab", "time": at(30), "workload_id": "w9", "budget": "ai2/olmo",
        "user": "ana", "gpus": 8, "min_runtime_s": 3600, "resumable": True,
    }
    fields.update(overrides)
    return {k: v for k, v in fields.items() if v is not _MISSING}


_MISSING = object()

# (case, field named in the error, fields of the bad submission, text the message must show for the value)
CASES = [
    ("negative GPU count", "gpus", {"gpus": -1}, "-1"),
    ("unknown enum value", "kind", {"kind": "urgent"}, "'urgent'"),
    ("missing field", "user", {"user": _MISSING}, "missing"),
    ("time before 2000", "time", {"time": datetime(1999, 12, 31, 23, 59, tzinfo=UTC)}, "1999"),
    ("time far in the future", "time", {"time": datetime(2300, 1, 1, tzinfo=UTC)}, "2300"),
    ("a string where a number belongs", "gpus", {"gpus": "8"}, "'8'"),
    ("a time without a time zone", "time", {"time": datetime(2026, 3, 2)}, "2026"),
    ("more GPUs than an Avro int holds", "gpus", {"gpus": 2**31}, str(2**31)),
    ("seconds beyond an Avro long", "min_runtime_s", {"min_runtime_s": 2**63}, str(2**63)),
    ("a priority below an Avro int", "priority", {"priority": -(2**31) - 1}, str(-(2**31) - 1)),
    ("an empty budget path", "budget", {"budget": ""}, "''"),
    ("a fraction where a whole number belongs", "gpus", {"gpus": 8.5}, "8.5"),
    ("a flag where a number belongs", "min_runtime_s", {"min_runtime_s": True}, "True"),
]


@pytest.fixture
def log_with_history(tmp_path: Path) -> tuple[EventLog, bytes]:
    e = Events()
    log = EventLog(tmp_path / "events")
    log.append([e.capacity(0, 64), e.node(0, "ai2"), e.node(0, "ai2/olmo")])
    return log, _log_bytes(log)


def _log_bytes(log: EventLog) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(log.path.glob("*.avro")))


@pytest.mark.parametrize(("case", "field", "overrides", "shown"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_event_in_a_batch_is_rejected_and_nothing_is_appended(
    log_with_history: tuple[EventLog, bytes], case: str, field: str, overrides: dict[str, Any], shown: str
) -> None:
    log, before = log_with_history
    e = Events(cluster="lab2")
    # Built past pydantic's checks, as model_construct or model_copy(update=...) would let a caller do.
    bad = ev.WorkloadSubmitted.model_construct(**_submission(**overrides))
    batch = [e.submit(10, "w1", "ai2/olmo"), e.submit(11, "w2", "ai2/olmo"), bad, e.submit(12, "w3", "ai2/olmo")]
    with pytest.raises(EventValidationError) as caught:
        log.append(batch)
    message = str(caught.value)
    assert caught.value.field == field, message
    assert f"WorkloadSubmitted.{field}" in message
    assert shown in message, message
    assert "batch item 2" in message and "lab-bad" in message, "the message says which event of the batch"
    assert len(log) == 3
    assert _log_bytes(log) == before, "not one byte of the batch reached the log"


@pytest.mark.parametrize(("case", "field", "overrides", "shown"), CASES[:7], ids=[c[0] for c in CASES[:7]])
def test_the_same_cases_are_rejected_when_parsed_from_plain_data(
    case: str, field: str, overrides: dict[str, Any], shown: str
) -> None:
    with pytest.raises(EventValidationError) as caught:
        ev.parse_event("WorkloadSubmitted", _submission(**overrides), where="trace.csv:7")
    assert caught.value.field == field
    assert str(caught.value).startswith("trace.csv:7: WorkloadSubmitted.")
    assert shown in str(caught.value)


def test_text_avro_cannot_encode_is_rejected_naming_the_field(log_with_history: tuple[EventLog, bytes]) -> None:
    log, before = log_with_history
    e = Events(cluster="lab2")
    bad = ev.WorkloadSubmitted.model_construct(**_submission(user="ana\ud800"))  # a lone surrogate: not UTF-8
    with pytest.raises(EventValidationError, match=r"WorkloadSubmitted.user: .*unicode.*'ana\\ud800'") as caught:
        log.append([e.submit(9, "w0", "ai2/olmo"), bad])
    assert caught.value.field == "user"
    assert _log_bytes(log) == before


def test_something_that_is_not_an_event_is_rejected(log_with_history: tuple[EventLog, bytes]) -> None:
    log, before = log_with_history
    with pytest.raises(EventValidationError, match="batch item 1: expected a gpuledger event, got dict"):
        log.append([Events(cluster="x").requeue(1, "w"), {"event_id": "x"}])  # type: ignore[list-item]
    assert _log_bytes(log) == before


def test_an_event_built_with_loose_types_is_stored_normalised(tmp_path: Path) -> None:
    """model_construct with a list where the model keeps a tuple: validated, stored, and read back as the model."""
    loose = ev.WorkloadStarted.model_construct(
        event_id="s1", cluster="lab", time=at(1), workload_id="w1", nodes=["lab-n000"], gpus=8,
        allocated=True, protected_until=at(61),
    )
    log = EventLog(tmp_path / "events")
    assert log.append([loose]) == 1
    (back,) = list(log)
    assert back.nodes == ("lab-n000",)  # type: ignore[attr-defined]
    assert back == ev.validated(loose)
