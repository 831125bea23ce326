"""Session fixtures shared by every area's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger.streams.testbroker import BrokerHandle, kafka_broker


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """Yield a real Kafka-protocol broker for the session (configured, containerised, or a local tansu process)."""
    with kafka_broker(tmp_path_factory.mktemp("broker")) as handle:
        yield handle


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka: BrokerHandle) -> str:
    """Return host:port of the session's broker."""
    return kafka.bootstrap
