"""Serialise cluster states for a checkpoint without holding the event loop: in a forked copy of the process.

Pickling a busy cluster's decision core takes tens of milliseconds (a 5,000-workload cluster: 50-120 ms
with compression), and nothing else can run on the event loop meanwhile: every input waiting behind a
checkpoint paid for it in latency. ``os.fork()`` gives a copy-on-write image of the process as it is at
that instant, for the cost of copying page tables (a few ms); the child serialises that frozen state and
writes the bytes to a pipe while the parent goes on processing records. The result is exactly what
serialising in place at the fork would have given. Where ``fork`` is missing, or ``in_process`` is asked
for, the same bytes are made in place.

The child runs no asyncio, Kafka or logging code (only pickle and zlib), takes default signal
handling (a signal to it never reaches the parent's loop through the shared wake-up fd) and always ends
with ``os._exit``, so the parent's threads, sockets and handlers are never used from it; if the parent
dies first the child's write fails and it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import struct
from collections.abc import Sequence

from ledger.errors import LedgerError
from ledger.streams.state import ClusterState

__all__ = ["Serialisation"]

_LEN = struct.Struct("<Q")


class Serialisation:
    """The bytes of some states as they were when ``start`` returned; ``result()`` awaits them."""

    def __init__(self, count: int, blobs: list[bytes] | None = None, pid: int = 0, read_fd: int = -1):
        self.count = count
        self._blobs = blobs
        self._pid = pid
        self._read_fd = read_fd

    @classmethod
    def start(cls, states: Sequence[ClusterState], *, in_process: bool = False) -> Serialisation:
        """Freeze ``states`` now: fork a child that serialises them, or serialise them in place."""
        if in_process or not hasattr(os, "fork") or not states:
            return cls(len(states), [st.to_bytes() for st in states])
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a frozen copy of the states; serialise, write, exit without any cleanup
            code = 1
            try:
                _detach_signals()
                os.close(read_fd)
                payload = pickle.dumps([st.to_bytes() for st in states], protocol=5)
                view = memoryview(_LEN.pack(len(payload)) + payload)
                while view:
                    view = view[os.write(write_fd, view) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        return cls(len(states), pid=pid, read_fd=read_fd)

    async def result(self) -> list[bytes]:
        """Return the serialised states, in the order given to ``start``."""
        if self._blobs is not None:
            return self._blobs
        loop = asyncio.get_running_loop()
        try:
            data = await loop.run_in_executor(None, _read_all, self._read_fd)
        finally:
            os.close(self._read_fd)
            await loop.run_in_executor(None, os.waitpid, self._pid, 0)
        if len(data) < _LEN.size or _LEN.unpack_from(data)[0] != len(data) - _LEN.size:
            raise LedgerError(f"checkpoint serialiser (pid {self._pid}) ended before writing its {self.count} state(s)")
        blobs: list[bytes] = pickle.loads(data[_LEN.size :])
        self._blobs = blobs
        return blobs


def _detach_signals() -> None:
    """Give the child default signal handling and no wake-up fd: a signal to it must not reach the parent's loop.

    asyncio's signal handling writes each signal number to a file descriptor the child shares with the
    parent, and the parent's handlers (the worker's shutdown) would act on the child's signals.
    """
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
