"""The worker's settings (what ``gpuledger worker`` fills from its flags)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core import Knobs
from ledger.streams.security import KafkaSecurity
from ledger.streams.topics import WORKER_APP_ID

__all__ = ["WorkerConfig"]


@dataclass
class WorkerConfig:
    """Everything a worker needs; the CLI fills it from flags."""

    bootstrap: str
    knobs: Knobs = field(default_factory=Knobs)
    partitions: int = 4
    app_id: str = WORKER_APP_ID
    topic_prefix: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 6066
    checkpoint_every: int = 5000
    checkpoint_interval_s: float = 5.0
    checkpoint_fork: bool = True  # serialise checkpoints in a forked child (see streams.snapshot)
    timer_interval_s: float = 0.25
    idle_clock_rate: float = 1.0
    idle_after_s: float = 1.0
    instance_id: str | None = None  # static group membership: a restarted member takes its partitions back at once
    shutdown_timeout_s: float = 4.0  # what a stop may spend on its last checkpoint and on leaving the group
    session_timeout_s: float = 6.0
    rebalance_timeout_s: float = 3.0
    fetch_max_wait_ms: int = 20
    batch_max: int = 1000
    loglevel: str = "WARNING"
    replication_factor: int = 1
    security: KafkaSecurity = field(default_factory=KafkaSecurity.from_env)
