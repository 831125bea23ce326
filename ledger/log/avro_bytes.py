"""The Avro byte helpers every encoder calls: zig-zag varints, strings, timestamps; compiled with mypyc.

The generated record encoders (``ledger.log.avro_encode``, ``ledger.log.avro_codegen``), the replay's
log writer and the importers call these for every value that is not a one-byte number, so they are
compiled with the log's generated encoders where a C compiler is present (``ledger/buildcheck.py``);
the Python source is the same code, and gives the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "BOOL",
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "MICROS",
    "MILLIS",
    "ONE",
    "not_a",
    "out_of_range",
    "pack_double",
    "pack_float",
    "string_bytes",
    "time_bytes",
    "timestamp",
    "varint",
    "zigzag_bytes",
]

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

# --- zig-zag varints -------------------------------------------------------------------------------
# Avro longs are zig-zag encoded, then written 7 bits a byte, low bits first. A Python loop over
# single bytes costs about 0.8 µs for a timestamp (8 bytes); tables of 14-bit pieces halve that,
# and timestamps close together share everything above bit 28, so that tail is cached.

ONE: Final[tuple[bytes, ...]] = tuple(bytes((i,)) for i in range(128))
# Filled at the first varint of two bytes or more, not at import: readers never need them.
_MID: Final[list[bytes]] = []  # 14 bits with more to follow
_LAST: Final[list[bytes]] = []  # 128 <= i < 2**14: the last two bytes
_HIGH: Final[dict[int, bytes]] = {}


def _fill_tables() -> None:
    # Built aside and put in place with one slice assignment each (atomic), _LAST last: threads
    # encoding at once may both build them, but none ever sees a half-filled table.
    mid = [bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14)]
    last = [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(1 << 14)]
    _MID[:] = mid
    _LAST[:] = last


def _spread(n: int) -> bytes:
    """Return the varint bytes of an unsigned n (no cache)."""
    if n < 0x80:
        return ONE[n]
    if n < 0x4000:
        return _LAST[n]
    out = _MID[n & 0x3FFF]
    n >>= 14
    while n >= 0x4000:
        out += _MID[n & 0x3FFF]
        n >>= 14
    return out + (ONE[n] if n < 0x80 else _LAST[n])


def varint(n: int) -> bytes:
    """Return the Avro varint bytes of an already zig-zagged, non-negative n."""
    if n < 0x80:
        return ONE[n]
    if not _LAST:
        _fill_tables()
    if n < 0x10000000:
        return _spread(n)
    high = n >> 28
    tail = _HIGH.get(high)
    if tail is None:
        if len(_HIGH) >= 4096:  # bounded: random large numbers must not grow it without end
            _HIGH.clear()
        tail = _HIGH[high] = _spread(high)
    return _MID[n & 0x3FFF] + _MID[(n >> 14) & 0x3FFF] + tail


def zigzag_bytes(n: int) -> bytes:
    """Return the Avro bytes of an int or long (zig-zag, then varint)."""
    return varint((n << 1) ^ (n >> 63))


def string_bytes(text: str) -> bytes:
    """Return the Avro bytes of a string (its UTF-8 length, then the UTF-8)."""
    data = text.encode()
    return varint(len(data) << 1) + data


# --- timestamps ------------------------------------------------------------------------------------

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)  # the value fastavro's arithmetic subtracts


def timestamp(value: Any, scale: int) -> int:
    """Return a time as integer microseconds (scale 1) or milliseconds (scale 1000) since the epoch."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("a time without a time zone; give an aware datetime or integer microseconds")
        delta: timedelta = value - _EPOCH
        # fastavro's own arithmetic, so the bytes match: whole seconds, then the microseconds.
        if scale == 1:
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000
    if value.__class__ is int:
        n: int = value
        return n
    raise TypeError(f"expected integer time or an aware datetime, got {type(value).__name__}")


# The bytes of recent times, by scale: the generated encoders look a time up here before calling
# time_bytes (events carry many equal times: a decision, the start it causes, its effective time).
MICROS: Final[dict[Any, bytes]] = {}
MILLIS: Final[dict[Any, bytes]] = {}


def time_bytes(value: Any, scale: int) -> bytes:
    """Return the varint bytes of a timestamp (integer, or aware datetime), remembering them for next time."""
    n = timestamp(value, scale)
    if not LONG_MIN <= n <= LONG_MAX:
        raise out_of_range("long")
    data = varint((n << 1) ^ (n >> 63))
    cache = MICROS if scale == 1 else MILLIS
    if len(cache) >= 8192:  # bounded; a batch's times mostly cluster, so recent ones are what repeats
        cache.clear()
    cache[value] = data
    return data


# --- what the generated encoders raise and write -----------------------------------------------------


def out_of_range(kind: str) -> OverflowError:
    """Return the error for a whole number that does not fit an Avro int or long."""
    bits = 32 if kind == "int" else 64
    return OverflowError(f"does not fit an Avro {kind} ({bits}-bit signed)")


def not_a(kind: str, value: Any) -> TypeError:
    """Return the error for a value of the wrong Python type."""
    return TypeError(f"expected {kind}, got {type(value).__name__}")


BOOL: Final[dict[Any, bytes]] = {True: b"\x01", False: b"\x00"}
pack_double: Final[Callable[[Any], bytes]] = struct.Struct("<d").pack
pack_float: Final[Callable[[Any], bytes]] = struct.Struct("<f").pack
