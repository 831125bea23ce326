"""Column-wise pieces of the importers' fast path: reading a file's columns, fixed-form times, Avro bytes.

The per-row readers (``slurm``, ``csv_trace``) define every rule. The fast path reads a whole
file's columns at once (pyarrow) and applies the common case of those rules a column at a time
(numpy); a row it cannot decide that way is handed to the per-row reader whole. The helpers here
never reject anything: each returns values and an ``ok`` mask, and a row whose mask is False is
simply not fast. Rules that depend on a field's value alone (a state, a TRES string, a node list)
are applied by calling the per-row function once per distinct value (``per_value``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ledger.adapters.common import EARLIEST_US, LATEST_US

__all__ = [
    "Bools",
    "Ints",
    "avro_strings",
    "bools",
    "clean",
    "clean_or_empty",
    "clean_values",
    "digits",
    "fixed_times",
    "join",
    "per_value",
    "read_columns",
    "strings_equal",
    "varints",
    "zigzag",
]

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
T = TypeVar("T")

_US_PER_DAY = 86_400_000_000
# A field whose ends are printable ASCII other than the space: ``str.strip`` leaves it as it is
# (Python strips Unicode whitespace and the separators \x1c-\x1f too: such a field is not fast).
_CLEAN = r"^[!-~](.*[!-~])?$"
_CLEAN_OR_EMPTY = r"^([!-~](.*[!-~])?)?$"


def read_columns(
    data: bytes, names: Sequence[str], delimiter: str, quoted: bool, skip_rows: int, only: Sequence[str] = ()
) -> tuple[pa.Table, Ints, list[int]] | None:
    """Return the file's rows as string columns named ``names``, each row's line number, and the lines of other widths.

    ``only``: the columns to read (all when empty); the others are split off but neither checked
    as UTF-8 nor kept, so only a reader that decodes with errors="replace" (sacct's) may use it.

    None when pyarrow cannot read the file as plainly split lines (bad UTF-8, a lone carriage
    return, a quoted line break): the fast path must never misplace a line number, and a line
    it leaves out (another number of fields) must be one the per-row reader gets.
    """
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # the per-row readers split lines on a lone \r too: not worth mirroring
    lines = int(np.count_nonzero(np.frombuffer(data, np.uint8) == 10)) + (0 if data.endswith(b"\n") else 1)
    other: list[int] = []

    def set_aside(row: Any) -> str:
        other.append(row.number)
        return "skip"

    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=list(names), skip_rows=skip_rows, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter,
                quote_char='"' if quoted else False,
                double_quote=quoted,
                ignore_empty_lines=False,
                invalid_row_handler=set_aside,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                include_columns=list(only),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError, ValueError):
        return None  # bad UTF-8, ...: the per-row reader says what
    if table.num_rows + len(other) != lines - skip_rows or any(k <= skip_rows for k in other):
        return None
    line = np.ones(lines + 1, np.bool_)
    line[: skip_rows + 1] = False
    line[other] = False
    return table.combine_chunks(), np.flatnonzero(line).astype(np.int64), sorted(other)


def column(table: pa.Table, name: str) -> pa.StringArray:
    """Return one column of a table from ``read_columns`` as a single array."""
    return table.column(name).chunk(0) if table.num_rows else pa.array([], pa.string())


def _mask(arr: pa.Array) -> Bools:
    out: Bools = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.bool_)
    return out


def clean(arr: pa.Array) -> Bools:
    """Return where a field is non-empty and unchanged by ``str.strip`` (its ends printable ASCII)."""
    return _mask(pc.match_substring_regex(arr, _CLEAN))


def clean_values(arr: pa.Array, empty_ok: bool = False) -> Bools:
    """Return ``clean`` (or ``clean_or_empty``) of a column with few distinct values, checked once per value."""
    encoded = pc.dictionary_encode(arr)
    valid = _mask(pc.match_substring_regex(encoded.dictionary, _CLEAN_OR_EMPTY if empty_ok else _CLEAN))
    out: Bools = valid[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)]
    return out


def clean_or_empty(arr: pa.Array) -> Bools:
    """Return where a field is empty or unchanged by ``str.strip``."""
    return _mask(pc.match_substring_regex(arr, _CLEAN_OR_EMPTY))


def strings_equal(arr: pa.Array, value: str) -> Bools:
    """Return where a field is exactly ``value``."""
    return _mask(pc.equal(arr, pa.scalar(value, pa.string())))


def bools(values: Bools) -> pa.Array:
    """Return a numpy mask as a pyarrow boolean array (for ``filter`` and ``if_else``)."""
    return pa.array(values, pa.bool_())


def digits(arr: pa.Array, max_len: int = 12) -> tuple[Ints, Bools]:
    """Return (value, ok) of fields that are 1..``max_len`` ASCII digits (what ``isdigit() and isascii()`` take)."""
    ok = _mask(pc.match_substring_regex(arr, f"^[0-9]{{1,{max_len}}}$"))
    values = np.zeros(len(arr), np.int64)
    if ok.any():
        values[ok] = np.asarray(pc.cast(arr.filter(bools(ok)), pa.int64()).to_numpy(zero_copy_only=False))
    return values, ok


_DIGIT_AT = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
_DAYS_IN = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)


def _days_from_civil(y: Ints, m: Ints, d: Ints) -> Ints:
    """Return days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm; years >= 1)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    out: Ints = era * 146_097 + doe - 719_468
    return out


def _offset_us(zone: tzinfo, minute: int) -> int:
    """Return the zone's UTC offset at a wall-clock minute, as ``WallClock`` takes it (fold=0)."""
    wall = datetime(1970, 1, 1) + timedelta(minutes=minute)
    delta = wall.replace(tzinfo=zone).utcoffset()
    return 0 if delta is None else (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def fixed_times(arr: pa.Array, zone: tzinfo) -> tuple[Ints, Bools]:
    """Return (µs since the epoch, ok) of ``YYYY-MM-DD[T ]HH:MM:SS`` fields read in ``zone`` as ``WallClock.us`` does.

    ok is False for any other form, a date or time that does not exist, and an instant outside
    the ledger's range: the per-row reader decides those (and names them).
    """
    n = len(arr)
    us = np.zeros(n, np.int64)
    if arr.type != pa.string() or arr.null_count:
        return us, np.zeros(n, np.bool_)
    lengths = np.asarray(pc.binary_length(arr).to_numpy(zero_copy_only=False), np.int64)
    ok = lengths == 19
    rows = np.flatnonzero(ok)
    if not len(rows):
        return us, ok
    fixed = arr if len(rows) == n else arr.filter(bools(ok))
    _, offsets_buf, data_buf = fixed.buffers()
    first = int(np.frombuffer(offsets_buf, np.int32, count=1, offset=fixed.offset * 4)[0])
    # all 19 bytes long, one after the other: the column's bytes are a matrix of 19 columns
    m = np.frombuffer(data_buf, np.uint8, count=19 * len(rows), offset=first).reshape(-1, 19)
    d = m.astype(np.int32) - 48  # (32 bits hold every field; µs are computed in 64 below)
    good = (m[:, _DIGIT_AT] - np.uint8(48) <= 9).all(axis=1)  # (wraps below '0': also > 9)
    good &= (m[:, 4] == 45) & (m[:, 7] == 45) & ((m[:, 10] == 84) | (m[:, 10] == 32)) & (m[:, 13] == 58)
    good &= m[:, 16] == 58
    year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
    month = d[:, 5] * 10 + d[:, 6]
    day = d[:, 8] * 10 + d[:, 9]
    hour = d[:, 11] * 10 + d[:, 12]
    minute = d[:, 14] * 10 + d[:, 15]
    second = d[:, 17] * 10 + d[:, 18]
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    good &= (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (hour < 24) & (minute < 60) & (second < 60)
    good &= day <= _DAYS_IN[np.clip(month, 0, 12)] + (leap & (month == 2))
    days = _days_from_civil(year.astype(np.int64), month.astype(np.int64), day.astype(np.int64))
    wall = days * _US_PER_DAY + ((hour * 60 + minute) * 60 + second).astype(np.int64) * 1_000_000
    if zone is not UTC:
        minutes = wall // 60_000_000
        uniq, inverse = np.unique(np.where(good, minutes, 0), return_inverse=True)
        offs = np.array([_offset_us(zone, int(u)) for u in uniq], np.int64)
        wall = wall - offs[inverse.reshape(-1)]
    good &= (wall >= EARLIEST_US) & (wall < LATEST_US)
    us[rows] = np.where(good, wall, 0)
    ok[rows] = good
    return us, ok


def per_value(arr: pa.Array, fn: Callable[[str], T]) -> tuple[list[T | None], Bools, Ints]:
    """Apply ``fn`` to each distinct value of a column once; return (results, valid, each row's code).

    ``results[c]`` and ``valid[c]`` belong to the value of code c; a value for which ``fn`` raises
    ValueError (RowError is one) is not valid: its rows are not fast.
    """
    encoded = pc.dictionary_encode(arr)
    values = encoded.dictionary.to_pylist()
    results: list[T | None] = []
    valid = np.ones(len(values), np.bool_)
    for k, value in enumerate(values):
        try:
            results.append(fn(value))
        except ValueError:
            results.append(None)
            valid[k] = False
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)
    return results, valid, codes


def zigzag(values: Ints) -> npt.NDArray[np.uint64]:
    """Return Avro's zigzag form of 64-bit integers."""
    v = values.astype(np.int64)
    out: npt.NDArray[np.uint64] = ((v << 1) ^ (v >> 63)).view(np.uint64)
    return out


def varints(values: npt.NDArray[np.uint64], prefix: bytes = b"", suffix: bytes = b"") -> pa.Array:
    """Return the Avro varint bytes of each unsigned value (feed it ``zigzag`` for ints and longs).

    ``prefix`` and ``suffix`` are written before and after each: constant bytes next to a varint
    cost nothing here, and a part less for every later ``join``.
    """
    v = values.astype(np.uint64)
    n = len(v)
    count = np.ones(n, np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        count += rest > 0
        rest >>= np.uint64(7)
    width = int(count.max()) if n else 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((v[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    position = np.arange(width)[None, :]
    groups |= np.where(position < count[:, None] - 1, np.uint8(0x80), np.uint8(0)).astype(np.uint8)
    if prefix or suffix:
        groups = np.hstack(
            [
                np.broadcast_to(np.frombuffer(prefix, np.uint8), (n, len(prefix))),
                groups,
                np.broadcast_to(np.frombuffer(suffix, np.uint8), (n, len(suffix))),
            ]
        )
    extra = len(prefix) + len(suffix)
    if not n or int(count.min()) == width:  # all of one length (times, mostly): the matrix is the bytes
        data = groups.reshape(-1)
        offsets = np.arange(0, n * (width + extra) + 1, width + extra, dtype=np.int32)
    else:
        keep = np.hstack(
            [np.ones((n, len(prefix)), np.bool_), position < count[:, None], np.ones((n, len(suffix)), np.bool_)]
        )
        data = groups[keep]
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(count + extra, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])


def avro_strings(arr: pa.Array) -> pa.Array:
    """Return the Avro bytes of each string (its UTF-8 length as a varint, then the bytes)."""
    lengths = np.asarray(pc.binary_length(arr).to_numpy(zero_copy_only=False), np.int64)
    return join(varints(zigzag(lengths)), pc.cast(arr, pa.binary()))


def join(*parts: Any) -> pa.Array:
    """Concatenate byte arrays (or bytes, repeated on every row) row by row."""
    args = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*args, pa.scalar(b"", pa.binary()))
