"""Start a worker process: create its topics, then run the driver until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging

from ledger.streams.config import WorkerConfig

__all__ = ["run_worker"]


def run_worker(cfg: WorkerConfig) -> int:
    """Create the topics, then run the worker until SIGTERM/SIGINT; return the exit code."""
    from ledger.streams.driver import Worker
    from ledger.streams.topics import ensure_topics_sync, worker_topics

    logging.basicConfig(level=cfg.loglevel.upper(), format="[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s")
    topics = worker_topics(cfg.partitions, cfg.app_id, cfg.topic_prefix)
    ensure_topics_sync(cfg.bootstrap, topics, replication_factor=cfg.replication_factor, security=cfg.security)

    async def main() -> int:
        return await Worker(cfg).run()

    return asyncio.run(main())
