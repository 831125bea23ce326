"""Column tools of the file readers: fields as pyarrow columns, rules as masks, a rejection's message per row.

A reader takes a file's fields a column at a time and applies each of its rules to whole
columns: a rule is a mask of the rows it refuses. ``Rules`` keeps them in the order the format
states them; a row is refused by the first rule that refuses it, and only then is that row's own
text read back to phrase the message (file, line, field, value). Rules that depend on one
field's value alone (a Slurm state, a TRES string, a time limit, a budget path) are written as
functions of that value and applied once per distinct value (``per_value``); times of the fixed
``YYYY-MM-DD[T ]HH:MM:SS`` form, which are nearly all distinct, are read with numpy
(``times``), and any other form by ``parse_local_time``, once per distinct value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.common import EARLIEST_US, LATEST_US, ImportResult, Rejection, RowError, parse_local_time
from ledger.adapters.history import Histories
from ledger.log.avro_columns import Coded

__all__ = [
    "WHITESPACE",
    "Bools",
    "Ints",
    "Rules",
    "Seen",
    "codes_of",
    "group_of",
    "ints",
    "mask",
    "numbers",
    "per_value",
    "put_back",
    "repeats",
    "strip",
    "text",
    "time_at",
    "times",
    "unstood",
]

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
T = TypeVar("T")

# (every character ``str.isspace`` holds true for lies in the Basic Multilingual Plane, the last U+3000)
WHITESPACE = "".join(chr(c) for c in range(0x10000) if chr(c).isspace())
"""What ``str.strip`` takes off (Unicode whitespace and the separators \\x1c-\\x1f): ``strip`` takes the same."""

_US_PER_DAY = 86_400_000_000


# Text that UTF-8 cannot hold (a lone surrogate, which only a caller's own strings can carry: files
# are decoded) cannot enter a pyarrow column. It is read as a private-use character instead, which
# every rule treats alike (no digit, no space, no separator), and put back in what the reader keeps,
# so that the log's encoder refuses it naming the event and the value, as for any other reader.
_PRIVATE = {c: 0xF0000 + c - 0xD800 for c in range(0xD800, 0xE000)}
_BACK = {v: k for k, v in _PRIVATE.items()}


def text(values: Sequence[str]) -> tuple[pa.StringArray, bool]:
    """Return strings as a column, and whether lone surrogates had to be stood in for (``put_back``)."""
    try:
        return pa.array(values, pa.string()), False
    except UnicodeEncodeError:
        return pa.array([v.translate(_PRIVATE) for v in values], pa.string()), True


def put_back(histories: Histories, res: ImportResult, start: int) -> None:
    """Put back the lone surrogates ``text`` stood in for, in the histories and in the reasons given since ``start``.

    The text columns become Python strings (``Histories`` allows them): the log's encoder refuses
    such a value by name, as it refuses any other reader's.
    """

    def back(column: Any) -> Any:
        values = column.to_pylist() if isinstance(column, pa.Array | pa.ChunkedArray) else list(column)
        out = np.empty(len(values), dtype=object)
        for k, value in enumerate(values):
            out[k] = value.translate(_BACK)
        return out

    histories.workload_id = back(histories.workload_id)
    histories.user = back(histories.user) if not isinstance(histories.user, Coded) else Coded(
        histories.user.codes, [v.translate(_BACK) for v in histories.user.values])
    histories.budget = Coded(histories.budget.codes, [v.translate(_BACK) for v in histories.budget.values])
    histories.cluster = Coded(histories.cluster.codes, [v.translate(_BACK) for v in histories.cluster.values])
    hosts = histories.runs.hosts
    histories.runs.hosts = Coded(hosts.codes, [tuple(h.translate(_BACK) for h in t) for t in hosts.values])
    res.rejected[start:] = [Rejection(r.file, r.line, r.reason.translate(_BACK)) for r in res.rejected[start:]]


def repeats(ids: pa.StringArray, lines: Ints, seen: Seen) -> tuple[Bools, list[tuple[int, str]]]:
    """Return where a workload id was read before (in this chunk, or in an earlier one) and (line, reason) of each.

    The first row of an id is kept; each later one is refused naming the line of the first.
    """
    coded = pc.dictionary_encode(ids)
    codes = ints(coded.indices)
    firsts = np.unique(codes, return_index=True)[1] if len(codes) else np.zeros(0, np.int64)
    before = seen.first_lines(coded.dictionary.take(pa.array(codes[firsts])), lines[firsts])
    first_line = np.zeros(len(coded.dictionary), np.int64)
    first_line[codes[firsts]] = np.where(before > 0, before, lines[firsts])
    again: Bools = first_line[codes] != lines
    reasons = [
        (int(lines[r]), f"workload_id {ids[r].as_py()!r} already on line {first_line[codes[r]]}")
        for r in np.flatnonzero(again).tolist()
    ]
    return again, reasons


def unstood(res: ImportResult) -> None:
    """Put back the lone surrogates ``text`` stood in for in every reason given (a file read in chunks)."""
    res.rejected[:] = [Rejection(r.file, r.line, r.reason.translate(_BACK)) for r in res.rejected]


class Seen:
    """Text values met so far in a file, and the line each was first met on: to name a repeat however far back.

    A file is read a chunk at a time; a value is kept as a 128-bit digest (two 64-bit hashes, of the
    value and of the value behind a marker byte), not as text, so a file of any size keeps 24 bytes
    a value. Two values are taken as the same when their digests are: in a file of ten million
    distinct values the chance of one wrong match is below 10^-20.
    """

    def __init__(self) -> None:
        self._levels: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], Ints]] = []  # each sorted by hi
        self._db: Any = None

    def first_lines(self, values: pa.StringArray, lines: Ints) -> Ints:
        """Return the line each value (distinct within ``values``) was met on before, or 0; remember the new ones."""
        if not len(values):
            return np.zeros(0, np.int64)
        hi, lo = self._digests(values)
        order = np.argsort(hi)  # searched in order: each search starts near the last one's end (cache, not RAM)
        hi, lo, lines = hi[order], lo[order], lines[order]
        found = np.zeros(len(values), np.int64)
        for level_hi, level_lo, level_line in self._levels:
            at = np.minimum(np.searchsorted(level_hi, hi), len(level_hi) - 1)
            hit = (level_hi[at] == hi) & (found == 0)
            for r in np.flatnonzero(hit).tolist():  # (equal high halves: almost always the same value)
                k = int(at[r])
                while k < len(level_hi) and level_hi[k] == hi[r]:
                    if level_lo[k] == lo[r]:
                        found[r] = level_line[k]
                        break
                    k += 1
        new = found == 0
        self._add(hi[new], lo[new], lines[new])
        out = np.empty_like(found)
        out[order] = found
        return out

    def _add(self, hi: npt.NDArray[np.uint64], lo: npt.NDArray[np.uint64], lines: Ints) -> None:
        if not len(hi):
            return
        level = (hi, lo, lines)
        # levels of like size are merged: each value is moved about log2(values / chunk) times in all
        while self._levels and len(self._levels[-1][0]) <= 2 * len(level[0]):
            last = self._levels.pop()
            level = tuple(np.concatenate((a, b)) for a, b in zip(last, level, strict=True))  # type: ignore[assignment]
        order = np.argsort(level[0], kind="stable")  # (two sorted halves: merged in one pass)
        self._levels.append((level[0][order], level[1][order], level[2][order]))

    def _digests(self, values: pa.StringArray) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        if self._db is None:
            import duckdb

            self._db = duckdb.connect()
        self._db.register("seen_values", pa.table({"v": values}))
        try:
            got = self._db.execute("SELECT hash(v) AS hi, hash(chr(31) || v) AS lo FROM seen_values").fetchnumpy()
        finally:
            self._db.unregister("seen_values")
        return np.asarray(got["hi"], np.uint64), np.asarray(got["lo"], np.uint64)


def mask(arr: pa.Array | pa.ChunkedArray) -> Bools:
    """Return a pyarrow boolean column as a numpy mask (a null is False)."""
    out: Bools = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=np.bool_)
    return out


def ints(arr: pa.Array) -> Ints:
    """Return a pyarrow integer column as numpy int64."""
    out: Ints = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)
    return out


def strip(arr: pa.Array) -> pa.Array:
    """Return each string as ``str.strip`` leaves it."""
    return pc.utf8_trim(arr, characters=WHITESPACE)


def per_value(arr: pa.Array, fn: Callable[[str], T]) -> tuple[list[T | None], list[str | None], Ints]:
    """Apply ``fn`` once to each distinct value of a column; return (results, errors, each row's code).

    ``results[c]`` and ``errors[c]`` belong to the value of code c: the result, or the message of
    the RowError ``fn`` raised for it (then the result is None).
    """
    encoded = pc.dictionary_encode(arr)
    results: list[T | None] = []
    errors: list[str | None] = []
    for value in encoded.dictionary.to_pylist():
        try:
            results.append(fn(value))
            errors.append(None)
        except RowError as exc:
            results.append(None)
            errors.append(str(exc))
    return results, errors, ints(encoded.indices)


def numbers(arr: pa.Array, read: Callable[[str], int]) -> tuple[npt.NDArray[Any], list[str | None], Ints]:
    """Return (integers, errors, each row's error code) of a column of whole numbers.

    Plain ASCII digits (up to 18) are read a column at a time; any other value by ``read``, once
    per distinct value (its RowError, if any, is ``errors[code]``; code -1 where there is none).
    """
    digits = mask(pc.match_substring_regex(arr, "^[0-9]{1,18}$"))
    values: npt.NDArray[Any] = np.zeros(len(arr), np.int64)
    if digits.any():
        values[digits] = ints(pc.cast(arr.filter(pa.array(digits)), pa.int64()))
    code = np.full(len(arr), -1, np.int64)
    rest = np.flatnonzero(~digits)
    errors: list[str | None] = []
    if len(rest):
        results, errors, rest_code = per_value(arr.take(pa.array(rest, pa.int64())), read)
        got = [0 if r is None else r for r in results]
        if not all(-(1 << 62) < r < 1 << 62 for r in got):  # Python integers beyond 64 bits: kept whole
            values = values.astype(object)
        values[rest] = np.array(got, values.dtype)[rest_code]
        code[rest] = rest_code
    return values, errors, code


def codes_of(*columns: pa.Array) -> tuple[Ints, list[tuple[Any, ...]]]:
    """Return a code per row for the combination of several columns' values, and each code's values."""
    codes, first = _combined(columns)
    picked = [col.take(pa.array(first, pa.int64())).to_pylist() for col in columns]
    return codes, list(zip(*picked, strict=True))


def group_of(*columns: pa.Array) -> Ints:
    """Return a code per row for the combination of several columns' values (equal values, equal codes)."""
    return _combined(columns)[0]


def _combined(columns: Sequence[pa.Array]) -> tuple[Ints, Ints]:
    key = np.zeros(len(columns[0]), np.int64)
    for col in columns:
        encoded = pc.dictionary_encode(col)
        key = key * max(len(encoded.dictionary), 1) + ints(encoded.indices)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    codes: Ints = inverse.reshape(-1).astype(np.int64)
    return codes, first


class Rules:
    """The rules of a format in their order: a row is refused by the first one whose mask holds for it."""

    def __init__(self, n: int) -> None:
        self.why = np.full(n, -1, np.int64)
        self.phrases: list[Callable[[int], str]] = []

    def add(self, refused: Bools, phrase: Callable[[int], str]) -> None:
        """Add a rule: the rows it refuses, and how to phrase the reason for one of them (by row index)."""
        self.why[(self.why < 0) & refused] = len(self.phrases)
        self.phrases.append(phrase)

    @property
    def ok(self) -> Bools:
        """Return where no rule refused the row."""
        out: Bools = self.why < 0
        return out

    def refused(self) -> list[tuple[int, str]]:
        """Return (row index, reason) of every refused row, in row order."""
        rows = np.flatnonzero(self.why >= 0)
        return [(r, self.phrases[k](r)) for r, k in zip(rows.tolist(), self.why[rows].tolist(), strict=True)]


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
    """Return the zone's UTC offset at a wall-clock minute, as ``parse_local_time`` takes it (fold=0)."""
    wall = datetime(1970, 1, 1) + timedelta(minutes=minute)
    delta = wall.replace(tzinfo=zone).utcoffset()
    return 0 if delta is None else (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _fixed_times(arr: pa.Array, zone: tzinfo) -> tuple[Ints, Bools]:
    """Return (µs since the epoch, ok) of ``YYYY-MM-DD[T ]HH:MM:SS`` fields read in ``zone`` (fold=0).

    ok is False for any other form, a date or time that does not exist, and an instant outside
    the ledger's range: ``times`` reads those with ``parse_local_time``, which says why.
    """
    n = len(arr)
    us = np.zeros(n, np.int64)
    lengths = ints(pc.fill_null(pc.binary_length(arr), 0))
    ok = lengths == 19
    rows = np.flatnonzero(ok)
    if not len(rows):
        return us, ok
    fixed = pc.cast(arr if len(rows) == n else arr.filter(pa.array(ok)), pa.binary())
    if isinstance(fixed, pa.ChunkedArray):
        fixed = fixed.combine_chunks()
    _, offsets_buf, data_buf = fixed.buffers()
    first = int(np.frombuffer(offsets_buf, np.int32, count=1, offset=fixed.offset * 4)[0])
    # all 19 bytes long, one after the other: the column's bytes are a matrix of 19 columns
    m = np.frombuffer(data_buf, np.uint8, count=19 * len(rows), offset=first).reshape(-1, 19)
    d = m.astype(np.int32) - 48
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
        # an offset per distinct wall-clock minute (no zone changes its offset inside a minute)
        minutes = wall // 60_000_000
        uniq, inverse = np.unique(np.where(good, minutes, 0), return_inverse=True)
        offs = np.array([_offset_us(zone, int(u)) for u in uniq.tolist()], np.int64)
        wall = wall - offs[inverse.reshape(-1)]
    good &= (wall >= EARLIEST_US) & (wall < LATEST_US)
    us[rows] = np.where(good, wall, 0)
    ok[rows] = good
    return us, ok


def times(
    arr: pa.Array,
    zone: tzinfo | None,
    what: str,
    read: Callable[[str], int] | None = None,
    known: tuple[Ints, Bools] | None = None,
    skip: Bools | None = None,
) -> tuple[Ints, Bools, Callable[[int], str]]:
    """Return (µs since the epoch, refused, the reason for a refused row) of a column of times.

    ``known``: (µs, ok) of the rows a reader has read a column at a time already (Unix seconds,
    say). The fixed ISO form is read here in ``zone``, a column at a time; every other value by
    ``read`` (default: ``parse_local_time`` in ``zone``) once per distinct value, which also
    phrases the refusals. ``zone`` None: no fixed ISO form (the reader's times are not ISO).
    ``skip``: rows that hold no time (an empty field, "Unknown"): neither read nor refused.
    """
    if zone is not None:
        us, ok = _fixed_times(arr, zone)
    else:
        us, ok = np.zeros(len(arr), np.int64), np.zeros(len(arr), np.bool_)
    if known is not None:
        us = np.where(known[1], known[0], us)
        ok = ok | known[1]
    refused = np.zeros(len(arr), np.bool_)
    errors: dict[int, str] = {}
    rest = np.flatnonzero(~ok if skip is None else ~ok & ~skip)
    if len(rest):
        scalar = read or (lambda t: ev.to_us(parse_local_time(t, zone or UTC, what)))
        results, why, codes = per_value(arr.take(pa.array(rest, pa.int64())), scalar)
        us[rest] = np.array([0 if r is None else r for r in results], np.int64)[codes]
        bad = np.array([e is not None for e in why], np.bool_)[codes]
        refused[rest] = bad
        errors = {int(r): why[c] or "" for r, c in zip(rest[bad].tolist(), codes[bad].tolist(), strict=True)}
    return us, refused, errors.__getitem__


def time_at(us: int) -> str:
    """Return an instant as the messages name it (ISO 8601, UTC)."""
    return ev.from_us(us).isoformat()
