"""The worker's messages: fastavro's bytes behind the single-object header, read back into the same events."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest

from ledger.codec import MAGIC, decode, encode, fingerprint, raw_schemas, schema_dir, to_record
from ledger.errors import DecodeError
from tests.streams.scenarios import lab_month


def _crc64_avro(canonical: bytes) -> int:
    """The Rabin fingerprint as the Avro specification spells it out (the reference for fastavro's)."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in canonical:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def test_the_fingerprint_is_the_specifications_crc64_of_the_canonical_form() -> None:
    for schema in raw_schemas().values():
        canonical = fastavro.schema.to_parsing_canonical_form(schema).encode()
        assert fingerprint(schema) == struct.pack("<Q", _crc64_avro(canonical))


def test_every_event_of_a_month_is_fastavros_body_behind_the_header_and_decodes_to_itself() -> None:
    events = lab_month().events
    assert len({e.type_name for e in events}) >= 7
    for e in events:
        schema = raw_schemas()[e.type_name]
        body = io.BytesIO()
        fastavro.schemaless_writer(body, fastavro.parse_schema(schema), to_record(e))
        data = encode(e)
        assert data == MAGIC + fingerprint(schema) + body.getvalue()
        assert decode(data) == e


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda good: b"", "starts with nothing"),
        (lambda good: b"\x00garbage", "starts with 0067"),
        (lambda good: b"\xc3\x01" + b"\xff" * 8 + good[10:], "unknown schema fingerprint ffffffffffffffff"),
        (lambda good: good[:-3], "body does not decode"),
        (lambda good: good + b"\x00", "1 trailing byte"),
    ],
    ids=["empty", "bad magic", "unknown fingerprint", "truncated", "trailing byte"],
)
def test_a_bad_record_is_refused_saying_why(mangle: object, reason: str) -> None:
    good = encode(lab_month().inputs[5])
    with pytest.raises(DecodeError, match=reason):
        decode(mangle(good))  # type: ignore[operator]


def test_a_record_written_by_an_older_schema_is_resolved_into_the_current_model() -> None:
    old = json.loads((schema_dir() / "history" / "workload_submitted.v1.avsc").read_text())
    sub = next(e for e in lab_month().inputs if e.type_name == "WorkloadSubmitted")
    names = {f["name"] for f in old["fields"]}
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(old))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(old), {k: v for k, v in to_record(sub).items() if k in names})
    back = decode(buf.getvalue())
    assert back.event_id == sub.event_id and back.type_name == "WorkloadSubmitted"
    assert {k: v for k, v in to_record(back).items() if k in names} == {k: to_record(sub)[k] for k in names}
