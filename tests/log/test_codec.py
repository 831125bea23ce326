"""Single-object encoding: every event survives encode/decode, and an older writer's events still read."""

from __future__ import annotations

import io
import struct

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import codec
from ledger import events as ev
from ledger.codec import MAGIC, decode, encode, fingerprint, history_schemas
from tests.log.strategies import INT32, STRATEGIES, names, seconds, times


def test_there_is_a_strategy_for_every_event_type() -> None:
    assert set(STRATEGIES) == set(ev.EVENT_TYPES)


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_event_round_trips_through_single_object_encoding(type_name: str, data: st.DataObject) -> None:
    event = data.draw(STRATEGIES[type_name])
    message = encode(event)
    assert message[:2] == MAGIC
    assert message[2:10] == fingerprint(codec.raw_schemas()[type_name])
    back = decode(message)
    assert type(back) is type(event)
    assert back == event
    assert back.model_dump() == event.model_dump()  # same values, tuples stay tuples, times stay UTC


@settings(max_examples=60, deadline=None)
@given(event=st.one_of(*STRATEGIES.values()))
def test_trusted_rebuild_matches_model_construct(event: ev.Event) -> None:
    """The log's fast rebuild gives the same object model_construct would."""
    type_name = event.type_name
    record = dict(codec.to_record(event))
    fast = codec.trusted_from_record(type_name, dict(record))
    slow = ev.EVENT_TYPES[type_name].model_construct(**record)
    assert fast == event
    assert fast.__dict__ == slow.__dict__
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.__pydantic_private__ == slow.__pydantic_private__


def _v1_schema() -> dict[str, object]:
    (v1,) = [s for s in history_schemas() if s["name"] == "WorkloadSubmitted"]
    assert "kind" not in {f["name"] for f in v1["fields"]}, "the v1 file is the real older writer"
    return v1


def _encode_with(schema: dict[str, object], record: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return MAGIC + fingerprint(schema) + buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    event_id=names, workload_id=names, user=names, time=times, gpus=st.integers(1, INT32),
    min_runtime_s=seconds, resumable=st.booleans(), priority=st.integers(-INT32 - 1, INT32),
)
def test_events_written_with_the_v1_schema_decode_with_the_new_fields_defaulted(
    event_id: str, workload_id: str, user: str, time: object, gpus: int, min_runtime_s: int,
    resumable: bool, priority: int,
) -> None:
    record = {
        "event_id": event_id, "cluster": "lab", "time": time, "schema_version": 1, "workload_id": workload_id,
        "budget": "ai2/olmo", "user": user, "gpus": gpus, "min_runtime_s": min_runtime_s,
        "resumable": resumable, "priority": priority,
    }
    event = decode(_encode_with(_v1_schema(), record))
    assert isinstance(event, ev.WorkloadSubmitted)
    assert event == ev.WorkloadSubmitted(
        **record, nodes=0, kind="batch", work_s=None, checkpoint_interval_s=None, restart_s=None
    )
    assert event.schema_version == 1, "the writer's version is kept, so readers can tell old events apart"


def test_v1_and_current_fingerprints_differ() -> None:
    current = fingerprint(codec.raw_schemas()["WorkloadSubmitted"])
    assert fingerprint(_v1_schema()) != current
    assert struct.unpack("<Q", current)[0] != 0
