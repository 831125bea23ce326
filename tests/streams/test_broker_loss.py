"""A broker that goes away: the worker stops promptly when asked, and notices a broker that came back without its log.

Each test runs its own tansu broker (memory storage: a restarted broker is empty, as one that lost its log).
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.streams.testbroker import TansuBroker
from tests.streams.harness import WorkerProc, namespace, produce_events, read_topic, wait_for
from tests.streams.scenarios import lab_month
from tests.streams.test_worker import FAST_GROUP

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FLAGS = [*FAST_GROUP, "--idle-clock-rate", "0", "--checkpoint-every", "200", "--checkpoint-interval", "0.5"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    b = TansuBroker(log_path=tmp_path / "tansu.log")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _worker(broker: TansuBroker, tmp_path: Path) -> WorkerProc:
    prefix, app_id = namespace()
    w = WorkerProc(broker.bootstrap, prefix, app_id, 1, FLAGS, tmp_path / "worker.log")
    w.create_topics()
    return w


def _processed(worker: WorkerProc, n: int) -> None:
    """Wait until the worker's durable checkpoints reflect the first ``n`` inputs."""
    wait_for(lambda: worker.metric("gpuledger_worker_checkpointed_offset") >= n - 1, timeout_s=120)


def test_a_worker_told_to_stop_while_the_broker_is_gone_exits_promptly_and_cleanly(
    broker: TansuBroker, tmp_path: Path
) -> None:
    inputs = lab_month().inputs[:600]
    worker = _worker(broker, tmp_path)
    try:
        worker.start()
        worker.wait_ready()
        produce_events(broker.bootstrap, worker.topics.events, inputs)
        _processed(worker, len(inputs))
        broker.stop()
        assert worker.proc is not None
        worker.proc.terminate()
        try:
            code = worker.proc.wait(timeout=15)  # a hang detector, not a speed target: it hung for minutes
        except subprocess.TimeoutExpired:
            pytest.fail("the worker did not exit within 15 s of SIGTERM with the broker gone")
        assert code == 0
    finally:
        worker.stop()


def test_a_broker_that_came_back_without_its_log_halts_the_worker_before_it_decides_on_the_new_log(
    broker: TansuBroker, tmp_path: Path
) -> None:
    inputs = lab_month().inputs
    worker = _worker(broker, tmp_path)
    try:
        worker.start()
        worker.wait_ready()
        produce_events(broker.bootstrap, worker.topics.events, inputs[:1500])
        _processed(worker, 1500)
        # the broker restarts empty; the topics are re-created and a publisher resends from its spool:
        # later inputs, at offsets the old log held other records at. The worker is frozen meanwhile, so
        # its next fetch, at the old position, finds the new log already past it (no out-of-range error)
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGSTOP)
        try:
            broker.stop()
            broker.start()
            worker.create_topics()
            produce_events(broker.bootstrap, worker.topics.events, inputs[700:])
        finally:
            worker.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: worker.metric("gpuledger_worker_halted") == 1, timeout_s=120)
        status, body = worker.get("/readyz")
        assert status == 503 and b"halted" in body
        assert worker.alive and worker.get("/healthz")[0] == 200
        assert worker.log_path is not None
        assert "worker halted, no further decisions" in worker.log_path.read_text(errors="replace")
        assert read_topic(broker.bootstrap, worker.topics.decisions, idle_s=2) == []
    finally:
        worker.stop()
