"""A broker that goes away: the worker stops promptly when asked, and notices a broker that came back without its log.

Each test stops or wipes the session's own Kafka node (``kafka_node``); it runs again after the test.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from ledger.streams.testbroker import KafkaNode
from ledger.streams.topics import checkpoint_topic
from tests.streams.harness import WorkerProc, namespace, produce_events, read_topic, wait_for
from tests.streams.scenarios import lab_month
from tests.streams.test_worker import FAST_GROUP

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FLAGS = [*FAST_GROUP, "--idle-clock-rate", "0", "--checkpoint-every", "200", "--checkpoint-interval", "0.5"]


def _worker(broker: KafkaNode, tmp_path: Path) -> WorkerProc:
    prefix, app_id = namespace()
    w = WorkerProc(broker.bootstrap, prefix, app_id, 1, FLAGS, tmp_path / "worker.log")
    w.create_topics()
    return w


def _processed(worker: WorkerProc, n: int) -> None:
    """Wait until the worker's durable checkpoints reflect the first ``n`` inputs."""
    wait_for(lambda: worker.metric("gpuledger_worker_checkpointed_offset") >= n - 1, timeout_s=120)


def _quiet(worker: WorkerProc) -> None:
    """Wait until the worker has emitted nothing for longer than its idle timer takes to close an instant."""
    before, deadline = -1.0, time.monotonic() + 60
    while (now := worker.metric("gpuledger_worker_decisions_total")) != before:
        assert time.monotonic() < deadline, "the worker kept deciding with no new input"
        before = now
        time.sleep(2.5)


def test_a_worker_told_to_stop_while_the_broker_is_gone_exits_promptly_and_cleanly(
    kafka_node: KafkaNode, tmp_path: Path
) -> None:
    inputs = lab_month().inputs[:600]
    worker = _worker(kafka_node, tmp_path)
    try:
        worker.start()
        worker.wait_ready()
        produce_events(kafka_node.bootstrap, worker.topics.events, inputs)
        _processed(worker, len(inputs))
        kafka_node.kill()
        time.sleep(1)  # the worker notices: its fetches and heartbeats fail
        assert worker.proc is not None
        asked = time.monotonic()
        worker.proc.terminate()
        try:
            code = worker.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("the worker did not exit within 15 s of SIGTERM with the broker gone")
        assert code == 0
        assert time.monotonic() - asked <= 4.0
    finally:
        worker.stop()


def test_a_broker_that_came_back_without_its_log_halts_the_worker_before_it_decides_on_the_new_log(
    kafka_node: KafkaNode, tmp_path: Path
) -> None:
    inputs = lab_month().inputs
    worker = _worker(kafka_node, tmp_path)
    try:
        worker.start()
        worker.wait_ready()
        produce_events(kafka_node.bootstrap, worker.topics.events, inputs[:1500])
        _processed(worker, 1500)
        _quiet(worker)  # the last instant closed by the idle timer: its decisions went to the old log
        # the broker restarts with its data folder wiped (a lost disk); the topics are re-created and a
        # publisher resends from its spool: later inputs, at offsets the old log held other records at.
        # The worker is frozen meanwhile, so its next fetch, at the old position, finds the new log
        # already past it (no out-of-range error)
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGSTOP)
        try:
            kafka_node.wipe()
            kafka_node.start()
            worker.create_topics()
            produce_events(kafka_node.bootstrap, worker.topics.events, inputs[700:])
        finally:
            worker.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: worker.metric("gpuledger_worker_halted") == 1, timeout_s=120)
        status, body = worker.get("/readyz")
        assert status == 503 and b"halted" in body
        assert worker.alive and worker.get("/healthz")[0] == 200
        assert worker.log_path is not None
        assert "worker halted, no further decisions" in worker.log_path.read_text(errors="replace")
        assert read_topic(kafka_node.bootstrap, worker.topics.decisions, idle_s=2) == []
        worker.stop()  # nothing after the halt, a stop included: no checkpoint, no mark
        assert read_topic(kafka_node.bootstrap, checkpoint_topic(worker.app_id), idle_s=2) == []
    finally:
        worker.stop()
