"""Decoding garbage raises the project's own errors, naming what is wrong; it never returns a half-built event."""

from __future__ import annotations

import io

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import codec
from ledger import events as ev
from ledger.codec import MAGIC, decode, encode, fingerprint
from ledger.errors import DecodeError, EventValidationError
from tests.factories import Events
from tests.log.strategies import any_event


def _body(type_name: str, record: dict[str, object]) -> bytes:
    schema = codec.raw_schemas()[type_name]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return MAGIC + fingerprint(schema) + buf.getvalue()


def _sample() -> ev.WorkloadSubmitted:
    return Events().submit(5, "w1", "ai2/olmo", gpus=16, kind="training", work_s=3600)


def _decodes_to_a_whole_event_or_raises(data: bytes) -> None:
    try:
        event = decode(data)
    except (DecodeError, EventValidationError) as exc:
        assert str(exc)
        return
    # Random bytes can be a valid message; then it must be a complete, valid event that re-encodes to them.
    assert ev.validated(event) == event
    assert encode(event) == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_never_decode_to_a_half_built_event(data: bytes) -> None:
    _decodes_to_a_whole_event_or_raises(data)


@settings(max_examples=300, deadline=None)
@given(fp=st.sampled_from(sorted(codec._readers())), body=st.binary(max_size=80))
def test_random_bodies_behind_a_known_fingerprint_never_decode_to_a_half_built_event(fp: bytes, body: bytes) -> None:
    _decodes_to_a_whole_event_or_raises(MAGIC + fp + body)


@settings(max_examples=40, deadline=None)
@given(event=any_event, data=st.data())
def test_a_message_cut_anywhere_is_rejected(event: ev.Event, data: st.DataObject) -> None:
    message = encode(event)
    cut = data.draw(st.integers(0, len(message) - 1))
    with pytest.raises((DecodeError, EventValidationError)):
        decode(message[:cut])


def test_every_cut_of_a_message_is_rejected() -> None:
    message = encode(_sample())
    for cut in range(len(message)):
        with pytest.raises(DecodeError):
            decode(message[:cut])


def test_empty_input_is_named() -> None:
    with pytest.raises(DecodeError, match="starts with nothing"):
        decode(b"")


def test_wrong_magic_is_named() -> None:
    message = encode(_sample())
    with pytest.raises(DecodeError, match="starts with c302, expected c301"):
        decode(b"\xc3\x02" + message[2:])


def test_unknown_fingerprint_is_named() -> None:
    message = encode(_sample())
    with pytest.raises(DecodeError, match="unknown schema fingerprint 0102030405060708"):
        decode(MAGIC + bytes(range(1, 9)) + message[10:])


def test_trailing_bytes_are_counted() -> None:
    with pytest.raises(DecodeError, match="WorkloadSubmitted: 3 trailing byte"):
        decode(encode(_sample()) + b"\x00\x01\x02")


def test_unknown_enum_index_in_the_body_is_a_decode_error() -> None:
    record = dict(codec.to_record(Events().complete(1, "w1")))
    good = _body("WorkloadCompleted", record)
    # outcome is the last field: an enum written as a zig-zag varint index; 3 symbols, so index 9 is unknown.
    bad = good[:-1] + bytes([9 << 1])
    with pytest.raises(DecodeError, match="WorkloadCompleted: body does not decode"):
        decode(bad)


def test_invalid_utf8_in_a_string_is_a_decode_error() -> None:
    message = encode(Events().requeue(1, "ab"))
    # workload_id "ab" is the last field: its two bytes end the message.
    with pytest.raises(DecodeError, match="WorkloadRequeued: body does not decode"):
        decode(message[:-2] + b"\xff\xfe")


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpus", -3), ("min_runtime_s", -60), ("budget", "two//slashes"), ("time", 0)],
)
def test_valid_avro_with_invalid_values_is_rejected_naming_field_and_value(field: str, value: object) -> None:
    record = dict(codec.to_record(_sample()))
    record[field] = value
    with pytest.raises(EventValidationError) as caught:
        decode(_body("WorkloadSubmitted", record))
    assert caught.value.field == field
    assert f"WorkloadSubmitted.{field}" in str(caught.value)
    shown = "1970" if field == "time" else repr(value)
    assert shown in str(caught.value)


@settings(max_examples=40, deadline=None)
@given(event=any_event)
def test_a_message_of_one_type_cannot_pass_as_another(event: ev.Event) -> None:
    """The fingerprint decides the type: swapping it for another's makes the body fail or validate as that type."""
    message = encode(event)
    for other, schema in codec.raw_schemas().items():
        if other == event.type_name:
            continue
        try:
            event = decode(MAGIC + fingerprint(schema) + message[10:])
        except (DecodeError, EventValidationError):
            continue
        assert event.type_name == other
        assert ev.validated(event) == event
