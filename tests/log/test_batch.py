"""A batch of columns keeps every promise of an append: one block, in key order, no repeat, nothing half-written.

The batches here are given a few kilobytes of memory so that they sort their events into runs on
disk and merge them while the block is written: the block must be the one a batch held in memory
writes, and the one ``append_records`` writes for the same records in the same order.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.errors import LogError
from ledger.log import EventLog
from ledger.log import container as container_module
from ledger.log.batch import EventBatch
from ledger.log.segments import segment_path

T0 = ev.to_us(ev.EARLIEST) + 7 * 86_400_000_000
SEGMENT = "00000001.avro"


def checkpoints(ids: list[str], times: list[int]) -> dict[str, Any]:
    """Columns of checkpoints of one workload, one per id, at ``times`` (seconds after T0)."""
    return {
        "event_id": pa.array(ids), "cluster": "lab", "time": T0 + np.array(times, np.int64) * 1_000_000,
        "workload_id": "train-7b", "progress_s": np.array(times, np.int64) * 10,
    }  # fmt: skip


def records(ids: list[str], times: list[int]) -> list[tuple[str, dict[str, Any]]]:
    return [("CheckpointWritten", {"event_id": i, "cluster": "lab", "time": T0 + t * 1_000_000, "schema_version": 1,
                                   "workload_id": "train-7b", "progress_s": t * 10}) for i, t in zip(ids, times,
                                                                                                     strict=True)]


@settings(max_examples=30, deadline=None)
@given(
    parts=st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 40)), min_size=1, max_size=30), min_size=1,
                   max_size=6),
    memory=st.sampled_from([1, 2000, 1 << 30]),
)  # fmt: skip
def test_a_batch_writes_its_events_in_key_order_ties_as_added_each_id_where_it_comes_first(
    tmp_path_factory: pytest.TempPathFactory, parts: list[list[tuple[int, int]]], memory: int
) -> None:
    """Ids repeat within and across the parts added; the first in the block (key, then order added) is written."""
    tmp = tmp_path_factory.mktemp("batch")
    added = [(f"ck{i}", t) for part in parts for i, t in part]
    order = sorted(range(len(added)), key=lambda k: (added[k][1], k))  # by key, ties as added
    expected, seen = [], set()
    for k in order:
        if added[k][0] not in seen:
            seen.add(added[k][0])
            expected.append(added[k])
    with EventBatch(1, memory=memory) as batch, EventLog(tmp / "columns") as log:
        for part in parts:
            ids, times = [f"ck{i}" for i, _ in part], [t for _, t in part]
            batch.add("CheckpointWritten", checkpoints(ids, times), len(part), [np.array(times)])
        assert batch.spilled == (memory == 1) or memory == 2000  # (2000 bytes: whether it spills depends on the parts)
        assert log.append_batch(batch) == len(expected)
    with EventLog(tmp / "records") as log:
        log.append_records(records([i for i, _ in expected], [t for _, t in expected]))
    assert (tmp / "columns" / SEGMENT).read_bytes() == (tmp / "records" / SEGMENT).read_bytes()


def test_ids_already_in_the_log_are_skipped_even_after_a_batch_too_big_to_remember_them(tmp_path: Path) -> None:
    with EventLog(tmp_path / "events", segment_bytes=600) as log:
        with EventBatch(memory=1) as batch:
            batch.add("CheckpointWritten", checkpoints(["a", "b", "c"], [1, 2, 3]), 3)
            assert batch.spilled and log.append_batch(batch) == 3
        with EventBatch() as batch:  # the ids of the spilled batch are read back from its segment
            batch.add("CheckpointWritten", checkpoints(["c", "d", "a", "e"], [4, 5, 6, 7]), 4)
            assert log.append_batch(batch) == 2
        assert [e.event_id for e in log] == ["a", "b", "c", "d", "e"]
    # the first segment was sealed with its ids beside it, read back from the block written from runs
    assert (tmp_path / "events" / "00000001.ids").is_file()
    with EventLog(tmp_path / "events") as log, EventBatch() as batch:
        batch.add("CheckpointWritten", checkpoints(["b", "f"], [8, 9]), 2)
        assert log.append_batch(batch) == 1


def test_a_batch_that_fails_to_write_leaves_the_segment_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up while the runs are merged into the block: nothing of the batch stays, its ids stay unknown."""
    log = EventLog(tmp_path / "events")
    with EventBatch() as batch:
        batch.add("CheckpointWritten", checkpoints(["a"], [1]), 1)
        log.append_batch(batch)
    before = segment_path(tmp_path / "events", 1).read_bytes()
    real_write = container_module.os.write
    calls = []

    def fills_up(fd: int, data: memoryview) -> int:
        calls.append(len(data))
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def spilled_batch() -> EventBatch:
        batch = EventBatch(1, memory=1)
        for k in range(4):
            times = [10 - k, 20 + k]
            batch.add("CheckpointWritten", checkpoints([f"b{k}", f"c{k}"], times), 2, [np.array(times)])
        return batch

    monkeypatch.setattr(container_module.os, "write", fills_up)
    with spilled_batch() as batch, pytest.raises(LogError, match="No space left on device"):
        log.append_batch(batch)
    monkeypatch.undo()
    assert segment_path(tmp_path / "events", 1).read_bytes() == before
    with spilled_batch() as batch:
        assert log.append_batch(batch) == 8, "the failed batch's ids were not remembered"
    log.close()
    assert len(EventLog(tmp_path / "events", readonly=True)) == 9
