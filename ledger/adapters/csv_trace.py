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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

from ledger import events as ev
from ledger.adapters.common import (
    EARLIEST_US,
    LATEST_US,
    UTF8_BOM,
    ImportResult,
    RowError,
    WallClock,
    check_time,
    parse_local_time,
)
from ledger.adapters.history import History, Run, add_histories
from ledger.errors import ConfigError, InputError
from ledger.gcpause import paused_gc

__all__ = [
    "FIELDS",
    "CsvOptions",
    "histories",
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
    """Turns one row into a History (or None for a skipped row)."""

    def __init__(self, header: list[str], opts: CsvOptions, file: str) -> None:
        names = [h.strip() for h in header]
        pos = {n: i for i, n in enumerate(names)}
        absent = [f"{f}={c}" for f, c in opts.columns.items() if c not in pos]
        if absent:
            raise InputError(f"{file}:1: no column for {', '.join(absent)} (the header has {', '.join(names)})")
        self.idx = _Columns(**{f: pos[c] for f, c in opts.columns.items()})
        self.hosts = (f"{opts.cluster}-unknown",)
        self.budgets: set[str] = set()
        self.opts = opts
        self.width = len(names)
        self.clock = WallClock(opts.tz)
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
        self.iso = self.clock.us if self.epoch is None else None  # the wall clock, when no time is relative

    def time(self, text: str, what: str) -> int:
        """Return a time field as µs since the epoch: seconds after --epoch, Unix seconds, or ISO 8601."""
        if text.isdigit() and text.isascii():  # whole seconds, the common case: integer arithmetic only
            us = self.epoch_us + int(text) * 1_000_000
            if EARLIEST_US <= us < LATEST_US:
                return us  # (out of range: the general path below says why)
        elif len(text) == 19 and text[10] in "T " and self.epoch is None:
            return self.clock.us(text, what)  # the common ISO form, without trying it as a number first
        if self.epoch is not None or _looks_numeric(text):
            seconds = _number(text, what)
            try:
                t = self.epoch + timedelta(seconds=seconds) if self.epoch else datetime.fromtimestamp(seconds, UTC)
            except (OverflowError, ValueError, OSError):
                raise RowError(f"{what} {text!r} lies outside {ev.EARLIEST:%Y}..{ev.LATEST:%Y}") from None
            return ev.to_us(check_time(t, what))
        return self.clock.us(text, what)

    def history(self, row: list[str]) -> History | None:
        i = self.idx
        wid = row[i.workload_id].strip()
        if not wid:
            raise RowError("workload_id is empty")
        g = row[i.gpus].strip()
        gpus = int(g) if g.isdigit() and g.isascii() else _whole(g, "gpus")
        if gpus == 0:
            return None
        # ISO times without --epoch (most exports) go straight to the wall clock: what ``time`` does with them
        time, iso = self.time, self.iso
        t_text = row[i.submit].strip()
        submit = iso(t_text, "submit") if iso and len(t_text) == 19 and t_text[10] in "T " else time(t_text, "submit")
        s_text = row[i.start].strip() if i.start is not None else ""
        e_text = row[i.end].strip() if i.end is not None else ""
        d_text = row[i.duration].strip() if i.duration is not None else ""
        start = time(s_text, "start") if s_text else None
        end = time(e_text, "end") if e_text else None
        if not d_text:
            duration = None
        else:
            duration = int(d_text) if d_text.isdigit() and d_text.isascii() else _whole(d_text, "duration")
        if start is not None:
            if start < submit:
                raise RowError(f"start {s_text} is before submit {row[i.submit].strip()}")
            if end is None and duration is not None:
                end = start + duration * 1_000_000
            if end is not None and end < start:
                raise RowError(f"end {e_text} is before start {s_text}")
        elif end is not None and end < submit:
            raise RowError(f"end {e_text} is before submit {row[i.submit].strip()}")
        outcome: ev.Outcome | None = None
        o_text = row[i.outcome].strip() if i.outcome is not None else ""
        if o_text:
            outcome = _OUTCOMES.get(o_text.lower())
            if outcome is None:
                raise RowError(f"outcome {o_text!r} is not one of {', '.join(sorted(set(_OUTCOMES)))}")
        if end is not None:
            if start is None:
                outcome = "cancelled"  # it never ran: whatever the file says, it left the queue unrun
            elif outcome is None:
                outcome = "succeeded"
        budget = (row[i.budget].strip() if i.budget is not None else "") or self.budget
        if budget not in self.budgets:
            if not _PATH.match(budget):
                raise RowError(f"budget {budget!r} is not a budget path like org/team")
            self.budgets.add(budget)
        kind = (row[i.kind].strip() if i.kind is not None else "") or "batch"
        if kind not in _KINDS:
            raise RowError(f"kind {kind!r} is not one of {', '.join(sorted(_KINDS))}")
        work_s = duration
        if work_s is None and start is not None and end is not None and outcome == "succeeded":
            work_s = (end - start) // 1_000_000
        m_text = row[i.min_runtime].strip() if i.min_runtime is not None else ""
        p_text = row[i.priority].strip() if i.priority is not None else ""
        return History(  # positional, in field order (a keyword call costs more, once per row)
            wid,
            submit,
            budget,
            (row[i.user].strip() if i.user is not None else "") or "unknown",
            gpus,
            _whole(m_text, "min_runtime") if m_text else self.opts.min_runtime_s,
            False,  # resumable
            [Run(start, end, self.hosts)] if start is not None else [],
            outcome if end is not None else None,
            end,
            0,  # nodes
            _integer(p_text, "priority") if p_text else 0,
            kind,  # type: ignore[arg-type]
            work_s,
        )


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


def import_csv(lines: Iterable[str], file: str, opts: CsvOptions) -> ImportResult:
    """Read CSV lines (header first) and return the events they stand for, with the import summary."""
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
        add_histories(res, histories(((rows.line_num, row) for row in rows), reader, res), opts.cluster, "csv")
    return res


def import_csv_bytes(data: bytes, file: str, opts: CsvOptions) -> ImportResult:
    """Read a CSV file's bytes (UTF-8; a byte-order mark before the header is skipped)."""
    data = data.removeprefix(UTF8_BOM)  # Excel's "CSV UTF-8" puts a byte-order mark before the header
    return import_csv(io.StringIO(data.decode("utf-8"), newline=""), file, opts)


def histories(
    rows: Iterable[tuple[int, list[str]]], reader: _Reader, res: ImportResult
) -> Iterator[tuple[int, History | None]]:
    """Yield (line, history) for each good (line, row); report malformed rows to ``res``: the per-row rules."""
    width = reader.width
    history = reader.history
    read = 0
    try:
        for line_num, row in rows:
            if len(row) != width or width == 1:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # a blank line
                if len(row) != width:
                    read += 1
                    res.reject(line_num, f"expected {width} fields, found {len(row)}")
                    continue
            read += 1
            try:
                yield line_num, history(row)
            except RowError as exc:
                res.reject(line_num, str(exc))
    finally:
        res.rows_read += read


def import_csv_file(path: str | Path, opts: CsvOptions) -> ImportResult:
    """Read a CSV trace file."""
    return import_csv_bytes(Path(path).read_bytes(), str(path), opts)
