"""The log's compiled Avro encoders write exactly fastavro's bytes, and refuse what does not fit, naming it."""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.write import Writer
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.codec import union_schema
from ledger.errors import EventValidationError
from ledger.log import EventLog
from ledger.log.avro_encode import UnencodableValue, UnionEncoder, union_encoder, varint
from ledger.log.checks import FULL_NAMES, check_batch
from ledger.log.container import BlockEncoder, new_header, read_header
from tests.factories import Events, at
from tests.log.strategies import STRATEGIES

ENCODER = union_encoder(union_schema())


def fastavro_bytes(schema: Any, full_name: str, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, (full_name, record))
    return buf.getvalue()


def fastavro_block(records: list[tuple[str, dict[str, Any]]], sync: bytes) -> bytes:
    """Encode a batch as the log did before it compiled its encoders: one fastavro Writer block."""
    buf = io.BytesIO()
    writer = Writer(buf, union_schema(), codec="null", sync_marker=sync, sync_interval=1 << 62)
    buf.seek(0)
    buf.truncate(0)
    for record in records:
        writer.write(record)
    writer.flush()
    return buf.getvalue()


def as_imported(record: dict[str, Any], zone: timezone = UTC) -> dict[str, Any]:
    """Return the record as the importers pass it: times as integer microseconds, arrays as lists."""
    out = dict(record)
    for key, value in record.items():
        if isinstance(value, datetime):
            out[key] = ev.to_us(value)
        elif isinstance(value, tuple):
            out[key] = list(value)
    return out


def in_zone(record: dict[str, Any], zone: timezone) -> dict[str, Any]:
    """Return the record with every time given in another zone (the same instants)."""
    return {k: v.astimezone(zone) if isinstance(v, datetime) else v for k, v in record.items()}


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_event_encodes_to_fastavros_exact_bytes(type_name: str, data: st.DataObject) -> None:
    event = data.draw(STRATEGIES[type_name])
    ((full, record),) = check_batch([event])  # what append() hands the block encoder
    expected = fastavro_bytes(union_schema(), full, record)
    assert ENCODER.encode(full, record) == expected
    assert ENCODER.encode(full, as_imported(record)) == expected, "as append_records gets it from an importer"
    india = timezone(timedelta(hours=5, minutes=30))
    assert ENCODER.encode(full, in_zone(record, india)) == expected, "a time is an instant, whatever its zone"


@settings(max_examples=25, deadline=None)
@given(events=st.lists(st.one_of(*STRATEGIES.values()), min_size=1, max_size=30))
def test_a_batch_is_the_block_fastavros_writer_wrote(events: list[ev.Event]) -> None:
    records = check_batch(events)
    sync = bytes(range(16))
    assert BlockEncoder(union_schema(), sync).encode(records) == fastavro_block(records, sync)


def a_day_of_every_event(e: Events) -> list[ev.Event]:
    """One of each event type, with optional fields both set and unset."""
    return [
        e.capacity(0, 64),
        e.node(0, "ai2", managers=("dirk", "ana")),
        e.node(0, "ai2/olmo", share=2.0),
        e.allocate(1, "ai2/olmo", 3.0, "dirk"),
        ev.AllocationRefused(
            event_id="lab-r1",
            cluster="lab",
            time=at(2),
            path="ai2/olmo",
            share=9.5,
            set_by="bob",
            refused_event_id="lab-x",
            reason="bob manages no ancestor of ai2/olmo",
        ),
        e.submit(5, "pretrain-7b", "ai2/olmo", gpus=32, min_runtime_s=4 * 3600),
        ev.SchedulingDecision(
            event_id="lab-d1",
            cluster="lab",
            time=at(6),
            action="start",
            workload_id="pretrain-7b",
            nodes=("lab-n000", "lab-n001", "lab-n002", "lab-n003"),
            reason="first in fair-share order",
            budget_ratio=0.25,
            queue_position=1,
            effective_time=at(6),
        ),
        e.start(6, "pretrain-7b", ("lab-n000", "lab-n001", "lab-n002", "lab-n003"), 32),
        e.checkpoint(36, "pretrain-7b", 1800),
        e.preempt(40, "pretrain-7b", "fair_share"),
        e.requeue(40, "pretrain-7b"),
        e.host(41, "lab-n002", "failed", reason="xid 79 — fell off the bus"),
        e.complete(90, "pretrain-7b", "cancelled"),
    ]


# sha256 of the blocks (everything after the header) of the segment that the log wrote for
# a_day_of_every_event() while fastavro's Writer encoded its batches: the same appends must keep
# giving the same bytes. (The header is left out: fastavro's own header, which the log wrote then,
# ordered a field's "doc" and "default" keys by string hash; the log now writes key-sorted JSON.)
# Re-pinned when SchedulingDecision went to version 2 (the hold action) and BudgetNodeDefined to
# version 2 (a node's level): their records now carry schema_version 2 (and the node its level).
BLOCKS_SHA256 = "f815cf0922ada8001427426df118ab3edf271e9a3dc610569c58cb6bedfc1cd3"


def test_segments_are_byte_identical_to_the_ones_fastavro_wrote(tmp_path: Path) -> None:
    day = a_day_of_every_event(Events(cluster="lab"))
    assert {x.type_name for x in day} == set(ev.EVENT_TYPES)
    with EventLog(tmp_path / "events") as log:
        log.append(day[:5])
        log.append(day[5:])
    (segment,) = sorted((tmp_path / "events").glob("*.avro"))
    data = segment.read_bytes()
    header = read_header(data, str(segment))
    assert data[: header.end] == new_header(union_schema(), header.sync)
    assert hashlib.sha256(data[header.end :]).hexdigest() == BLOCKS_SHA256
    records = check_batch(day)
    blocks = fastavro_block(records[:5], header.sync) + fastavro_block(records[5:], header.sync)
    assert data[header.end :] == blocks


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    log = EventLog(tmp_path / "events")
    log.append(a_day_of_every_event(Events(cluster="lab"))[:3])
    return log


def _bytes(log: EventLog) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(log.path.glob("*.avro")))


def _submission(**changes: Any) -> dict[str, Any]:
    record = as_imported(check_batch([Events(cluster="lab").submit(5, "w1", "ai2/olmo", gpus=8)])[0][1])
    record.update(changes)
    return record


BAD = [
    ("more GPUs than an Avro int holds", "gpus", {"gpus": 2**31}, "does not fit an Avro int"),
    ("seconds beyond an Avro long", "min_runtime_s", {"min_runtime_s": 2**63}, "does not fit an Avro long"),
    ("a time beyond an Avro long", "time", {"time": -(2**63) - 1}, "does not fit an Avro long"),
    ("text where a number belongs", "priority", {"priority": "3"}, "not an Avro int"),
    ("a number where text belongs", "user", {"user": 7}, "not an Avro string"),
    ("a time without a time zone", "time", {"time": datetime(2026, 3, 2, 9)}, "without a time zone"),
    ("a fraction where a time belongs", "time", {"time": 1.5e15}, "not an Avro long (timestamp-micros)"),
    (
        "a kind the enum lacks",
        "kind",
        {"kind": "urgent"},
        "not an Avro enum WorkloadKind (batch, training, debug, interactive, other)",
    ),
    ("a flag that is not a flag", "resumable", {"resumable": "yes"}, "not an Avro boolean"),
    ("a fraction in an optional long", "work_s", {"work_s": 1.5}, "not an Avro null | long"),
    ("text that UTF-8 cannot encode", "budget", {"budget": "ai2/\ud800"}, "text that UTF-8 cannot encode"),
]


@pytest.mark.parametrize(("case", "field", "changes", "reason"), BAD, ids=[b[0] for b in BAD])
def test_a_value_that_does_not_encode_refuses_the_batch_naming_field_and_value(
    log: EventLog, case: str, field: str, changes: dict[str, Any], reason: str
) -> None:
    before = _bytes(log)
    good = _submission(event_id="lab-ok")
    bad = _submission(event_id="lab-bad", **changes)
    with pytest.raises(EventValidationError) as caught:
        log.append_records([("WorkloadSubmitted", good), ("WorkloadSubmitted", bad)])
    assert caught.value.field == field
    message = str(caught.value)
    assert message.startswith(f"event 'lab-bad': WorkloadSubmitted.{field}: "), message
    assert reason in message
    assert f"value {changes[field]!r}" in message
    assert _bytes(log) == before, "nothing of the batch was written"
    assert log.append_records([("WorkloadSubmitted", good)]) == 1, "the refused batch's ids are not taken"


def test_a_missing_field_without_default_is_named(log: EventLog) -> None:
    record = _submission(event_id="lab-bad")
    del record["budget"]
    with pytest.raises(EventValidationError, match=r"WorkloadSubmitted\.budget: missing") as caught:
        log.append_records([("WorkloadSubmitted", record)])
    assert caught.value.field == "budget"


def test_a_missing_field_with_a_default_is_written_as_fastavro_writes_it() -> None:
    record = _submission()
    for name in ("nodes", "priority", "kind", "work_s", "checkpoint_interval_s", "restart_s"):
        del record[name]
    full = FULL_NAMES["WorkloadSubmitted"]
    assert ENCODER.encode(full, record) == fastavro_bytes(union_schema(), full, record)


def test_varints_match_fastavro_across_every_length() -> None:
    schema = {"type": "long"}
    for n in [0, 1, 63, 64, 127, 128, 8191, 8192, 2**27, 2**28, 2**35, 2**56, 2**62, 2**63 - 1]:
        for value in (n, -n, -n - 1):
            if value >= -(2**63):
                buf = io.BytesIO()
                fastavro.schemaless_writer(buf, schema, value)
                assert varint((value << 1) ^ (value >> 63)) == buf.getvalue(), value


# Avro types the event schemas do not use today, so a schema change does not meet an untested encoder.
EVERY_TYPE = {
    "type": "record",
    "name": "Everything",
    "namespace": "test",
    "fields": [
        {"name": "nothing", "type": "null"},
        {"name": "flag", "type": "boolean"},
        {"name": "small", "type": "float"},
        {"name": "blob", "type": "bytes"},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "millis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "either", "type": ["null", "int", "string", "double", "Digest"]},
        {
            "name": "child",
            "type": {
                "type": "record",
                "name": "Node",
                "fields": [
                    {"name": "label", "type": "string"},
                    {"name": "kids", "type": {"type": "array", "items": "Node"}},
                    {"name": "next", "type": ["null", "Node"], "default": None},
                ],
            },
        },
    ],
}

nodes = st.recursive(
    st.fixed_dictionaries({"label": st.text(max_size=5), "kids": st.just([]), "next": st.none()}),
    lambda inner: st.fixed_dictionaries(
        {"label": st.text(max_size=5), "kids": st.lists(inner, max_size=3), "next": st.none() | inner}
    ),
    max_leaves=8,
)
everything = st.fixed_dictionaries(
    {
        "nothing": st.none(),
        "flag": st.booleans(),
        "small": st.floats(width=32, allow_nan=False),
        "blob": st.binary(max_size=40),
        "digest": st.binary(min_size=4, max_size=4),
        "counts": st.dictionaries(st.text(max_size=4), st.integers(-(2**63), 2**63 - 1), max_size=4),
        "millis": st.integers(0, 2**50) | st.datetimes(timezones=st.just(UTC)),
        "either": st.none()
        | st.integers(-(2**31), 2**31 - 1)
        | st.text(max_size=6)
        | st.floats(allow_nan=False)
        | st.binary(min_size=4, max_size=4),
        "child": nodes,
    }
)


@settings(max_examples=150, deadline=None)
@given(record=everything)
def test_every_avro_type_encodes_to_fastavros_bytes(record: dict[str, Any]) -> None:
    union = fastavro.parse_schema([EVERY_TYPE])
    encoder = UnionEncoder(union)
    assert encoder.encode("test.Everything", record) == fastavro_bytes(union, "test.Everything", record)


def test_a_schema_the_encoder_does_not_understand_fails_when_compiled() -> None:
    money = {"type": "bytes", "logicalType": "decimal", "precision": 4}
    decimal = {"type": "record", "name": "R", "fields": [{"name": "x", "type": money}]}
    with pytest.raises(ValueError, match="logicalType 'decimal'"):
        UnionEncoder([decimal])
    either = ["null", decimal, {**decimal, "name": "T"}]
    two_records = {"type": "record", "name": "S", "fields": [{"name": "x", "type": either}]}
    with pytest.raises(ValueError, match="unions of several records"):
        UnionEncoder([two_records])


def test_the_generated_code_is_there_to_read() -> None:
    assert "def branch_3_gpuledger_WorkloadSubmitted(r, out):" in ENCODER.source
    assert "# work_s: null | long" in ENCODER.source


def test_an_unknown_record_name_is_refused() -> None:
    with pytest.raises(UnencodableValue, match="not a record of the log's schema"):
        ENCODER.encode("gpuledger.Nonsense", {})


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.lists(st.integers(0, 3), max_size=2),
    st.datetimes(),
    st.sampled_from(["batch", "failed", "healthy", "start", "user"]),
)


@settings(max_examples=300, deadline=None)
@given(event=st.one_of(*STRATEGIES.values()), data=st.data())
def test_a_wrong_value_is_refused_or_written_as_fastavro_writes_it_never_otherwise(
    event: ev.Event, data: st.DataObject
) -> None:
    ((full, record),) = check_batch([event])
    field = data.draw(st.sampled_from(sorted(record)))
    record = {**record, field: data.draw(junk)}
    try:
        expected: bytes | None = fastavro_bytes(union_schema(), full, record)
    except Exception:  # fastavro refuses a wrong value in many ways
        expected = None
    try:
        ours: bytes | None = ENCODER.encode(full, record)
    except UnencodableValue as refused:
        assert refused.field == field
        ours = None
    if expected is None:
        assert ours is None, "what fastavro refuses is refused"
    else:
        assert ours in (None, expected), "stricter than fastavro at most, never other bytes"
