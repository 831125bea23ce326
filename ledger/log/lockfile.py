"""The single-writer lock of a log directory: an advisory ``flock`` on ``LOCK`` holding the writer's pid."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_NAME", "WriterLock"]

LOCK_NAME = "LOCK"


class WriterLock:
    """An exclusive, non-blocking lock; the kernel drops it when the holder exits, even on a crash.

    The file is never deleted (deleting a lock file races with a process that just opened it);
    its content, the holder's pid, only serves error messages.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # A file object (not a bare fd) so that a forgotten lock is released when it is garbage collected.
        self._file = open(path, "a+b")  # noqa: SIM115 - held open for the lock's lifetime

    @classmethod
    def try_acquire(cls, path: Path) -> WriterLock | None:
        """Return the held lock, or None if another open file (in any process) holds it."""
        lock = cls(path)
        try:
            fcntl.flock(lock._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock._file.close()
            return None
        lock._file.truncate(0)
        lock._file.write(f"{os.getpid()}\n".encode())
        lock._file.flush()
        return lock

    @staticmethod
    def holder(path: Path) -> str:
        """Return who holds the lock, as well as the file tells."""
        try:
            pid = path.read_text(encoding="utf-8").strip()
        except OSError:
            pid = ""
        if pid == str(os.getpid()):
            return "another EventLog object in this same process (close it first)"
        return f"process {pid}" if pid else "another process"

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if not self._file.closed:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
