"""Apache Kafka for tests and benchmarks: an operator's cluster, or KRaft nodes started here from the pinned jars.

Where a broker comes from, in order:

1. ``GPULEDGER_KAFKA_BOOTSTRAP`` when set: an existing cluster, never started or stopped here;
2. otherwise Apache Kafka itself, the version ``deploy/kafka/pom.xml`` pins, from the jars
   ``make kafka-jars`` copies into ``.kafka/libs`` (or ``GPULEDGER_KAFKA_LIBS``): each node a
   ``kafka.Kafka`` process, broker and controller in one (KRaft), on free 127.0.0.1 ports, its storage
   formatted by ``kafka.tools.StorageTool`` in a temporary folder.

The nodes run with the settings ``deploy/compose.yaml`` gives its brokers (``x-kafka-env``: the
apache/kafka image's ``KAFKA_*`` variables, read here as server properties); only the addresses, the
folders and, on fewer than three nodes, the replication factors differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ledger.errors import BrokerError

__all__ = [
    "ENV_BOOTSTRAP",
    "BrokerHandle",
    "KafkaCluster",
    "KafkaNode",
    "broker_settings",
    "die_with_parent",
    "free_port",
    "kafka_broker",
    "kafka_libs",
    "wait_port",
]

ENV_BOOTSTRAP = "GPULEDGER_KAFKA_BOOTSTRAP"
ENV_LIBS = "GPULEDGER_KAFKA_LIBS"
ROOT = Path(__file__).resolve().parents[1]  # streams/ sits at the project's root (linked as ledger/streams)
COMPOSE = ROOT / "deploy" / "compose.yaml"
LOG4J = ROOT / "deploy" / "kafka" / "log4j2.properties"
CLUSTER_ID = "4L6g3nShT-eMCtK--X86sw"  # the compose file's; any 22-character base64 id would do
# What the image's variables say that is not a server property, or is a node's own.
_NOT_SHARED = {"HEAP_OPTS", "NODE_ID", "ADVERTISED_LISTENERS", "LISTENERS", "LOG_DIRS", "CONTROLLER_QUORUM_VOTERS"}
_REPLICATION = ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor", "share.coordinator.state.topic.replication.factor")
_MIN_ISR = ("min.insync.replicas", "transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr")
# Kafka's own start script (kafka-run-class.sh) runs the broker with these.
_JVM = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing uses right now, below the kernel's ephemeral range.

    A port is chosen here and bound later by another process (a node, a restarted node, a worker's
    pages). A port from the ephemeral range can meanwhile become the local end of some client's
    connection, and the bind then fails; ports below the range are never handed out that way.
    """
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a crowded range: any port the kernel picks
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def _ephemeral_low() -> int:
    """Return the first port of Linux's ephemeral range (32768 if it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def wait_port(host: str, port: int, timeout_s: float = 15.0) -> None:
    """Block until something accepts TCP connections on host:port; raise BrokerError on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise BrokerError(f"nothing listens on {host}:{port} after {timeout_s:.0f}s")


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this (child) process when its parent dies, so a killed test run leaves no broker."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def kafka_libs() -> Path:
    """Return the folder of the pinned broker's jars; raise BrokerError naming the fix when it is missing."""
    libs = Path(os.environ.get(ENV_LIBS) or ROOT / ".kafka" / "libs")
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"no Apache Kafka jars in {libs}: run `make kafka-jars` (needs Java 17 and Maven), "
            f"or set {ENV_BOOTSTRAP} to an existing cluster"
        )
    if shutil.which("java") is None:
        raise BrokerError("java not found on PATH: the test broker is Apache Kafka and needs Java 17")
    return libs


def _property(variable: str) -> str:
    """Return the server property an apache/kafka image variable sets (``KAFKA_A_B`` -> ``a.b``, ``__`` -> ``_``)."""
    return variable.lower().replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")


def broker_settings(nodes: int) -> tuple[dict[str, str], list[str]]:
    """Return the server properties shared by every node and the JVM heap flags, as deploy/compose.yaml sets them."""
    try:
        env: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["x-kafka-env"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise BrokerError(f"{COMPOSE}: cannot read the brokers' settings (x-kafka-env): {exc}") from None
    props = {_property(k[len("KAFKA_"):]): str(v) for k, v in env.items()
             if k.startswith("KAFKA_") and k[len("KAFKA_"):] not in _NOT_SHARED}
    for key in _REPLICATION:  # fewer nodes than copies would leave every topic unwritable
        props[key] = str(min(int(props.get(key, "1")), nodes))
    for key in _MIN_ISR:
        props[key] = str(min(int(props.get(key, "1")), max(1, nodes - 1)) if nodes > 1 else "1")
    heap = str(env.get("KAFKA_HEAP_OPTS", "-Xms512m -Xmx512m")).split()
    return props, heap


@dataclass
class KafkaNode:
    """One ``kafka.Kafka`` process (broker and controller) with its own data folder and two loopback ports."""

    node_id: int
    data_dir: Path
    settings: dict[str, str]
    heap: list[str]
    log_path: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """Return host:port of this node's client listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def properties_path(self) -> Path:
        """Return the node's server.properties (beside its data folder)."""
        return self.data_dir.with_suffix(".properties")

    def _java(self, main: str, *args: str, heap: list[str] | None = None) -> list[str]:
        libs = kafka_libs()
        log4j = [f"-Dlog4j2.configurationFile={LOG4J}"] if LOG4J.is_file() else []
        return ["java", *(heap or ["-Xmx256m"]), *_JVM, *log4j, "-cp", f"{libs}/*", main, *args]

    def write_properties(self) -> None:
        """Write server.properties: the shared settings, then this node's id, listeners and folder."""
        own = {
            "node.id": str(self.node_id),
            "listeners": f"INTERNAL://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"INTERNAL://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        text = "".join(f"{k}={v}\n" for k, v in {**self.settings, **own}.items())
        self.properties_path.write_text(text)

    def format(self) -> None:
        """Format the node's KRaft storage (kafka.tools.StorageTool) unless it already holds a formatted log."""
        if (self.data_dir / "meta.properties").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self._java("kafka.tools.StorageTool", "format", "--cluster-id", CLUSTER_ID,
                         "--config", str(self.properties_path), "--ignore-formatted")
        done = subprocess.run(cmd, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-3:]
            raise BrokerError(f"formatting Kafka node {self.node_id} failed: {' | '.join(tail)}")

    def start(self) -> None:
        """Start the process (formatting first when the folder is new); return once its client port listens."""
        self.launch()
        self.wait_listening()

    def launch(self) -> None:
        """Format if needed and start the process without waiting for it.

        Call it from the thread that stays alive: the child is told to stop when its parent *thread* ends.
        """
        if self.running:
            return
        self.write_properties()
        self.format()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.properties_path), heap=self.heap),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def wait_listening(self, timeout_s: float = 90.0) -> None:
        """Block until the client port accepts connections; stop the node and raise BrokerError if it never does."""
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if not self.running:
                    raise BrokerError(f"Kafka node {self.node_id} exited ({self._exit_code()}); see {self.log_path}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
                time.sleep(0.1)
            raise BrokerError(f"Kafka node {self.node_id} does not listen on {self.bootstrap} after {timeout_s:.0f}s")
        except BrokerError:
            self.stop()
            raise

    def _exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def running(self) -> bool:
        """Return whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Return the process id while it runs."""
        return self._proc.pid if self.running and self._proc is not None else None

    def kill(self) -> None:
        """SIGKILL the process (no shutdown: what it had not flushed is the page cache's, as on a crashed host)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        """Stop the process as an operator would (SIGTERM: controlled shutdown), SIGKILL after 20 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def wipe(self) -> None:
        """Stop the node and delete its data folder: the next start formats an empty log (a lost disk)."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def freeze(self) -> None:
        """Suspend the process (SIGSTOP): it keeps its data but answers nothing, like a hung host."""
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Resume a frozen node (SIGCONT)."""
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)


@dataclass
class KafkaCluster:
    """KRaft nodes started here: one node, or three with replication factor 3 and min.insync.replicas 2."""

    nodes: list[KafkaNode]

    @classmethod
    def local(cls, root: Path, size: int = 1) -> KafkaCluster:
        """Lay out ``size`` nodes under ``root`` (not started) with the deploy settings and one controller quorum."""
        settings, heap = broker_settings(size)
        root.mkdir(parents=True, exist_ok=True)
        nodes = [KafkaNode(i, root / f"node{i}", settings, heap, root / f"node{i}.log") for i in range(1, size + 1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
        for n in nodes:
            n.settings = {**settings, "controller.quorum.voters": voters}
        return cls(nodes)

    @property
    def bootstrap(self) -> str:
        """Return every node's host:port, comma-separated."""
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        """Return the node with this id."""
        return next(n for n in self.nodes if n.node_id == node_id)

    def start(self, timeout_s: float = 120.0) -> None:
        """Start every node at once (a quorum needs a majority) and wait until all serve metadata."""
        for n in self.nodes:
            n.write_properties()
        with ThreadPoolExecutor(len(self.nodes)) as pool:  # a JVM start each: formatting in parallel
            list(pool.map(lambda n: n.format(), self.nodes))
        for n in self.nodes:
            n.launch()
        for n in self.nodes:
            n.wait_listening()
        self.wait_ready(timeout_s)

    def stop(self) -> None:
        """Stop every node that runs."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.stop(), self.nodes))

    def wait_ready(self, timeout_s: float = 120.0, nodes: int | None = None) -> None:
        """Block until the metadata lists ``nodes`` brokers (default: all) and a write with acks=all succeeds.

        A node restarted after SIGKILL lists itself before the controller has unfenced it; only a write
        (to a topic with a copy on each of them) shows the cluster takes records again.
        """
        want = len(self.nodes) if nodes is None else nodes
        deadline = time.monotonic() + timeout_s
        quiet = logging.getLogger("aiokafka")
        level, quiet.level = quiet.level, logging.CRITICAL  # "Unable connect" until the node is up is expected
        try:
            self._poll_brokers(want, deadline)
        finally:
            quiet.setLevel(level)

    def _poll_brokers(self, want: int, deadline: float) -> None:
        last: object = None
        while time.monotonic() < deadline:
            try:
                if len(asyncio.run(_brokers(self.bootstrap))) >= want:
                    asyncio.run(_probe(self.bootstrap, min(want, 3)))
                    return
            except Exception as exc:  # not up yet: any client error means "ask again"
                last = exc
            time.sleep(0.2)
        raise BrokerError(f"Kafka at {self.bootstrap} lists fewer than {want} broker(s) in time: {last}")

    def leader(self, topic: str, partition: int) -> KafkaNode:
        """Return the node that leads a partition now."""
        node_id = asyncio.run(_leader(self.bootstrap, topic, partition))
        return self.node(node_id)


async def _brokers(bootstrap: str) -> list[Any]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    await asyncio.wait_for(admin.start(), 5)
    try:
        described = await asyncio.wait_for(admin.describe_cluster(), 5)
        return list(described["brokers"])
    finally:
        await admin.close()


PROBE_TOPIC = "gpuledger-testbroker-probe"


async def _probe(bootstrap: str, replicas: int) -> None:
    """Create the probe topic (one copy per node) if it is missing and write one record to it with acks=all."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await asyncio.wait_for(admin.start(), 5)
    try:
        if PROBE_TOPIC not in await admin.list_topics():
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(PROBE_TOPIC, replicas, replicas)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=5000)
    await asyncio.wait_for(producer.start(), 5)
    try:
        for partition in range(replicas):
            await asyncio.wait_for(producer.send_and_wait(PROBE_TOPIC, b"ready", partition=partition), 6)
    finally:
        await producer.stop()


async def _leader(bootstrap: str, topic: str, partition: int) -> int:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await asyncio.wait_for(admin.start(), 10)
    try:
        for entry in await admin.describe_topics([topic]):
            for p in entry["partitions"]:
                if p["partition"] == partition and p["leader"] >= 0:
                    return int(p["leader"])
    finally:
        await admin.close()
    raise BrokerError(f"{topic}[{partition}] has no leader on {bootstrap}")


@dataclass
class BrokerHandle:
    """What a test gets: the bootstrap address and, for nodes started here, control of them."""

    bootstrap: str
    kind: str  # "env" (an existing cluster) or "apache-kafka" (nodes started here)
    cluster: KafkaCluster | None = None


@contextlib.contextmanager
def kafka_broker(root: Path, size: int = 1, *, use_env: bool = True) -> Iterator[BrokerHandle]:
    """Yield a reachable Kafka: ``GPULEDGER_KAFKA_BOOTSTRAP`` if set (and ``use_env``), else ``size`` local nodes."""
    configured = os.environ.get(ENV_BOOTSTRAP)
    if configured and use_env:
        yield BrokerHandle(configured, "env")
        return
    cluster = KafkaCluster.local(root, size)
    try:
        cluster.start()
        yield BrokerHandle(cluster.bootstrap, "apache-kafka", cluster)
    finally:
        cluster.stop()
