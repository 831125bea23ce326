"""A crash mid-append leaves the log readable up to the last complete batch; the next writer cuts the torn tail off.

Damage with complete batches after it is not a crash but corruption: it is reported, never cut.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.errors import LogCorruptError
from ledger.log import EventLog, open_log
from ledger.log.segments import create_segment
from tests.factories import Events


def _day(e: Events, start: float) -> list[ev.Event]:
    """One workload's life: submitted, started, checkpointed, completed."""
    wid = f"w{int(start)}"
    return [
        e.submit(start, wid, "ai2/olmo", gpus=16, work_s=7200),
        e.start(start + 1, wid, ("lab-n001", "lab-n002"), 16),
        e.checkpoint(start + 30, wid, 1800),
        e.complete(start + 90, wid),
    ]


def _write_batches(path: Path, batches: list[list[ev.Event]]) -> list[int]:
    """Append each batch; return the segment's size after each one."""
    sizes = []
    with EventLog(path) as log:
        for batch in batches:
            log.append(batch)
            sizes.append((path / "00000001.avro").stat().st_size)
    return sizes


@pytest.mark.parametrize("batches_before", [0, 2])
def test_a_segment_cut_at_every_byte_of_its_last_block_reads_up_to_the_batch_before(
    tmp_path: Path, batches_before: int
) -> None:
    e = Events()
    batches = [_day(e, 100 * i) for i in range(batches_before + 1)]
    path = tmp_path / "events"
    sizes = _write_batches(path, batches)
    segment = path / "00000001.avro"
    whole = segment.read_bytes()
    start = sizes[-2] if batches_before else len(whole) - (sizes[0] - _header_size(path))
    durable = [x for batch in batches[:-1] for x in batch]
    assert start < len(whole)
    for cut in range(start, len(whole)):
        segment.write_bytes(whole[:cut])
        reader = open_log(path)  # a reader takes no lock and changes nothing
        assert list(reader) == durable, f"cut at byte {cut}"
        assert len(reader) == len(durable)
        assert segment.stat().st_size == cut
        with EventLog(path) as writer:  # the next writer cuts the torn batch off
            assert writer.recovered_bytes == cut - start
            assert segment.stat().st_size == start
            assert list(writer) == durable
    # The lost batch was never acknowledged; appending it again gives exactly the bytes before the crash.
    with EventLog(path) as log:
        assert log.append(batches[-1]) == len(batches[-1])
    assert segment.read_bytes() == whole


def _header_size(path: Path) -> int:
    from ledger.log.container import read_header

    return read_header((path / "00000001.avro").read_bytes(), "test").end


@settings(max_examples=60, deadline=None)
@given(garbage=st.binary(min_size=1, max_size=300) | st.integers(1, 5000).map(bytes))
def test_garbage_after_the_last_batch_is_cut_off(tmp_path_factory: pytest.TempPathFactory, garbage: bytes) -> None:
    e = Events()
    path = tmp_path_factory.mktemp("log") / "events"
    batches = [_day(e, 0), _day(e, 100)]
    _write_batches(path, batches)
    segment = path / "00000001.avro"
    whole = segment.read_bytes()
    segment.write_bytes(whole + garbage)
    expected = batches[0] + batches[1]
    assert list(open_log(path)) == expected
    with EventLog(path) as log:
        assert log.recovered_bytes == len(garbage)
        assert list(log) == expected
    assert segment.read_bytes() == whole


def test_an_unfinished_block_whose_last_page_landed_first_is_still_a_torn_tail(tmp_path: Path) -> None:
    """Pages can reach the disk out of order: the block's end (with the sync marker) there, its middle zeros."""
    e = Events()
    path = tmp_path / "events"
    sizes = _write_batches(path, [_day(e, 0), _day(e, 100)])
    segment = path / "00000001.avro"
    whole = segment.read_bytes()
    last = whole[sizes[0] :]
    holed = last[:3] + bytes(len(last) - 3 - 20) + last[-20:]
    segment.write_bytes(whole[: sizes[0]] + holed)
    with EventLog(path) as log:
        assert log.recovered_bytes == len(last)
        assert list(log) == _day(Events(), 0)


def test_a_last_block_whose_records_do_not_fill_it_exactly_is_cut(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    sizes = _write_batches(path, [_day(e, 0), _day(e, 100)])
    segment = path / "00000001.avro"
    whole = bytearray(segment.read_bytes())
    assert whole[sizes[0]] == 4 << 1, "the last block starts with its count: 4 events, zig-zag encoded"
    whole[sizes[0]] = 3 << 1  # framing intact, but one event's bytes would be left over
    segment.write_bytes(bytes(whole))
    assert list(open_log(path)) == _day(Events(), 0)
    with EventLog(path) as log:
        assert log.recovered_bytes == sizes[1] - sizes[0]


def test_damage_with_complete_batches_after_it_is_corruption_and_is_not_cut(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    sizes = _write_batches(path, [_day(e, 0), _day(e, 100), _day(e, 200)])
    segment = path / "00000001.avro"
    whole = bytearray(segment.read_bytes())
    whole[sizes[0] - 16 : sizes[0]] = bytes(16)  # wipe the first batch's sync marker
    segment.write_bytes(bytes(whole))
    with pytest.raises(LogCorruptError, match=r"00000001.avro: block at byte \d+ does not end with the segment's sync"):
        EventLog(path)
    with pytest.raises(LogCorruptError, match=r"complete batches follow the damage.*refusing to cut acknowledged data"):
        list(open_log(path))
    assert segment.read_bytes() == bytes(whole), "nothing was truncated"


def test_a_torn_sealed_segment_is_corruption(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    with EventLog(path, segment_bytes=1) as log:
        log.append(_day(e, 0))
        log.append(_day(e, 100))
    first = path / "00000001.avro"
    first.write_bytes(first.read_bytes()[:-5])
    sealed = r"00000001\.avro: block at byte .* cut short.*a sealed segment .* must end with a complete batch"
    with pytest.raises(LogCorruptError, match=sealed):
        list(open_log(path))


def test_a_damaged_header_names_the_segment(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    _write_batches(path, [_day(e, 0)])
    (path / "00000001.avro").write_bytes(b"PK\x03\x04 not avro")
    with pytest.raises(LogCorruptError, match=r"00000001.avro: not an Avro container file \(starts with 504b0304\)"):
        list(open_log(path))


def test_a_crash_right_after_rolling_to_a_new_segment_leaves_a_readable_empty_segment(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    _write_batches(path, [_day(e, 0)])
    create_segment(path, 2, bytes(range(16)))  # header only, as a crash before the first block would leave it
    (path / "00000003.avro.tmp").write_bytes(b"half a header")  # a crash while creating the next one
    assert list(open_log(path)) == _day(Events(), 0)
    with EventLog(path) as log:
        assert not (path / "00000003.avro.tmp").exists()
        assert log.append(_day(e, 100)) == 4
        assert len(log) == 8
    assert (path / "00000002.avro").stat().st_size > (path / "00000001.avro").stat().st_size // 2


_WRITER = textwrap.dedent(
    """
    import sys
    from tests.factories import Events
    from ledger.log import EventLog
    e = Events()
    log = EventLog(sys.argv[1])
    for b in range(10_000):
        log.append([e.checkpoint(b, f"w{b}", i) for i in range(500)])
        print(b, flush=True)
    """
)


def test_a_writer_killed_mid_append_leaves_whole_batches_only(tmp_path: Path) -> None:
    path = tmp_path / "events"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for _ in range(3):
            proc.stdout.readline()  # three batches acknowledged
        time.sleep(0.013)  # land somewhere in a later append
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    acknowledged = 3
    with EventLog(path) as log:
        events = list(log)
    assert len(events) % 500 == 0, "only whole batches survive"
    assert len(events) >= acknowledged * 500
    e = Events()
    expected = [e.checkpoint(b, f"w{b}", i) for b in range(len(events) // 500) for i in range(500)]
    assert events == expected
