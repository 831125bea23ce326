"""Any CSV of jobs (Alibaba, Helios, ITP, a team's own export) to ledger events, through a column map.

``--map workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu`` names the
column that holds each ledger field. Fields:

==============  ========  ==================================================================
field           needed    meaning
==============  ========  ==================================================================
workload_id     yes       unique per row (a repeat is rejected: ids must stay idempotent)
submit          yes       submission time
gpus            yes       GPUs; 0 = not a GPU workload (skipped and counted); fractions rejected
start           no        first start; empty = never ran
end             no        end time; with an empty start, the workload was cancelled while waiting
duration        no        run seconds: gives the end when there is no end column, and ``work_s``
budget          no        budget path (``org/team/...``); else ``--budget``, else the cluster name
user            no        who submitted; else ``unknown``
outcome         no        succeeded/completed/pass, failed/timeout, cancelled/killed; else succeeded
priority        no        integer priority inside the budget
kind            no        batch, training, debug, interactive or other
min_runtime     no        protected minimum runtime in seconds; else ``min_runtime_s``
==============  ========  ==================================================================

**Times** are, in order of preference: seconds relative to ``epoch`` when one is given (the ITP
and Alibaba traces count from the collection start); otherwise plain numbers are Unix epoch
seconds and anything else ISO 8601 (read in ``tz`` when it carries no offset).

**No start column** (the ITP traces record arrivals and durations only): the file says nothing
about when, or whether, each job ran, so the import records submissions only, with
``work_s`` = duration, and does not invent starts. Such a log is a workload trace: replaying it
gives the waits a policy would cause; the file itself observed none.

**Reading.** A file is read a piece of whole lines at a time (``ledger.adapters.lines.SIZE``
bytes), so its size does not set the memory an import needs. A file without a quote character is
a row per line: its lines and fields are split by pyarrow; one with quotes (a field holding the
delimiter or a line break) is read by Python's ``csv`` module, ``ROWS`` rows at a time. Either
way every rule is applied to a chunk's columns (``ledger.adapters.columns``); a workload id
repeated anywhere in the file is named with the line it was first read on (``Seen``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.columns import (
    Bools,
    Ints,
    Rules,
    Seen,
    ints,
    mask,
    numbers,
    per_value,
    put_back,
    repeats,
    strip,
    text,
    times,
)
from ledger.adapters.common import (
    EARLIEST_US,
    LATEST_US,
    UTF8_BOM,
    Destination,
    ImportResult,
    RowError,
    check_time,
    parse_local_time,
)
from ledger.adapters.history import KINDS, OUTCOMES, Histories, Runs, checked
from ledger.adapters.lines import decoded, file_pieces, pieces_of, split_lines
from ledger.errors import ConfigError, InputError
from ledger.log.avro_columns import Coded

__all__ = [
    "FIELDS",
    "CsvOptions",
    "import_csv",
    "import_csv_bytes",
    "import_csv_file",
    "parse_column_map",
]

FIELDS = (
    "workload_id", "submit", "gpus", "start", "end", "duration", "budget", "user", "outcome", "priority",
    "kind", "min_runtime",
)  # fmt: skip
_REQUIRED = ("workload_id", "submit", "gpus")
_OUTCOMES: dict[str, ev.Outcome] = {
    **dict.fromkeys(("succeeded", "success", "completed", "complete", "pass", "passed", "ok", "0"), "succeeded"),
    **dict.fromkeys(("failed", "fail", "failure", "timeout", "error", "out_of_memory", "node_fail"), "failed"),
    **dict.fromkeys(("cancelled", "canceled", "killed", "terminated", "preempted"), "cancelled"),
}
_KINDS = frozenset(("batch", "training", "debug", "interactive", "other"))
_PATH = re.compile(r"^[^/\s]+(/[^/\s]+)*$")


def parse_column_map(text: str) -> dict[str, str]:
    """Parse 'field=COLUMN,field=COLUMN' into a dict; ConfigError naming an unknown field or a missing one."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, eq, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not eq or not column:
            raise ConfigError(f"--map item {item!r}: expected FIELD=COLUMN")
        if name not in FIELDS:
            raise ConfigError(f"--map field {name!r}: expected one of {', '.join(FIELDS)}")
        out[name] = column
    missing = [f for f in _REQUIRED if f not in out]
    if missing:
        raise ConfigError(f"--map lacks {', '.join(missing)} (needed: {', '.join(_REQUIRED)})")
    return out


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """How to read a CSV trace: the column map, the clock, and defaults for what the file lacks."""

    columns: dict[str, str] = field(default_factory=dict)
    tz: tzinfo = UTC
    epoch: str | None = None  # ISO time: the file's times are seconds after it
    cluster: str = "csv"
    budget: str | None = None
    delimiter: str = ","
    min_runtime_s: int = 3600


class _Reader:
    """What a file's header and the options fix: where each field is, the epoch, the default budget; how times read."""

    def __init__(self, header: list[str], opts: CsvOptions, file: str) -> None:
        names = [h.strip() for h in header]
        pos = {n: i for i, n in enumerate(names)}
        absent = [f"{f}={c}" for f, c in opts.columns.items() if c not in pos]
        if absent:
            raise InputError(f"{file}:1: no column for {', '.join(absent)} (the header has {', '.join(names)})")
        self.idx = _Columns(**{f: pos[c] for f, c in opts.columns.items()})
        self.hosts = (f"{opts.cluster}-unknown",)
        self.opts = opts
        self.width = len(names)
        self.epoch: datetime | None = None
        self.epoch_us = 0
        if opts.epoch is not None:
            try:
                self.epoch = parse_local_time(opts.epoch, opts.tz, "--epoch")
            except RowError as exc:
                raise ConfigError(str(exc)) from None
            self.epoch_us = ev.to_us(self.epoch)
        if not opts.cluster:
            raise ConfigError(f"--cluster {opts.cluster!r} is not a cluster name")
        budget = opts.budget or opts.cluster
        if not _PATH.match(budget):
            raise ConfigError(f"--budget {budget!r} is not a budget path like org/team")
        self.budget = budget
        self.seen = Seen()  # the workload ids read so far, and their lines

    def times(self, arr: pa.Array, what: str, skip: Bools | None = None) -> tuple[Ints, Bools, Callable[[int], str]]:
        """Return (µs, refused, the reason for a refused row) of a column of times, as ``time`` reads each."""
        seconds = mask(pc.match_substring_regex(arr, "^[0-9]{1,12}$"))  # whole seconds, the common case
        us = np.zeros(len(arr), np.int64)
        if seconds.any():
            us[seconds] = self.epoch_us + ints(pc.cast(arr.filter(pa.array(seconds)), pa.int64())) * 1_000_000
        seconds &= (us >= EARLIEST_US) & (us < LATEST_US)  # (out of range: ``time`` says why)
        zone = self.opts.tz if self.epoch is None else None  # the fixed ISO form, when no time is relative
        return times(arr, zone, what, lambda t: self.time(t, what), (us, seconds), skip)

    def time(self, text: str, what: str) -> int:
        """Return a time field as µs since the epoch: seconds after --epoch, Unix seconds, or ISO 8601."""
        if text.isdigit() and text.isascii():  # whole seconds, the common case: integer arithmetic only
            us = self.epoch_us + int(text) * 1_000_000
            if EARLIEST_US <= us < LATEST_US:
                return us  # (out of range: the general path below says why)
        if self.epoch is not None or _looks_numeric(text):
            seconds = _number(text, what)
            try:
                t = self.epoch + timedelta(seconds=seconds) if self.epoch else datetime.fromtimestamp(seconds, UTC)
            except (OverflowError, ValueError, OSError):
                raise RowError(f"{what} {text!r} lies outside {ev.EARLIEST:%Y}..{ev.LATEST:%Y}") from None
            return ev.to_us(check_time(t, what))
        return ev.to_us(parse_local_time(text, self.opts.tz, what))


@dataclass(frozen=True, slots=True)
class _Columns:
    """Position of each mapped field in a row (None when the map leaves it out)."""

    workload_id: int
    submit: int
    gpus: int
    start: int | None = None
    end: int | None = None
    duration: int | None = None
    budget: int | None = None
    user: int | None = None
    outcome: int | None = None
    priority: int | None = None
    kind: int | None = None
    min_runtime: int | None = None


def _looks_numeric(text: str) -> bool:
    return text.replace(".", "", 1).lstrip("-").isdigit()


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise RowError(f"{what} {text!r} is not a number of seconds") from None


def _whole(text: str, what: str) -> int:
    text = text.strip()
    if text.isdigit() and text.isascii():
        return int(text)
    try:
        x = float(text)
    except ValueError:
        raise RowError(f"{what} {text!r} is not a number") from None
    if x < 0 or not x.is_integer():
        raise RowError(f"{what} {text!r} is not a whole, non-negative number")
    return int(x)


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RowError(f"{what} {text!r} is not an integer") from None


ROWS = 1 << 17
"""Rows at a time when the csv module reads (a file with quotes, or lines given as strings)."""
_FIELD_LIMIT = 131_072  # the csv module's field_size_limit: a longer field is its error, so the module reads it


def import_csv(
    lines: Iterable[str], file: str, opts: CsvOptions, plain: bool = False, to: Destination | None = None
) -> ImportResult:
    """Read CSV lines (header first) and return the events they stand for, with the import summary.

    ``plain``: the text has no quote character, so each row is one line. ``to``: where the events go.
    """
    res = ImportResult("csv", file, to=to or Destination())
    rows = csv.reader(lines, delimiter=opts.delimiter)
    header = next(rows, None)
    if header is None:
        raise InputError(f"{file}:1: empty file (a header line is needed)")
    reader = _start(header, opts, res)
    table: list[list[str]] = []
    where: list[int] = []
    count = 1  # the header's line
    for row in rows:  # the csv module splits (quotes, line breaks inside them); line_num is where a row ends
        count += 1
        table.append(row)
        where.append(count if plain else rows.line_num)
        if len(table) == ROWS:
            _rows_of(table, np.array(where, np.int64), reader, res)
            table, where = [], []
    _rows_of(table, np.array(where, np.int64), reader, res)
    res.finish()
    return res


def _start(header: list[str], opts: CsvOptions, res: ImportResult) -> _Reader:
    reader = _Reader(header, opts, res.file)
    if "start" not in opts.columns:
        res.notes.append("no start column: submissions only (work_s from duration); the file observed no waits")
    if reader.epoch is not None:
        res.notes.append(f"times are seconds after {reader.epoch.isoformat()}")
    return reader


def _rows_of(table: list[list[str]], at: Ints, reader: _Reader, res: ImportResult) -> None:
    """Read rows the csv module split (each a list of fields) as a chunk."""
    found = np.fromiter(map(len, table), np.int64, len(table))
    blank = found == 0
    for r in np.flatnonzero(found == 1).tolist():
        blank[r] = not table[r][0].strip()  # a line of spaces
    good = np.flatnonzero(~blank & (found == reader.width))
    columns = list(zip(*(table[r] for r in good.tolist()), strict=True)) if len(good) else [()] * reader.width
    stood_in = False

    def column(k: int) -> pa.StringArray:
        nonlocal stood_in
        arr, mapped = text(columns[k])
        stood_in |= mapped
        return arr

    _chunk(found, blank, at, column, reader, res, lambda: stood_in)


def _chunk(
    found: Ints, blank: Bools, at: Ints, column: Callable[[int], pa.StringArray], reader: _Reader, res: ImportResult,
    stood_in: Callable[[], bool] = lambda: False,
) -> None:
    """Read one chunk of rows: ``found`` fields each (``blank`` rows are none), at lines ``at``.

    ``column(k)``: the k-th field of the rows that have the header's width, in order.
    """
    width = reader.width
    first_rejected = len(res.rejected)
    res.rows_read += int((~blank).sum())
    wrong = [(int(at[r]), f"expected {width} fields, found {found[r]}") for r in
             np.flatnonzero(~blank & (found != width)).tolist()]  # fmt: skip
    good = np.flatnonzero(~blank & (found == width))
    histories, refused = _histories(column, at[good], reader, res)
    for line, reason in sorted(wrong + refused):
        res.reject(line, reason)
    if stood_in():
        put_back(histories, res, first_rejected)
    res.add_histories(histories, "csv")


def import_csv_bytes(data: bytes, file: str, opts: CsvOptions, to: Destination | None = None) -> ImportResult:
    """Read a CSV file's bytes (UTF-8; a byte-order mark before the header is skipped)."""
    data = data.removeprefix(UTF8_BOM)  # Excel's "CSV UTF-8" puts a byte-order mark before the header
    return _import_pieces(pieces_of(data), b'"' not in data, file, opts, to)


def import_csv_file(path: str | Path, opts: CsvOptions, to: Destination | None = None) -> ImportResult:
    """Read a CSV trace file, a chunk at a time."""
    with open(path, "rb") as fh:
        bom = fh.read(len(UTF8_BOM)) == UTF8_BOM
        quoted = any(b'"' in piece for piece, _ in file_pieces(fh, len(UTF8_BOM) if bom else 0))
        return _import_pieces(file_pieces(fh, len(UTF8_BOM) if bom else 0), not quoted, str(path), opts, to)


def _import_pieces(
    pieces: Iterator[tuple[bytes, int]], plain: bool, file: str, opts: CsvOptions, to: Destination | None
) -> ImportResult:
    """Read a file given as pieces of whole lines: split by pyarrow when it has no quotes, else by the csv module."""
    if not plain:
        return import_csv(_text_lines(pieces), file, opts, to=to)
    csv.reader([], delimiter=opts.delimiter)  # the module's own complaint about a delimiter it cannot take
    res = ImportResult("csv", file, to=to or Destination())
    reader: _Reader | None = None
    line = 1  # the line before the piece's first
    for piece, offset in pieces:
        lines = split_lines(piece, offset)
        if reader is None:
            if not len(lines):
                continue
            header = next(csv.reader([lines[0].as_py()], delimiter=opts.delimiter), [])
            reader = _start(header, opts, res)
            lines = lines.slice(1)
        if b"\0" in piece or int(pc.max(pc.utf8_length(lines)).as_py() or 0) > _FIELD_LIMIT:
            table = list(csv.reader(lines.to_pylist(), delimiter=opts.delimiter))  # its error, as it words it
            _rows_of(table, line + 1 + np.arange(len(table), dtype=np.int64), reader, res)
        else:
            _split_rows(lines, line + 1, reader, res)
        line += len(lines)
    if reader is None:
        raise InputError(f"{file}:1: empty file (a header line is needed)")
    res.finish()
    return res


def _split_rows(lines: pa.StringArray, first: int, reader: _Reader, res: ImportResult) -> None:
    """Read lines of a file without quotes as a chunk: the fields are what lies between the delimiters."""
    fields = pc.split_pattern(lines, reader.opts.delimiter)
    offsets = ints(fields.offsets)
    found = np.diff(offsets)
    found[mask(pc.equal(lines, ""))] = 0  # the csv module reads an empty line as no field at all
    blank = found == 0
    single = np.flatnonzero(found == 1)
    if len(single):
        blank[single] = mask(pc.equal(strip(lines.take(pa.array(single, pa.int64()))), ""))  # a line of spaces
    good = offsets[:-1][~blank & (found == reader.width)]
    values = fields.values

    def column(k: int) -> pa.StringArray:
        return values.take(pa.array(good + k))

    _chunk(found, blank, first + np.arange(len(lines), dtype=np.int64), column, reader, res)


def _text_lines(pieces: Iterator[tuple[bytes, int]]) -> Iterator[str]:
    """Yield the lines of pieces of UTF-8 text as ``open(..., newline="")`` does (line breaks kept)."""
    for piece, offset in pieces:
        yield from io.StringIO(decoded(piece, offset), newline="")


def _histories(
    col_at: Callable[[int], pa.StringArray], line: Ints, reader: _Reader, res: ImportResult
) -> tuple[Histories, list[tuple[int, str]]]:
    """Return the histories of the rows the rules keep (``line``: each row's), and (line, reason) of the others.

    The rules are applied a column at a time, in the order they are stated; a row is refused by
    the first that refuses it (``Rules``). Rows of 0 GPUs are counted and left out; a repeated
    workload id is refused naming the line it was first read on; then the schema's bounds.
    """
    n = len(line)
    empty = pa.nulls(n, pa.string()).fill_null("")
    i = reader.idx

    def col(k: int | None) -> pa.StringArray:
        """Return a mapped field's column, stripped (an unmapped field is empty)."""
        return empty if k is None else strip(col_at(k))

    rules = Rules(n)
    wid = col(i.workload_id)
    rules.add(mask(pc.equal(wid, "")), lambda r: "workload_id is empty")
    gpus, errors, code = numbers(col(i.gpus), lambda t: _whole(t, "gpus"))
    rules.add(_failed(errors, code), lambda r: str(errors[code[r]]))
    live = gpus != 0  # a row of 0 GPUs is no GPU workload: skipped and counted, not read further
    t_submit, t_start, t_end = col(i.submit), col(i.start), col(i.end)
    submit, bad, why = reader.times(t_submit, "submit")
    rules.add(bad & live, why)
    has_start, has_end = ~mask(pc.equal(t_start, "")), ~mask(pc.equal(t_end, ""))
    start, bad, why = reader.times(t_start, "start", ~has_start)
    rules.add(bad & has_start & live, why)
    end, bad, why = reader.times(t_end, "end", ~has_end)
    rules.add(bad & has_end & live, why)
    t_duration = col(i.duration)
    has_duration = ~mask(pc.equal(t_duration, ""))
    duration, d_errors, d_code = numbers(t_duration, lambda t: _whole(t, "duration") if t else 0)
    rules.add(_failed(d_errors, d_code) & has_duration & live, lambda r: str(d_errors[d_code[r]]))
    rules.add(
        has_start & (start < submit) & live, lambda r: f"start {t_start[r]} is before submit {t_submit[r]}"
    )
    end = np.where(has_end, end, start + duration * 1_000_000)  # a duration gives the end of a run
    ended = has_end | (has_start & has_duration)
    rules.add(has_start & ended & (end < start) & live, lambda r: f"end {t_end[r]} is before start {t_start[r]}")
    rules.add(
        ~has_start & has_end & (end < submit) & live, lambda r: f"end {t_end[r]} is before submit {t_submit[r]}"
    )
    t_outcome = col(i.outcome)
    outcomes, o_errors, o_code = per_value(t_outcome, _outcome)
    rules.add(_refused(o_errors, o_code) & live, lambda r: str(o_errors[o_code[r]]))
    budget = col(i.budget)
    budget = pc.if_else(pc.equal(budget, ""), pa.scalar(reader.budget), budget)
    budgets, b_errors, b_code = per_value(budget, _budget)
    rules.add(_refused(b_errors, b_code) & live, lambda r: str(b_errors[b_code[r]]))
    kind = col(i.kind)
    kinds, k_errors, k_code = per_value(pc.if_else(pc.equal(kind, ""), pa.scalar("batch"), kind), _kind)
    rules.add(_refused(k_errors, k_code) & live, lambda r: str(k_errors[k_code[r]]))
    t_min = col(i.min_runtime)
    min_rt, m_errors, m_code = numbers(t_min, lambda t: _whole(t, "min_runtime") if t else reader.opts.min_runtime_s)
    rules.add(_failed(m_errors, m_code) & live, lambda r: str(m_errors[m_code[r]]))
    priority, p_errors, p_code = numbers(col(i.priority), lambda t: _integer(t, "priority") if t else 0)
    rules.add(_failed(p_errors, p_code) & live, lambda r: str(p_errors[p_code[r]]))
    refused = [(int(line[r]), reason) for r, reason in rules.refused()]
    # it never ran: whatever the file says, it left the queue unrun; a run that ended succeeded unless told
    said = np.array([OUTCOMES.index(v or "succeeded") for v in outcomes] + [0], np.int64)[o_code]
    outcome = np.where(ended, np.where(has_start, said, OUTCOMES.index("cancelled")), -1)
    worked = has_start & ended & (outcome == 0)
    work_s = np.where(has_duration, duration, np.where(worked, (end - start) // 1_000_000, -1))
    zero = rules.ok & ~live
    if zero.any():
        res.skipped["0 GPUs (not a GPU workload)"] += int(zero.sum())
    keep = np.flatnonzero(rules.ok & live)
    again, repeated = repeats(wid.take(pa.array(keep, pa.int64())), line[keep], reader.seen)
    refused += repeated
    keep = keep[~again]
    at = pa.array(keep, pa.int64())
    user = col(i.user)
    user = pc.dictionary_encode(pc.if_else(pc.equal(user, ""), pa.scalar("unknown"), user).take(at))
    ran = np.flatnonzero(has_start[keep])
    runs = Runs.of_none(len(ran), reader.hosts)
    runs.of, runs.start, runs.end, runs.ended = ran, start[keep][ran], end[keep][ran], ended[keep][ran]
    histories = Histories(
        cluster=Coded(np.zeros(len(keep), np.int64), [reader.opts.cluster]), workload_id=wid.take(at),
        submit=submit[keep], budget=Coded(b_code[keep], [b or "" for b in budgets]),
        user=Coded(ints(user.indices), user.dictionary.to_pylist()), gpus=gpus[keep], min_runtime_s=min_rt[keep],
        resumable=np.zeros(len(keep), np.bool_), outcome=outcome[keep], end=np.where(ended, end, 0)[keep],
        nodes=np.zeros(len(keep), np.int64), priority=priority[keep],
        kind=np.array([KINDS.index(k) if k else 0 for k in kinds], np.int64)[k_code[keep]], work_s=work_s[keep],
        rank=line[keep], runs=runs,
    )  # fmt: skip
    histories, bounds = checked(histories)
    refused += [(int(line[keep[r]]), reason) for r, reason in bounds]
    res.workloads += len(histories)
    return histories, refused


def _refused(errors: list[str | None], codes: Ints) -> Bools:
    """Return where a value's rule refused it."""
    out: Bools = np.array([e is not None for e in errors], np.bool_)[codes]
    return out


def _failed(errors: list[str | None], codes: Ints) -> Bools:
    """Return where ``numbers`` read a value that its rule refused."""
    out: Bools = np.array([e is not None for e in [*errors, None]], np.bool_)[codes]  # (code -1: none)
    return out


def _outcome(text: str) -> ev.Outcome | None:
    """Return the outcome a field names (None when empty); RowError if it names none."""
    if not text:
        return None
    outcome = _OUTCOMES.get(text.lower())
    if outcome is None:
        raise RowError(f"outcome {text!r} is not one of {', '.join(sorted(set(_OUTCOMES)))}")
    return outcome


def _budget(path: str) -> str:
    if not _PATH.match(path):
        raise RowError(f"budget {path!r} is not a budget path like org/team")
    return path


def _kind(kind: str) -> ev.WorkloadKind:
    if kind not in _KINDS:
        raise RowError(f"kind {kind!r} is not one of {', '.join(sorted(_KINDS))}")
    return kind  # type: ignore[return-value]
