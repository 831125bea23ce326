"""Every event type survives the log: what is appended is what is read back, in append order, after reopening too."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.log import EventLog, open_log
from tests.log.strategies import STRATEGIES, any_event


def _first_of_each_id(events: list[ev.Event]) -> list[ev.Event]:
    seen: set[str] = set()
    out = []
    for e in events:
        if e.event_id not in seen:
            seen.add(e.event_id)
            out.append(e)
    return out


@pytest.mark.parametrize("type_name", sorted(ev.EVENT_TYPES))
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_every_event_type_reads_back_equal(type_name: str, data: st.DataObject) -> None:
    events = data.draw(st.lists(STRATEGIES[type_name], min_size=1, max_size=6, unique_by=lambda e: e.event_id))
    with tempfile.TemporaryDirectory() as tmp, EventLog(Path(tmp) / "events") as log:
        assert log.append(events) == len(events)
        back = list(log)
        assert back == events
        assert [b.model_dump() for b in back] == [e.model_dump() for e in events]
        assert [name for name, _ in log.records()] == [type_name] * len(events)


@settings(max_examples=25, deadline=None)
@given(
    events=st.lists(any_event, min_size=1, max_size=25),
    cuts=st.lists(st.integers(0, 25), max_size=4),
    segment_bytes=st.sampled_from([1, 300, 1 << 20]),
)
def test_mixed_batches_read_back_in_append_order_across_segments_and_reopening(
    events: list[ev.Event], cuts: list[int], segment_bytes: int
) -> None:
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    batches = [events[a:b] for a, b in itertools.pairwise(bounds)]
    expected = _first_of_each_id(events)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events"
        with EventLog(path, segment_bytes=segment_bytes) as log:
            appended = sum(log.append(batch) for batch in batches)
            assert appended == len(expected)
            assert list(log) == expected
        reopened = open_log(path)
        assert list(reopened) == expected
        assert len(reopened) == len(expected)
        # Appending everything again after reopening adds nothing: the ids came back from disk.
        with EventLog(path, segment_bytes=segment_bytes) as again:
            assert again.append(events) == 0
            assert list(again) == expected


@settings(max_examples=5, deadline=None)
@given(one_of_each=st.tuples(*STRATEGIES.values()))
def test_segments_are_standard_avro_container_files(one_of_each: tuple[ev.Event, ...]) -> None:
    events = _first_of_each_id(list(one_of_each))
    with tempfile.TemporaryDirectory() as tmp:
        log = EventLog(Path(tmp), segment_bytes=1)
        for e in events:
            log.append([e])
        segments = sorted(Path(tmp).glob("*.avro"))
        assert len(segments) == len(events), "a full segment rolls over at the next batch"
        plain = []
        for segment in segments:
            with open(segment, "rb") as fh:
                plain.extend(fastavro.reader(fh, return_record_name=True))
        assert [name for name, _ in plain] == [f"gpuledger.{e.type_name}" for e in events]
        assert [record["event_id"] for _, record in plain] == [e.event_id for e in events]
