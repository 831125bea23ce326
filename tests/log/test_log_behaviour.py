"""How the log behaves as a store: idempotent appends, durability across reopening, one writer, run directories."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import fastavro
import pytest

from ledger import codec
from ledger import events as ev
from ledger.errors import ConfigError, LogError
from ledger.log import EventLog, open_log
from ledger.log import container as container_module
from ledger.log.checks import explain_unencodable
from ledger.log.segments import segment_path
from tests.factories import Events


def _morning(e: Events) -> list[ev.Event]:
    return [
        e.capacity(0, 64),
        e.node(0, "ai2", managers=("dirk",)),
        e.node(0, "ai2/olmo", share=2.0),
        e.node(0, "ai2/tulu"),
        e.submit(5, "pretrain-7b", "ai2/olmo", gpus=32, min_runtime_s=4 * 3600),
        e.start(6, "pretrain-7b", ("lab-n000", "lab-n001", "lab-n002", "lab-n003"), 32),
        e.submit(9, "sft-sweep", "ai2/tulu", gpus=8, kind="debug", min_runtime_s=900),
    ]


def test_a_resent_batch_is_ignored_and_a_repeat_within_a_batch_keeps_the_first(tmp_path: Path) -> None:
    e = Events()
    morning = _morning(e)
    log = EventLog(tmp_path / "events")
    assert log.append(morning) == 7
    assert log.append(morning) == 0, "an at-least-once producer resending the batch changes nothing"
    checkpoint = e.checkpoint(40, "pretrain-7b", 1800)
    retried = checkpoint.model_copy(update={"time": checkpoint.time.replace(minute=41)})
    assert log.append([checkpoint, retried, morning[0]]) == 1
    assert list(log) == [*morning, checkpoint]
    assert len(log) == 8


def test_an_all_duplicate_or_empty_batch_writes_nothing(tmp_path: Path) -> None:
    e = Events()
    log = EventLog(tmp_path / "events")
    assert log.append([]) == 0
    assert not list((tmp_path / "events").glob("*.avro")), "no segment for nothing"
    log.append(_morning(e))
    before = segment_path(tmp_path / "events", 1).read_bytes()
    assert log.append(_morning(Events())) == 0
    assert segment_path(tmp_path / "events", 1).read_bytes() == before


def test_events_survive_closing_and_reopening_and_duplicates_are_still_known(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    with EventLog(path, segment_bytes=600) as log:
        for event in _morning(e):
            log.append([event])
    assert len(list(path.glob("*.avro"))) > 1, "small segments rolled over"
    assert (path / "00000001.ids").exists(), "a sealed segment keeps its event_ids beside it"
    with EventLog(path, segment_bytes=600) as log:
        assert list(log) == _morning(Events())
        assert log.append(_morning(Events())) == 0
        assert log.append([e.complete(300, "sft-sweep")]) == 1
    assert len(open_log(path)) == 8


def test_missing_or_stale_id_files_are_rebuilt_from_the_segments(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    with EventLog(path, segment_bytes=1) as log:
        for event in _morning(e):
            log.append([event])
    (path / "00000001.ids").unlink()
    (path / "00000002.ids").write_text('{"bytes": 1, "count": 0, "ids": []}')
    (path / "00000003.ids").write_text("not json")
    with EventLog(path, segment_bytes=1) as log:
        assert log.append(_morning(Events())) == 0
    assert (path / "00000001.ids").exists()


def test_one_writer_at_a_time_and_readers_are_never_blocked(tmp_path: Path) -> None:
    e = Events()
    path = tmp_path / "events"
    writer = EventLog(path)
    writer.append(_morning(e)[:3])
    second = EventLog(path)  # opens, but cannot become the writer while the first holds the lock
    assert list(second) == _morning(Events())[:3]
    with pytest.raises(LogError, match="another EventLog object in this same process"):
        second.append([e.requeue(50, "x")])
    writer.close()
    assert second.append([e.requeue(50, "x")]) == 1
    assert len(writer) == 4, "a closed writer still reads"


def test_read_only_logs_write_nothing(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="no event log here"):
        EventLog(tmp_path / "missing", readonly=True)
    assert not (tmp_path / "missing").exists()
    EventLog(tmp_path / "events").append(_morning(Events()))
    reader = EventLog(tmp_path / "events", readonly=True)
    with pytest.raises(LogError, match="opened read-only"):
        reader.append([Events(cluster="b").requeue(1, "w")])


def test_open_log_takes_a_run_directory_or_a_log_directory(tmp_path: Path) -> None:
    EventLog(tmp_path / "run" / "events").append(_morning(Events()))
    assert len(open_log(tmp_path / "run")) == 7
    assert len(open_log(tmp_path / "run" / "events")) == 7
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(LogError, match="neither a run directory"):
        open_log(tmp_path / "elsewhere")
    with pytest.raises(LogError, match="no such file or directory"):
        open_log(tmp_path / "nowhere")


def test_records_give_type_names_and_avro_dicts_for_projections(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events")
    log.append(_morning(Events()))
    records = list(log.records())
    assert [name for name, _ in records][:2] == ["ClusterCapacityChanged", "BudgetNodeDefined"]
    name, started = records[5]
    assert name == "WorkloadStarted"
    assert started["nodes"] == ["lab-n000", "lab-n001", "lab-n002", "lab-n003"]
    assert started["gpus"] == 32


def test_a_segment_written_with_an_older_schema_still_reads_and_is_left_untouched(tmp_path: Path) -> None:
    """A log from before WorkloadSubmitted v2 and BudgetNodeDefined v2: read with the new fields defaulted (a node
    names no level); new batches go to a new segment."""
    old = {s["name"]: s for s in codec.history_schemas()}  # WorkloadSubmitted v1, BudgetNodeDefined v1
    old_union = [old.get(s["name"], s) for s in codec.raw_schemas().values()]
    path = tmp_path / "events"
    path.mkdir()
    e = Events()
    node = e.node(0, "ai2")
    old_fields = ("event_id", "cluster", "time", "workload_id", "budget", "user", "gpus", "min_runtime_s", "resumable")
    submitted = {k: v for k, v in codec.to_record(e.submit(1, "w1", "ai2")).items() if k in old_fields}
    with open(segment_path(path, 1), "wb") as fh:
        fastavro.writer(
            fh,
            fastavro.parse_schema(old_union),
            [("gpuledger.BudgetNodeDefined", codec.to_record(node)), ("gpuledger.WorkloadSubmitted", submitted)],
        )
    old_bytes = segment_path(path, 1).read_bytes()
    with EventLog(path) as log:
        got = list(log)
        assert got[0] == node
        assert got[1] == ev.WorkloadSubmitted(**submitted, schema_version=1, nodes=0, kind="batch")
        assert log.append([e.complete(9, "w1"), node]) == 1
        assert [x.type_name for x in log] == ["BudgetNodeDefined", "WorkloadSubmitted", "WorkloadCompleted"]
    assert segment_path(path, 1).read_bytes() == old_bytes
    assert segment_path(path, 2).exists()


def test_a_failed_write_leaves_the_segment_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up halfway through a batch: the batch is undone and can be appended again later."""
    e = Events()
    log = EventLog(tmp_path / "events")
    log.append(_morning(e))
    before = segment_path(tmp_path / "events", 1).read_bytes()
    real_write = container_module.os.write

    def half_then_full(fd: int, data: memoryview) -> int:
        if len(data) > 40:
            real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    batch = [e.checkpoint(60, "pretrain-7b", 3600), e.checkpoint(61, "pretrain-7b", 3660)]
    monkeypatch.setattr(container_module.os, "write", half_then_full)
    with pytest.raises(LogError, match="append failed \\(No space left on device\\); the batch was not written"):
        log.append(batch)
    monkeypatch.undo()
    assert segment_path(tmp_path / "events", 1).read_bytes() == before
    assert log.append(batch) == 2, "the failed batch's ids were not remembered"
    assert list(log)[-2:] == batch


def test_threads_can_share_one_log(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events")

    def producer(cluster: str) -> None:
        e = Events(cluster=cluster)
        for i in range(20):
            log.append([e.checkpoint(i, "w", i), e.checkpoint(i, "w", i + 1)])

    threads = [threading.Thread(target=producer, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = list(log)
    assert len(events) == 4 * 20 * 2
    for cluster in ("c0", "c1", "c2", "c3"):
        mine = [x.event_id for x in events if x.cluster == cluster]
        assert mine == [f"{cluster}-e{n}" for n in range(1, 41)], "each producer's batches stay in order"


def test_segment_size_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="segment_bytes must be positive; value 0"):
        EventLog(tmp_path / "events", segment_bytes=0)


def test_text_the_encoder_rejects_is_explained_by_field() -> None:
    error = explain_unencodable(
        [("gpuledger.WorkloadRequeued", {"event_id": "x1", "workload_id": "w\ud800"})], UnicodeEncodeError(
            "utf-8", "w\ud800", 1, 2, "surrogates not allowed"
        )
    )
    assert error.field == "workload_id"
    assert str(error) == "event 'x1': WorkloadRequeued.workload_id: text that UTF-8 cannot encode; value 'w\\ud800'"


def test_appends_are_deterministic_bytes(tmp_path: Path) -> None:
    """The same appends give byte-identical segments, so two runs can be compared by hash."""
    for name in ("a", "b"):
        EventLog(tmp_path / name).append(_morning(Events()))
    assert segment_path(tmp_path / "a", 1).read_bytes() == segment_path(tmp_path / "b", 1).read_bytes()
    assert io.BytesIO(segment_path(tmp_path / "a", 1).read_bytes()).read(4) == b"Obj\x01"


def test_segments_are_the_same_bytes_from_one_process_to_the_next(tmp_path: Path) -> None:
    """Two processes with different string hashing write the same segment, header included."""
    script = (
        "import sys; from ledger.log import EventLog; from tests.factories import Events; "
        "from tests.log.test_log_behaviour import _morning; EventLog(sys.argv[1]).append(_morning(Events()))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", script, str(tmp_path / seed)], check=True, env=env,
                       cwd=Path(__file__).parents[2])
    one, two = (segment_path(tmp_path / seed, 1).read_bytes() for seed in ("1", "2"))
    assert one == two
    with open(segment_path(tmp_path / "1", 1), "rb") as f:  # still a container any Avro reader takes
        assert len(list(fastavro.reader(f))) == len(_morning(Events()))
