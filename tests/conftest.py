"""Session fixtures shared by every area's tests: Apache Kafka, one node for most tests, three for the faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger.streams.testbroker import BrokerHandle, KafkaCluster, KafkaNode, kafka_broker


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """Yield the session's Kafka: ``GPULEDGER_KAFKA_BOOTSTRAP`` if set, else one KRaft node started here."""
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as handle:
        yield handle


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka: BrokerHandle) -> str:
    """Return host:port of the session's Kafka."""
    return kafka.bootstrap


@pytest.fixture
def kafka_node(kafka: BrokerHandle) -> Iterator[KafkaNode]:
    """Yield the session's own node for a test that stops, freezes or wipes it; running and thawed again after."""
    if kafka.cluster is None:
        pytest.skip(f"needs a broker this session started (not the configured {kafka.bootstrap})")
    node = kafka.cluster.nodes[0]
    try:
        yield node
    finally:
        node.thaw()
        if not node.running:
            node.start()
        kafka.cluster.wait_ready()


@pytest.fixture(scope="session")
def _three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with kafka_broker(tmp_path_factory.mktemp("kafka3"), 3, use_env=False) as handle:
        assert handle.cluster is not None
        yield handle.cluster


@pytest.fixture
def kafka_cluster(_three_nodes: KafkaCluster) -> Iterator[KafkaCluster]:
    """Yield three KRaft nodes started here (replication factor 3, min.insync.replicas 2); all up after the test."""
    _three_nodes.wait_ready()
    try:
        yield _three_nodes
    finally:
        for node in _three_nodes.nodes:
            node.thaw()
            if not node.running:
                node.launch()
        for node in _three_nodes.nodes:
            node.wait_listening()
        _three_nodes.wait_ready()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep every Kafka test on one process under ``pytest -n``: they share the session's brokers."""
    for item in items:
        if item.get_closest_marker("kafka"):
            item.add_marker(pytest.mark.xdist_group("kafka"))
