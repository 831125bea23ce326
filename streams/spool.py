"""A durable local outbox: records are fsynced here before they are sent, and resent in order after a failure.

Layout of a spool directory:

* ``spool.log``: frames ``[u32 length][u32 crc32][u16 key length][key][value]``, appended and fsynced;
* ``cursor``: the byte offset of the first frame not yet acknowledged by the broker, replaced
  atomically (write, fsync, rename) after each acknowledged batch.

A crash can leave a torn frame at the tail (never acknowledged to the caller, who only returns
after the fsync); it is cut off on open. When every frame is acknowledged the files are removed,
so an idle spool is empty and a long-running publisher does not grow it without bound.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ledger.errors import BrokerError

__all__ = ["Spool"]

_FRAME = struct.Struct("<II")
_KEYLEN = struct.Struct("<H")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """An ordered, crash-safe queue of (key, value) byte records in one directory."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._log = self.path / "spool.log"
            self._cursor_path = self.path / "cursor"
            self._cursor = self._read_cursor()
            self._end = self._repair_tail()
        except OSError as exc:
            raise BrokerError(f"cannot open spool {self.path}: {exc.strerror or exc}") from None

    # -- state -----------------------------------------------------------------
    def _read_cursor(self) -> int:
        if not self._log.exists():
            self._cursor_path.unlink(missing_ok=True)  # a finished compaction left it behind
            return 0
        try:
            return int(self._cursor_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError:
            raise BrokerError(f"spool {self.path}: cursor file is not a number") from None

    def _repair_tail(self) -> int:
        """Return the end of the last complete frame, cutting off a torn tail left by a crash."""
        if not self._log.exists():
            return 0
        good = self._cursor
        with open(self._log, "r+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(good)
            while good + _FRAME.size <= size:
                length, crc = _FRAME.unpack(fh.read(_FRAME.size))
                body = fh.read(length)
                if len(body) != length or zlib.crc32(body) != crc:
                    break
                good += _FRAME.size + length
            if good != size:
                fh.truncate(good)
                os.fsync(fh.fileno())
        return good

    def __len__(self) -> int:
        """Return the number of records not yet acknowledged (reads the pending part of the file)."""
        return sum(1 for _ in self.pending())

    @property
    def empty(self) -> bool:
        """Return whether nothing waits to be sent."""
        return self._cursor >= self._end

    # -- writing ---------------------------------------------------------------
    def append(self, records: Iterable[tuple[bytes, bytes]]) -> int:
        """Append records durably (one fsync for the batch); return how many were appended."""
        buf = bytearray()
        n = 0
        for key, value in records:
            body = _KEYLEN.pack(len(key)) + key + value
            buf += _FRAME.pack(len(body), zlib.crc32(body)) + body
            n += 1
        if not n:
            return 0
        try:
            created = not self._log.exists()
            with open(self._log, "ab") as fh:
                fh.write(buf)
                fh.flush()
                os.fsync(fh.fileno())
            if created:
                _fsync_dir(self.path)
        except OSError as exc:
            raise BrokerError(f"cannot spool {n} event(s) to {self._log}: {exc.strerror or exc}") from None
        self._end += len(buf)
        return n

    # -- reading and acknowledging ---------------------------------------------
    def pending(self, limit: int | None = None) -> Iterator[tuple[int, bytes, bytes]]:
        """Yield (end offset, key, value) of unacknowledged records in order, at most ``limit``."""
        if self.empty:
            return
        with open(self._log, "rb") as fh:
            fh.seek(self._cursor)
            pos = self._cursor
            count = 0
            while pos < self._end and (limit is None or count < limit):
                length, _crc = _FRAME.unpack(fh.read(_FRAME.size))
                body = fh.read(length)
                pos += _FRAME.size + length
                (klen,) = _KEYLEN.unpack_from(body)
                yield pos, body[_KEYLEN.size : _KEYLEN.size + klen], body[_KEYLEN.size + klen :]
                count += 1

    def ack(self, end_offset: int) -> None:
        """Mark every record up to ``end_offset`` (as yielded by ``pending``) as delivered."""
        if end_offset <= self._cursor:
            return
        self._cursor = min(end_offset, self._end)
        if self._cursor >= self._end:
            self._compact()
            return
        tmp = self._cursor_path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            fh.write(str(self._cursor))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._cursor_path)
        _fsync_dir(self.path)

    def _compact(self) -> None:
        # Removing the log first is safe: a missing log means an empty spool whatever the cursor says.
        self._log.unlink(missing_ok=True)
        self._cursor_path.unlink(missing_ok=True)
        _fsync_dir(self.path)
        self._cursor = self._end = 0
