"""Read a workload trace (CSV with a header, or JSON Lines) into ``WorkloadSubmitted`` events.

One row per workload, columns as in docs/formats.md ("Workload trace"):
``workload_id, submit_time, budget, user, gpus, min_runtime_s, resumable, work_s,
checkpoint_interval_s, restart_s, priority, kind``. ``priority`` and ``kind`` may be left out
(0 and ``batch``); ``checkpoint_interval_s`` and ``restart_s`` may be empty (0). ``submit_time``
is ISO 8601 (UTC when it has no offset) or epoch seconds.

A bad row is set aside as a :class:`RejectedRow` naming file, line, field, value and reason, and
the rest of the trace is kept; ``strict=True`` refuses the whole trace instead.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from ledger.errors import EventValidationError, InputError
from ledger.events import EARLIEST, LATEST, WorkloadKind, WorkloadSubmitted, to_us

COLUMNS = (
    "workload_id",
    "submit_time",
    "budget",
    "user",
    "gpus",
    "min_runtime_s",
    "resumable",
    "work_s",
    "checkpoint_interval_s",
    "restart_s",
    "priority",
    "kind",
)
REQUIRED = COLUMNS[:8]
KINDS: tuple[str, ...] = get_args(WorkloadKind)
_PATH = re.compile(r"^[^/\s]+(/[^/\s]+)*$")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


@dataclass(frozen=True)
class RejectedRow:
    """One trace row left out of the replay, and why."""

    file: str
    line: int
    field: str
    value: object
    reason: str

    def __str__(self) -> str:
        if self.field == "(line)":  # the line as a whole is unreadable: there is no field to name
            shown = "" if self.value is None else f": {self.value!r}"
            return f"{self.file}:{self.line}: {self.reason}{shown}"
        if self.value is None and self.reason == "is missing":
            return f"{self.file}:{self.line}: field {self.field} is missing"
        return f"{self.file}:{self.line}: {self.field} = {self.value!r}: {self.reason}"


@dataclass
class Trace:
    """The submissions of a trace in submit-time order, and the rows that were rejected."""

    submissions: list[WorkloadSubmitted] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)


class _Bad(Exception):
    def __init__(self, field: str, value: object, reason: str):
        super().__init__(reason)
        self.field, self.value, self.reason = field, value, reason


def parse_time(value: object) -> datetime:
    """Return a UTC datetime for ISO 8601 text (UTC when no offset) or epoch seconds; raise ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected ISO 8601 or epoch seconds")
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    text = str(value).strip()
    if not text:
        raise ValueError("is empty")
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return _from_epoch(seconds)  # a number: epoch seconds, and its error says what is wrong with it
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("expected ISO 8601 (e.g. 2026-03-02T08:00:00Z) or epoch seconds") from None
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    if not EARLIEST <= t < LATEST:
        raise ValueError(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return t


def _from_epoch(seconds: float) -> datetime:
    if not math.isfinite(seconds):
        raise ValueError("must be a finite number")
    us = round(seconds * 1_000_000)
    if not to_us(EARLIEST) <= us < to_us(LATEST):
        raise ValueError(f"epoch seconds must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)


def _int(name: str, value: object, *, minimum: int, default: int | None = None) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise _Bad(name, value, "is missing")
        return default
    if isinstance(value, bool):
        raise _Bad(name, value, "expected a whole number")
    if isinstance(value, int):
        number: float | int = value
    elif isinstance(value, str | float):
        try:
            # most trace values are plain digits: int() takes them exactly and at a fraction of the
            # cost; "3.0" or "1e3" go on to float()
            number = int(value) if isinstance(value, str) and value.strip().isdigit() else float(value)
        except ValueError:
            raise _Bad(name, value, "expected a whole number") from None
    else:
        raise _Bad(name, value, "expected a whole number") from None
    if isinstance(number, float) and (not math.isfinite(number) or number != int(number)):
        raise _Bad(name, value, "expected a whole number")
    if int(number) < minimum:
        raise _Bad(name, value, f"must be at least {minimum}")
    return int(number)


def _text(name: str, value: object) -> str:
    if value is None or not str(value).strip():
        raise _Bad(name, value, "is missing")
    if isinstance(value, bool | dict | list):  # a JSON object, list or boolean has no place as a name
        raise _Bad(name, value, "expected text")
    return str(value).strip()


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = "" if value is None else str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _Bad(name, value, "expected true or false")


def parse_row(
    row: dict[str, Any], *, cluster: str, event_id: str, budgets: Collection[str] | None = None, max_gpus: int = 0
) -> WorkloadSubmitted:
    """Return the submission one trace row describes; raise EventValidationError naming the bad field."""
    try:
        wid = _text("workload_id", row.get("workload_id"))
        raw_time = row.get("submit_time")
        try:
            when = parse_time(raw_time)
        except ValueError as exc:
            raise _Bad("submit_time", raw_time, str(exc)) from None
        budget = _text("budget", row.get("budget"))
        if not _PATH.match(budget):
            raise _Bad("budget", budget, "expected a tree path such as org/program/team")
        if budgets is not None and budget not in budgets:
            raise _Bad("budget", budget, "is not a node of the budgets file")
        user = _text("user", row.get("user"))
        gpus = _int("gpus", row.get("gpus"), minimum=1)
        if max_gpus and gpus > max_gpus:
            raise _Bad("gpus", gpus, f"the cluster has only {max_gpus} GPUs, so it could never start")
        min_runtime = _int("min_runtime_s", row.get("min_runtime_s"), minimum=0)
        resumable = _bool("resumable", row.get("resumable"))
        work = _int("work_s", row.get("work_s"), minimum=1)
        interval = _int("checkpoint_interval_s", row.get("checkpoint_interval_s"), minimum=0, default=0)
        restart = _int("restart_s", row.get("restart_s"), minimum=0, default=0)
        priority = _int("priority", row.get("priority"), minimum=-(2**31), default=0)
        kind = str(row.get("kind") or "").strip() or "batch"
        if kind not in KINDS:
            raise _Bad("kind", kind, f"expected one of {', '.join(KINDS)}")
    except _Bad as bad:
        raise EventValidationError(bad.reason, field=bad.field, value=bad.value) from None
    try:
        return WorkloadSubmitted(
            event_id=event_id,
            cluster=cluster,
            time=when,
            workload_id=wid,
            budget=budget,
            user=user,
            gpus=gpus,
            min_runtime_s=min_runtime,
            resumable=resumable,
            priority=priority,
            kind=kind,  # type: ignore[arg-type]
            work_s=work,
            checkpoint_interval_s=interval,
            restart_s=restart,
        )
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = ".".join(str(p) for p in err["loc"])
        raise EventValidationError(err["msg"], field=name, value=err.get("input")) from None


def _csv_rows(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"{path}:1: header lacks column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    reader.fieldnames = header
    for row in reader:
        extra = row.get(None)  # values past the header's last column
        if extra:
            # a stray comma or a shifted row: its values cannot be trusted to sit under their columns
            which = ", ".join(repr(v) for v in extra)
            yield reader.line_num, (
                f"has {len(header) + len(extra)} fields, the header {len(header)}: "
                f"{which} {'has' if len(extra) == 1 else 'have'} no column"
            )
            continue
        yield reader.line_num, {k: v for k, v in row.items() if k is not None}


def _jsonl_rows(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON ({exc.msg})"
            continue
        yield number, obj if isinstance(obj, dict) else "expected a JSON object per line"


def _is_jsonl(path: Path, text: str) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return True
    if path.suffix.lower() == ".csv":
        return False
    return text.lstrip().startswith("{")


def listed(rejected: list[RejectedRow], limit: int = 10) -> str:
    """Return the first ``limit`` rejected rows, one indented line each, and how many more there are."""
    lines = "".join(f"  {r}\n" for r in rejected[:limit])
    return lines + (f"  ... and {len(rejected) - limit} more\n" if len(rejected) > limit else "")


def read_trace(
    path: str | Path,
    cluster: str,
    *,
    strict: bool = False,
    budgets: Collection[str] | None = None,
    max_gpus: int = 0,
) -> Trace:
    """Read a CSV or JSON Lines trace into submissions; with ``strict`` raise InputError on any bad row.

    ``budgets`` (paths of the budget tree) and ``max_gpus`` (cluster size), when given, also reject rows
    whose budget is unknown or whose workload could never fit.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the trace ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    rows: Iterator[tuple[int, dict[str, Any] | str]] = (
        _jsonl_rows(path, text) if _is_jsonl(path, text) else _csv_rows(path, text)
    )
    trace = Trace()
    seen: dict[str, int] = {}
    for line, row in rows:
        if isinstance(row, str):
            trace.rejected.append(RejectedRow(str(path), line, "(line)", None, row))
            continue
        try:
            sub = parse_row(row, cluster=cluster, event_id=f"{cluster}/t{line}", budgets=budgets, max_gpus=max_gpus)
        except EventValidationError as exc:
            trace.rejected.append(RejectedRow(str(path), line, exc.field or "?", exc.value, str(exc)))
            continue
        if sub.workload_id in seen:
            trace.rejected.append(
                RejectedRow(
                    str(path),
                    line,
                    "workload_id",
                    sub.workload_id,
                    f"already submitted on line {seen[sub.workload_id]}",
                )
            )
            continue
        seen[sub.workload_id] = line
        trace.submissions.append(sub)
    if strict and trace.rejected:
        shown = "\n  ".join(str(r) for r in trace.rejected[:20])
        more = f"\n  (and {len(trace.rejected) - 20} more)" if len(trace.rejected) > 20 else ""
        raise InputError(f"{path}: {len(trace.rejected)} bad row(s), nothing replayed (--strict):\n  {shown}{more}")
    # stable sort: rows submitted at the same moment keep file order
    trace.submissions.sort(key=lambda s: s.time)
    return trace


def write_trace(path: str | Path, submissions: list[WorkloadSubmitted]) -> None:
    """Write submissions as a CSV trace (the columns above) that ``read_trace`` reads back."""
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for s in submissions:
            w.writerow(
                (
                    s.workload_id,
                    s.time.strftime("%Y-%m-%dT%H:%M:%SZ") if not s.time.microsecond else s.time.isoformat(),
                    s.budget,
                    s.user,
                    s.gpus,
                    s.min_runtime_s,
                    "true" if s.resumable else "false",
                    s.work_s,
                    s.checkpoint_interval_s or 0,
                    s.restart_s or 0,
                    s.priority,
                    s.kind,
                )
            )


__all__ = ["COLUMNS", "RejectedRow", "Trace", "listed", "parse_row", "parse_time", "read_trace", "write_trace"]
