"""What the operations guide promises: old writers keep working through an upgrade, and the backup recipes hold."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import fastavro
import pytest

from ledger.codec import MAGIC, encode, fingerprint, schema_dir
from ledger.core import Knobs
from ledger.events import Event, WorkloadSubmitted, to_us
from ledger.log import EventLog, open_log
from ledger.streams.service import DecisionService
from tests.factories import Events, at

needs_flock = pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) from util-linux is not installed")


def _v1_message(schema_name: str, record: dict[str, object]) -> bytes:
    """Return a single-object message as a producer still on an old schema (schemas/history) writes it."""
    with open(schema_dir() / "history" / schema_name, encoding="utf-8") as fh:
        schema = json.load(fh)
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(schema))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def _day(ev: Events) -> list[Event]:
    return [
        ev.capacity(0, gpus=16),
        ev.node(0, "lab"),
        ev.node(0, "lab/vision", share=0.5),
        ev.node(0, "lab/speech", share=0.5),
    ]


def test_a_producer_still_on_the_old_schema_is_read_during_an_upgrade() -> None:
    ev = Events("c1")
    wall = [0.0]
    service = DecisionService(Knobs(), idle_clock_rate=0.0, idle_after_s=1.0, clock=lambda: wall[0])
    for offset, event in enumerate(_day(ev)):
        assert service.process(encode(event), b"c1", 0, offset).kind == "applied"
    old = _v1_message(
        "workload_submitted.v1.avsc",
        {"event_id": "c1-old-1", "cluster": "c1", "time": to_us(at(5)),
         "schema_version": 1, "workload_id": "w-old", "budget": "lab/vision", "user": "ana", "gpus": 8,
         "min_runtime_s": 600, "resumable": True, "priority": 0},
    )  # fmt: skip
    outcome = service.process(old, b"c1", 0, 10)
    assert outcome.kind == "applied", outcome.reason
    wall[0] += 2.0  # the cluster falls quiet: the timer closes the old writer's instant and its pass runs
    emitted = [e for tick in service.due() for e in tick.emit]
    assert [type(e).__name__ for e in emitted][:2] == ["SchedulingDecision", "WorkloadStarted"]
    assert emitted[1].workload_id == "w-old"


def test_a_producer_on_a_schema_the_workers_do_not_know_yet_lands_in_the_dead_letters() -> None:
    with open(schema_dir() / "workload_submitted.avsc", encoding="utf-8") as fh:
        newer = json.load(fh)
    newer["fields"].append({"name": "queue", "type": "string", "default": "main"})  # a future writer's field
    ev = Events("c1")
    event = ev.submit(5, "w", "lab/vision")
    record = {**event.__dict__, "queue": "main"}
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(newer))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(newer), record)
    outcome = DecisionService(Knobs()).process(buf.getvalue(), b"c1", 0, 0)
    assert outcome.kind == "deadletter"
    assert "unknown schema fingerprint" in (outcome.reason or "")


def _log_with(path: Path, batches: list[list[Event]]) -> EventLog:
    log = EventLog(path)
    for batch in batches:
        log.append(batch)
    return log


def _batches() -> list[list[Event]]:
    ev = Events("c1")
    day = _day(ev)
    subs: list[Event] = [ev.submit(10 + i, f"w{i}", "lab/vision" if i % 2 else "lab/speech") for i in range(40)]
    return [day, subs[:20], subs[20:]]


@needs_flock
def test_a_cold_backup_waits_for_no_writer_and_copies_every_event(tmp_path: Path) -> None:
    source, backup = tmp_path / "events", tmp_path / "backup"
    _log_with(source, _batches()).close()
    # the recipe from the README: take the writer's lock, then copy the directory
    subprocess.run(["flock", "--nonblock", str(source / "LOCK"), "cp", "-a", str(source), str(backup)], check=True)
    assert list(open_log(backup)) == list(open_log(source))
    assert sum(len(b) for b in _batches()) == len(open_log(backup))


@needs_flock
def test_a_cold_backup_refuses_while_a_writer_holds_the_log(tmp_path: Path) -> None:
    source = tmp_path / "events"
    log = _log_with(source, _batches()[:1])
    try:
        copy = subprocess.run(
            ["flock", "--nonblock", str(source / "LOCK"), "cp", "-a", str(source), str(tmp_path / "b")]
        )
        assert copy.returncode == 1 and not (tmp_path / "b").exists()
    finally:
        log.close()


def test_a_hot_copy_cut_mid_append_reads_back_every_complete_batch(tmp_path: Path) -> None:
    source, backup = tmp_path / "events", tmp_path / "backup"
    batches = _batches()
    log = _log_with(source, batches)
    try:
        backup.mkdir()
        segments = sorted(source.glob("*.avro"))
        for segment in segments:  # the recipe: segments in number order, .ids and LOCK left out
            shutil.copyfile(segment, backup / segment.name)
        # the writer was mid-append when the copy read the last segment: its tail is torn
        last = backup / segments[-1].name
        last.write_bytes(last.read_bytes()[:-7])
        copied = list(open_log(backup))
    finally:
        log.close()
    assert copied == [e for b in batches[:-1] for e in b], "every batch before the torn one, nothing half-read"
    assert [e for e in copied if isinstance(e, WorkloadSubmitted)]
