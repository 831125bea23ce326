"""Publishing to a real broker: in order, keyed by cluster, nothing lost while the broker is away."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.codec import decode, encode
from ledger.core import Knobs
from ledger.events import Event
from ledger.streams.publisher import Publisher
from ledger.streams.service import DecisionService
from ledger.streams.testbroker import KafkaNode, free_port
from ledger.streams.topics import ensure_topics_sync
from tests.factories import Events
from tests.streams.harness import ROOT, is_output, namespace, read_topic
from tests.streams.scenarios import lab_month

pytestmark = pytest.mark.kafka


def topic_for_test(bootstrap: str) -> str:
    prefix, _ = namespace()
    topic = prefix + "gpuledger.events"
    ensure_topics_sync(bootstrap, {topic: 1})
    return topic


def projection(records: list, events: list[Event]) -> tuple[list[Event], list[Event]]:
    """Return (distinct events in first-arrival order, decisions) as a consumer deduplicating by event_id sees them."""
    svc = DecisionService(Knobs())
    seen: dict[str, Event] = {}
    decisions: list[Event] = []
    for m in records:
        e = decode(m.value)
        seen.setdefault(e.event_id, e)
        decisions += svc.process(m.value, m.key, m.partition, m.offset).emit
    return list(seen.values()), decisions


def test_events_arrive_in_order_keyed_by_cluster(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = topic_for_test(kafka_bootstrap)
    events = lab_month().inputs[:500]
    with Publisher(kafka_bootstrap, tmp_path / "spool", topic=topic) as pub:
        result = pub.publish(events)
    assert (result.sent, result.spooled) == (500, 0)
    records = read_topic(kafka_bootstrap, topic, want=500)
    assert [m.value for m in records] == [encode(e) for e in events]
    assert {m.key for m in records} == {b"demo"}


def test_an_unreachable_broker_keeps_events_in_the_spool_until_it_answers(
    kafka_node: KafkaNode, tmp_path: Path
) -> None:
    topic = topic_for_test(kafka_node.bootstrap)
    events = lab_month().inputs[:300]
    kafka_node.stop()  # nothing listens on its port now
    with Publisher(kafka_node.bootstrap, tmp_path / "spool", topic=topic, request_timeout_s=2) as pub:
        first = pub.publish(events[:200])
        assert (first.sent, first.spooled) == (0, 200)
        assert first.error
    kafka_node.start()
    with Publisher(kafka_node.bootstrap, tmp_path / "spool", topic=topic) as pub:  # a new process picks the spool up
        second = pub.publish(events[200:])
    assert (second.sent, second.spooled) == (300, 0)
    records = read_topic(kafka_node.bootstrap, topic, want=300)
    assert [decode(m.value) for m in records] == events


def test_a_broker_that_hangs_while_publish_runs_loses_nothing_and_counts_nothing_twice(
    kafka_node: KafkaNode, tmp_path: Path
) -> None:
    topic = topic_for_test(kafka_node.bootstrap)
    events = lab_month().inputs[:6000]
    done, halfway, frozen = threading.Event(), threading.Event(), threading.Event()
    results = []

    def publish() -> None:
        with Publisher(kafka_node.bootstrap, tmp_path / "spool", topic=topic, request_timeout_s=1.5) as pub:
            for i in range(0, len(events), 200):
                if i >= len(events) // 2 and not halfway.is_set():
                    halfway.set()
                    frozen.wait(timeout=10)
                results.append(pub.publish(events[i : i + 200]))
                time.sleep(0.01)
            results.append(pub.flush(wait_s=60))
        done.set()

    thread = threading.Thread(target=publish)
    thread.start()
    assert halfway.wait(timeout=30)
    kafka_node.freeze()  # the broker stops answering mid-stream
    frozen.set()
    time.sleep(3)
    kafka_node.thaw()
    thread.join(timeout=90)
    assert done.is_set()
    assert any(r.spooled for r in results[:-1]), "the outage did not reach the publisher"
    assert results[-1].spooled == 0
    records = read_topic(kafka_node.bootstrap, topic, want=len(events))
    distinct, decisions = projection(records, events)
    assert distinct == events
    reference = DecisionService(Knobs())
    expected = [o for i, e in enumerate(events) for o in reference.process(encode(e), b"demo", 0, i).emit]
    assert decisions == expected


def jsonl(events: list[Event], path: Path) -> Path:
    with open(path, "w") as fh:
        for e in events:
            fh.write(json.dumps({"type": e.type_name, **e.model_dump(mode="json")}) + "\n")
    return path


def test_the_publish_command_resends_when_the_broker_comes_back(kafka_node: KafkaNode, tmp_path: Path) -> None:
    """The broker is down when `gpuledger publish` starts and comes up while it waits: every event arrives once."""
    events = Events()
    batch = [events.submit(i, f"w{i}", "lab/a") for i in range(400)]
    source = jsonl(batch, tmp_path / "events.jsonl")
    topic = topic_for_test(kafka_node.bootstrap)
    kafka_node.stop()
    cmd = [sys.executable, "-m", "ledger.cli", "publish", str(source), "--bootstrap", kafka_node.bootstrap,
           "--topic", topic, "--spool", str(tmp_path / "spool"), "--wait", "90s", "--timeout", "2s"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(2)
        assert proc.poll() is None, "publish gave up although --wait had not run out"
        kafka_node.start()
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err.decode()
        assert b"published 400 event(s)" in out
        records = read_topic(kafka_node.bootstrap, topic, want=400)
        assert sorted(decode(m.value).event_id for m in records) == sorted(e.event_id for e in batch)
    finally:
        proc.kill()


def test_publish_exits_non_zero_only_when_it_cannot_even_spool(tmp_path: Path) -> None:
    source = jsonl([Events().submit(0, "w1", "lab/a")], tmp_path / "events.jsonl")
    (tmp_path / "file").write_text("not a directory")
    down = f"127.0.0.1:{free_port()}"
    base = [sys.executable, "-m", "ledger.cli", "publish", str(source), "--bootstrap", down, "--wait", "0s"]
    unspoolable = subprocess.run([*base, "--spool", str(tmp_path / "file" / "spool")], cwd=ROOT, capture_output=True)
    assert unspoolable.returncode != 0
    assert b"cannot open spool" in unspoolable.stderr
    spooled = subprocess.run([*base, "--spool", str(tmp_path / "spool")], cwd=ROOT, capture_output=True)
    assert spooled.returncode == 0
    assert b"1 event(s) kept in" in spooled.stderr


def test_a_bad_line_in_the_source_is_named_and_nothing_is_spooled(tmp_path: Path) -> None:
    good = Events().submit(0, "w1", "lab/a")
    source = tmp_path / "events.jsonl"
    source.write_text(
        json.dumps({"type": good.type_name, **good.model_dump(mode="json")}) + "\n"
        + json.dumps({"type": "WorkloadSubmitted", **good.model_dump(mode="json"), "gpus": -4}) + "\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "publish", str(source), "--bootstrap", "127.0.0.1:1",
         "--spool", str(tmp_path / "spool"), "--wait", "0s"],
        cwd=ROOT, capture_output=True,
    )
    assert run.returncode == 2
    assert f"{source}:2".encode() in run.stderr and b"gpus" in run.stderr
    assert not (tmp_path / "spool" / "spool.log").exists()


def test_publish_a_replayed_run_directory_inputs_only(kafka_bootstrap: str, tmp_path: Path) -> None:
    """A run directory holds inputs and the core's outputs; --inputs-only sends what a worker must decide from."""
    from ledger.log import open_log
    from ledger.replay.demo_month import generate
    from ledger.replay.run import inputs_from_budgets, replay

    month = generate(3, scale=0.002, researchers=10)
    replay(inputs_from_budgets(month.budgets, list(month.submissions)), Knobs(), tmp_path / "run")
    ledger = list(open_log(tmp_path / "run"))
    topic = topic_for_test(kafka_bootstrap)
    run = subprocess.run(
        [sys.executable, "-m", "ledger.cli", "publish", str(tmp_path / "run"), "--inputs-only", "--topic", topic,
         "--bootstrap", kafka_bootstrap, "--spool", str(tmp_path / "spool")],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    inputs = [e for e in ledger if not is_output(e)]
    assert 0 < len(inputs) < len(ledger)
    records = read_topic(kafka_bootstrap, topic, want=len(inputs))
    assert [decode(m.value) for m in records] == inputs
