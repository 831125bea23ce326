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
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.columns import Bools, Ints, Rules, ints, mask, numbers, per_value, put_back, strip, text, times
from ledger.adapters.common import (
    EARLIEST_US,
    LATEST_US,
    UTF8_BOM,
    ImportResult,
    Rejection,
    RowError,
    check_time,
    parse_local_time,
)
from ledger.adapters.history import History, Run, add_histories
from ledger.errors import ConfigError, InputError
from ledger.gcpause import paused_gc

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


def import_csv(lines: Iterable[str], file: str, opts: CsvOptions, plain: bool = False) -> ImportResult:
    """Read CSV lines (header first) and return the events they stand for, with the import summary.

    ``plain``: the text has no quote character, so each row is one line.
    """
    res = ImportResult("csv", file)
    rows = csv.reader(lines, delimiter=opts.delimiter)
    header = next(rows, None)
    if header is None:
        raise InputError(f"{file}:1: empty file (a header line is needed)")
    reader = _Reader(header, opts, file)
    if "start" not in opts.columns:
        res.notes.append("no start column: submissions only (work_s from duration); the file observed no waits")
    if reader.epoch is not None:
        res.notes.append(f"times are seconds after {reader.epoch.isoformat()}")
    with paused_gc():  # many small objects, no cycles: see paused_gc
        if plain:  # no quotes: a row per line (blank ones too), the header on the first
            table = list(rows)
            at = np.arange(2, len(table) + 2, dtype=np.int64)
        else:
            table, where = [], []
            for row in rows:  # the csv module splits (quotes, line breaks inside them); line_num is where a row ends
                table.append(row)
                where.append(rows.line_num)
            at = np.array(where, np.int64)
        found, stood_in = _histories(table, at, reader, res)
        add_histories(res, found, opts.cluster, "csv")
        if stood_in:
            put_back(res.histories, res)
        res.rejected.sort(key=_line)  # the rules' refusals and the repeated ids', in line order
    return res


def _line(r: Rejection) -> int:
    return r.line


def import_csv_bytes(data: bytes, file: str, opts: CsvOptions) -> ImportResult:
    """Read a CSV file's bytes (UTF-8; a byte-order mark before the header is skipped)."""
    data = data.removeprefix(UTF8_BOM)  # Excel's "CSV UTF-8" puts a byte-order mark before the header
    text = data.decode("utf-8")
    return import_csv(io.StringIO(text, newline=""), file, opts, plain='"' not in text)


def import_csv_file(path: str | Path, opts: CsvOptions) -> ImportResult:
    """Read a CSV trace file."""
    return import_csv_bytes(Path(path).read_bytes(), str(path), opts)


def _histories(
    table: list[list[str]], at: Ints, reader: _Reader, res: ImportResult
) -> tuple[list[tuple[int, History | None]], bool]:
    """Return (line, history) of each row the rules keep (None: 0 GPUs), and whether ``text`` stood in for any.

    The others are refused in ``res``.
    The rules are applied a column at a time, in the order they are stated; a row is refused by
    the first that refuses it (``Rules``).
    """
    width = reader.width
    found = np.fromiter(map(len, table), np.int64, len(table))
    blank = found == 0
    for r in np.flatnonzero(found == 1).tolist():
        blank[r] = not table[r][0].strip()  # a line of spaces
    res.rows_read += int((~blank).sum())
    for r in np.flatnonzero(~blank & (found != width)).tolist():
        res.reject(int(at[r]), f"expected {width} fields, found {found[r]}")
    good = np.flatnonzero(~blank & (found == width))
    line = at[good]
    n = len(good)
    columns = list(zip(*(table[r] for r in good.tolist()), strict=True)) if n else [()] * width
    empty = pa.nulls(n, pa.string()).fill_null("")
    i = reader.idx
    stood_in = False

    def col(k: int | None) -> pa.StringArray:
        """Return a mapped field's column, stripped (an unmapped field is empty)."""
        nonlocal stood_in
        if k is None:
            return empty
        arr, mapped = text(columns[k])
        stood_in |= mapped
        return strip(arr)

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
    # it never ran: whatever the file says, it left the queue unrun; a run that ended succeeded unless told
    said = [v or "succeeded" for v in outcomes]
    outcome = [("cancelled" if not s else said[c]) if e else None for c, s, e in zip(
        o_code.tolist(), has_start.tolist(), ended.tolist(), strict=True)]  # fmt: skip
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
    for r, reason in rules.refused():
        res.reject(int(line[r]), reason)
    user = col(i.user)
    user = pc.if_else(pc.equal(user, ""), pa.scalar("unknown"), user)
    worked = has_start & ended & np.array([o == "succeeded" for o in outcome], np.bool_)
    work_s = np.where(has_duration, duration, np.where(worked, (end - start) // 1_000_000, -1))
    hosts = reader.hosts
    out: list[tuple[int, History | None]] = []
    keep = np.flatnonzero(rules.ok)
    at = pa.array(keep, pa.int64())
    for k, wid_k, sub, bud, usr, g, m, ran, s, e, has_e, o, p, knd, w in zip(
        line[keep].tolist(), wid.take(at).to_pylist(), submit[keep].tolist(),
        [budgets[c] for c in b_code[keep].tolist()], user.take(at).to_pylist(), gpus[keep].tolist(),
        min_rt[keep].tolist(), has_start[keep].tolist(), start[keep].tolist(), end[keep].tolist(),
        ended[keep].tolist(), [outcome[r] for r in keep.tolist()], priority[keep].tolist(),
        [kinds[c] for c in k_code[keep].tolist()], work_s[keep].tolist(), strict=True,
    ):  # fmt: skip
        if not g:
            out.append((k, None))
            continue
        out.append((k, History(  # positional, in field order (a keyword call costs more, once per row)
            wid_k, sub, bud, usr, g, m, False, [Run(s, e if has_e else None, hosts)] if ran else [], o,
            e if has_e else None, 0, p, knd, None if w < 0 else w,
        )))  # fmt: skip
    return out, stood_in


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
