"""The worker's hot-path codec gives the reference codec's bytes, events and refusals."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from ledger.codec import MAGIC, decode, encode, fingerprint, schema_dir, to_record
from ledger.errors import LedgerError
from ledger.streams.wire import decode_record, encode_record
from tests.streams.scenarios import lab_month


def test_every_event_of_a_month_encodes_to_the_same_bytes_and_decodes_to_the_same_event() -> None:
    events = lab_month().events
    assert len({e.type_name for e in events}) >= 7
    for e in events:
        data = encode_record(e)
        assert data == encode(e)
        assert decode_record(data) == e == decode(data)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda good: b"",
        lambda good: b"\x00garbage",
        lambda good: b"\xc3\x01" + b"\xff" * 8 + good[10:],
        lambda good: good[:-3],
        lambda good: good + b"\x00",
    ],
    ids=["empty", "bad magic", "unknown fingerprint", "truncated", "trailing byte"],
)
def test_a_bad_record_is_refused_with_the_reference_codecs_reason(mangle: object) -> None:
    good = encode(lab_month().inputs[5])
    bad = mangle(good)  # type: ignore[operator]
    with pytest.raises(LedgerError) as reference:
        decode(bad)
    with pytest.raises(type(reference.value)) as got:
        decode_record(bad)
    assert str(got.value) == str(reference.value)


def test_a_record_written_by_an_older_schema_is_resolved_into_the_current_model() -> None:
    old = json.loads((schema_dir() / "history" / "workload_submitted.v1.avsc").read_text())
    sub = next(e for e in lab_month().inputs if e.type_name == "WorkloadSubmitted")
    names = {f["name"] for f in old["fields"]}
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(old))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(old), {k: v for k, v in to_record(sub).items() if k in names})
    assert decode_record(buf.getvalue()) == decode(buf.getvalue())
