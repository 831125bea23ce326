"""The spool: an ordered, fsynced outbox that survives a crash mid-append."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import BrokerError
from ledger.streams.spool import Spool


def records(n: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b"lab", f"event-{i}".encode()) for i in range(start, start + n)]


def test_records_come_back_in_order_until_acknowledged(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(records(5))
    pending = list(spool.pending())
    assert [v for _, _, v in pending] == [f"event-{i}".encode() for i in range(5)]
    spool.ack(pending[1][0])  # the broker acknowledged the first two
    assert [v for _, _, v in Spool(tmp_path).pending()] == [f"event-{i}".encode() for i in range(2, 5)]


def test_a_reopened_spool_keeps_what_was_not_sent(tmp_path: Path) -> None:
    Spool(tmp_path).append(records(3))
    again = Spool(tmp_path)
    again.append(records(2, start=3))
    assert len(again) == 5
    assert [k for _, k, _ in again.pending()] == [b"lab"] * 5


def test_a_fully_acknowledged_spool_leaves_no_files(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(records(3))
    *_, (end, _, _) = spool.pending()
    spool.ack(end)
    assert spool.empty and not any(tmp_path.iterdir())


def test_a_torn_tail_from_a_crash_is_cut_off_and_earlier_records_survive(tmp_path: Path) -> None:
    Spool(tmp_path).append(records(4))
    log = tmp_path / "spool.log"
    data = log.read_bytes()
    log.write_bytes(data + data[:7])  # half a frame: the process died inside write()
    spool = Spool(tmp_path)
    assert len(spool) == 4
    spool.append(records(1, start=4))
    assert [v for _, _, v in spool.pending()][-1] == b"event-4"


def test_a_spool_that_cannot_be_written_raises_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(BrokerError, match="cannot open spool"):
        Spool(blocker / "spool")
