"""Start a worker process: stop handling first, then the driver (which creates its topics) until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from ledger.streams.config import WorkerConfig

if TYPE_CHECKING:
    from ledger.streams.driver import Worker

__all__ = ["EXIT_DEADLINE_S", "run_worker"]

EXIT_DEADLINE_S = 3.0  # after a stop is asked for, the process is gone by then whatever the broker does

log = logging.getLogger("gpuledger.worker")


def _exit_by_deadline() -> None:
    """Leave the process if its bounded shutdown has not ended by the deadline (a client stuck on a dead broker)."""
    def leave() -> None:
        log.warning("shutdown not finished %.1f s after the stop: leaving now (the checkpoints stay valid)",
                    EXIT_DEADLINE_S)
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(EXIT_DEADLINE_S, leave)
    timer.daemon = True
    timer.start()


class _StoppedEarly(Exception):
    """A stop asked for before the event loop took the signals over (raised out of whatever was running)."""


def run_worker(cfg: WorkerConfig) -> int:
    """Run the worker until SIGTERM/SIGINT; return the exit code (0 for a stop asked for, in any phase)."""
    early: list[int] = []
    started: list[tuple[asyncio.AbstractEventLoop, Worker]] = []

    def asked(signum: int, _frame: FrameType | None) -> None:  # until the event loop takes the signals over
        if not early:
            _exit_by_deadline()
        early.append(signum)
        if not started:
            raise _StoppedEarly  # out of the imports or whatever else runs: nothing has been decided yet
        for loop, worker in started:
            loop.call_soon_threadsafe(worker.request_stop)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, asked)
    try:
        logging.basicConfig(
            level=cfg.loglevel.upper(), format="[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"
        )
        from ledger.streams.driver import Worker  # after the handlers: a stop during the imports is honoured too

        async def main() -> int:
            worker = Worker(cfg)
            worker.on_stop.append(_exit_by_deadline)
            started.append((asyncio.get_running_loop(), worker))
            if early:
                return 0
            return await worker.run()

        return asyncio.run(main())
    except _StoppedEarly:
        return 0
