"""Drive a real worker process and read topics back, for the streaming tests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.codec import decode
from ledger.events import Event
from ledger.streams.publisher import event_record
from ledger.streams.sources import is_core_output
from ledger.streams.testbroker import die_with_parent, free_port
from ledger.streams.topics import TopicNames, ensure_topics_sync, worker_topics

ROOT = Path(__file__).resolve().parents[2]
_ns = itertools.count(1)


def namespace() -> tuple[str, str]:
    """Return a fresh (topic prefix, app id) so tests sharing one broker never see each other's records."""
    n = f"t{os.getpid()}x{next(_ns)}"
    return f"{n}.", f"gpuledger-worker-{n}"


def is_output(event: Event) -> bool:
    """Return whether an event was emitted by the decision core (ids ``{cluster}/d{n}``)."""
    return is_core_output(event)


@dataclass
class WorkerProc:
    """One ``gpuledger worker`` process on its own topics and HTTP port."""

    bootstrap: str
    prefix: str
    app_id: str
    partitions: int = 1
    extra: list[str] = field(default_factory=list)
    log_path: Path | None = None
    http_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    replication_factor: int = 1  # 3 on the three-node cluster: every partition survives one node's loss

    @property
    def topics(self) -> TopicNames:
        return TopicNames(self.prefix)

    def create_topics(self) -> None:
        ensure_topics_sync(
            self.bootstrap, worker_topics(self.partitions, self.app_id, self.prefix),
            replication_factor=self.replication_factor,
        )

    def start(self) -> None:
        flags = os.environ.get("GPULEDGER_WORKER_PYFLAGS", "").split()  # e.g. "-m cProfile -o worker.prof"
        cmd = [
            sys.executable, *flags, "-m", "ledger.cli", "worker", "--bootstrap", self.bootstrap,
            "--partitions", str(self.partitions), "--app-id", self.app_id, "--topic-prefix", self.prefix,
            "--http", f"127.0.0.1:{self.http_port}", "--replication-factor", str(self.replication_factor), *self.extra,
        ]
        log: Any = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        if log is not subprocess.DEVNULL:
            log.close()

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            # 10 s: on a loaded machine a worker deep in a batch answers late, which is not a failure
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.alive, f"worker exited with {self.proc and self.proc.returncode}\n{self.log_tail()}"
            with contextlib.suppress(OSError):
                if self.get("/readyz")[0] == 200:
                    return
            time.sleep(0.1)
        raise TimeoutError("worker not ready")

    def log_tail(self, chars: int = 3000) -> str:
        """Return the end of the worker's log (for a failure message)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def kill_after(self, seconds: float) -> None:
        """Let the worker run for ``seconds`` (or exit by itself), then SIGKILL it."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def metric(self, name: str) -> float:
        _, body = self.get("/metrics")
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total


@contextlib.contextmanager
def running_worker(bootstrap: str, tmp: Path, partitions: int = 1, extra: Iterable[str] = ()) -> Iterator[WorkerProc]:
    prefix, app_id = namespace()
    w = WorkerProc(bootstrap, prefix, app_id, partitions, list(extra), tmp / f"{app_id}.log")
    w.create_topics()
    try:
        yield w
    finally:
        w.stop()


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=512 * 1024)
    await p.start()
    try:
        sent = [await p.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*sent)  # a record the broker did not take fails the test here, not later
    finally:
        await p.stop()


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    """Send raw records (key, value) in order, acks=all."""
    asyncio.run(_produce(bootstrap, topic, records))


def produce_events(bootstrap: str, topic: str, events: Iterable[Event]) -> None:
    """Send events as the publisher would (key = cluster, single-object Avro)."""
    produce(bootstrap, topic, [event_record(e) for e in events])


async def _read(bootstrap: str, topic: str, idle_s: float, want: int | None, timeout_s: float) -> list[Any]:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    out: list[Any] = []
    try:
        deadline = time.monotonic() + timeout_s
        last = time.monotonic()
        while time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200, max_records=10_000)
            got = [m for msgs in batch.values() for m in msgs]
            out.extend(got)
            if got:
                last = time.monotonic()
            if want is not None and len(out) >= want and time.monotonic() - last >= min(idle_s, 0.5):
                break
            if want is None and time.monotonic() - last >= idle_s:
                break
    finally:
        await c.stop()
    out.sort(key=lambda m: (m.partition, m.offset))
    return out


def read_topic(bootstrap: str, topic: str, *, idle_s: float = 2.0, want: int | None = None, timeout_s: float = 120):
    """Return every record of a topic (sorted by partition and offset), reading until quiet."""
    return asyncio.run(_read(bootstrap, topic, idle_s, want, timeout_s))


def decoded(records: list[Any]) -> list[Event]:
    return [decode(m.value) for m in records]


def wait_for(predicate: Any, timeout_s: float = 120, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every_s)
    raise TimeoutError("condition not met in time")
