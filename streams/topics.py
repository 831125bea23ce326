"""Topic names and their explicit creation (never rely on broker auto-creation: partition counts matter)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from ledger.errors import BrokerError
from ledger.streams.security import KafkaSecurity

__all__ = [
    "CHECKPOINT_MAX_BYTES",
    "DEADLETTER",
    "DECISIONS",
    "EVENTS",
    "WORKER_APP_ID",
    "TopicNames",
    "changelog_topics",
    "checkpoint_topic",
    "ensure_topics",
    "ensure_topics_sync",
    "key_partition",
    "occupancy_topic",
    "topic_configs",
    "worker_topics",
]

EVENTS = "gpuledger.events"  # input facts, keyed by cluster (one cluster's events stay ordered in one partition)
DECISIONS = "gpuledger.decisions"  # the decision core's outputs, keyed by cluster
DEADLETTER = "gpuledger.deadletter"  # records that failed to decode or validate, with the reason in headers
WORKER_APP_ID = "gpuledger-worker"
CHECKPOINT_MAX_BYTES = 16 * 1024 * 1024  # the largest checkpoint record batch the worker writes and reads
TABLES = ("clusters", "occupancy")  # the worker's compacted topics: checkpoints per cluster, occupancy per node


@dataclass(frozen=True)
class TopicNames:
    """The three data topics, optionally under a prefix (several ledgers, or tests, sharing one broker)."""

    prefix: str = ""

    @property
    def events(self) -> str:
        """Return the input topic."""
        return self.prefix + EVENTS

    @property
    def decisions(self) -> str:
        """Return the output topic."""
        return self.prefix + DECISIONS

    @property
    def deadletter(self) -> str:
        """Return the dead-letter topic."""
        return self.prefix + DEADLETTER


def changelog_topics(app_id: str = WORKER_APP_ID) -> list[str]:
    """Return the worker's compacted topics: its checkpoints and its occupancy view."""
    return [f"{app_id}-{table}-changelog" for table in TABLES]


def checkpoint_topic(app_id: str = WORKER_APP_ID) -> str:
    """Return the compacted topic of the worker's per-cluster checkpoints and per-partition marks."""
    return f"{app_id}-clusters-changelog"


def occupancy_topic(app_id: str = WORKER_APP_ID) -> str:
    """Return the compacted topic of rolling occupancy per budget node (key ``cluster|path``)."""
    return f"{app_id}-occupancy-changelog"


def key_partition(cluster: str, partitions: int) -> int:
    """Return the partition a cluster's inputs go to: its key hashed as the producers' default partitioner does."""
    from aiokafka.partitioner import murmur2

    hashed: int = murmur2(cluster.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def worker_topics(partitions: int, app_id: str = WORKER_APP_ID, prefix: str = "") -> dict[str, int]:
    """Return every topic the worker reads or writes with the partition count it must have.

    The checkpoint and occupancy topics have the events topic's count (partition p holds what was
    read from events partition p); the decisions topic has it too (an output goes to its input's partition).
    """
    names = TopicNames(prefix)
    topics = {names.events: partitions, names.decisions: partitions, names.deadletter: 1}
    topics.update({name: partitions for name in changelog_topics(app_id)})
    return topics


async def ensure_topics(
    bootstrap: str,
    topics: dict[str, int],
    timeout_s: float = 15.0,
    *,
    replication_factor: int = 1,
    security: KafkaSecurity | None = None,
) -> None:
    """Create missing topics with the given partition counts; raise BrokerError if one exists with another count."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import KafkaError, TopicAlreadyExistsError

    security = security or KafkaSecurity.from_env()
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000), **security.aiokafka_kwargs()
    )
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(name, n, replication_factor, topic_configs=topic_configs(name)) for name, n in topics.items()
            if name not in existing
        ]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # a concurrent creator won the race
                await admin.create_topics(missing)
        described = await admin.describe_topics(list(topics))
        # A broker answers for a topic just created before its metadata holds the partitions (Apache
        # Kafka: "0 partitions" for a moment): ask again for those, never past the timeout.
        deadline = time.monotonic() + timeout_s
        while any(not e.get("partitions") for e in described) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            described = await admin.describe_topics(list(topics))
    except (KafkaError, OSError, TimeoutError) as exc:
        raise BrokerError(f"cannot create topics on {bootstrap}: {type(exc).__name__}: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
    for entry in described:
        want = topics.get(entry["topic"])
        have = len(entry.get("partitions") or [])
        if want is not None and have != want:
            raise BrokerError(f"topic {entry['topic']} has {have} partition(s) on {bootstrap}, expected {want}")


def ensure_topics_sync(
    bootstrap: str,
    topics: dict[str, int],
    timeout_s: float = 15.0,
    *,
    replication_factor: int = 1,
    security: KafkaSecurity | None = None,
) -> None:
    """Run ``ensure_topics`` from synchronous code."""
    asyncio.run(ensure_topics(bootstrap, topics, timeout_s, replication_factor=replication_factor, security=security))


def topic_configs(name: str) -> dict[str, str]:
    """Return the settings a topic is created with: the worker's checkpoints and views are compacted.

    A busy cluster's checkpoint outgrows Apache Kafka's default 1 MB record batch (the full demo month's
    did): the checkpoint topic takes batches up to ``CHECKPOINT_MAX_BYTES``, what the worker's producer sends.
    """
    if name.endswith("-clusters-changelog"):
        return {"cleanup.policy": "compact", "max.message.bytes": str(CHECKPOINT_MAX_BYTES)}
    return {"cleanup.policy": "compact"} if name.endswith("-changelog") else {}
