"""Slurm: ``sacct --parsable2`` output (with or without a header line) to ledger events.

Layouts. Without a header the 26-field ``--noheader`` layout is assumed::

    JobID|JobIDRaw|Cluster|Partition|QOS|Account|Group|GID|User|UID|Submit|Eligible|Start|End|
    Elapsed|ExitCode|State|NNodes|NCPUS|ReqCPUS|ReqMem|ReqTRES|AllocTRES|Timelimit|NodeList|JobName

With a header (``sacct --parsable2 --format ...``) the columns are found by name; JobID, State,
Submit, Start and End are required. ``--parsable`` (a trailing ``|``) is accepted too.

Fields read: JobID, Cluster, Partition, Account, User (UID when User is empty), Submit, Start,
End, State, NNodes, ReqTRES / AllocTRES (or ReqGRES / AllocGRES), Timelimit, NodeList.

* **Times** are wall-clock times in ``tz`` (sacct prints local time; ``TZ=UTC sacct`` prints UTC).
* **GPUs**: ``gres/gpu=N`` in AllocTRES, else the sum of typed ``gres/gpu:TYPE=N``, else ReqTRES
  (a job that never started has no allocation); job steps' TRES fill in when the job row has none.
  Jobs with no GPUs are CPU jobs: skipped and counted, unless ``gpus_for_cpu_jobs`` > 0 gives them
  that many GPUs (useful for auditing a CPU cluster's queue, as the reference files are).
* **Budget path**: ``cluster/account/user`` (Slurm's association tree); **kind** ``debug`` or
  ``interactive`` when the partition's name says so, else ``batch``.
* **Minimum runtime**: sacct has none; ``min_runtime_s`` (default 1 h), cut to the time limit
  when that is shorter, so short-limit jobs count as debug work in the audits.
* **Steps** (``123.batch``, ``123.0``, ``123.extern``) are not workloads: they are folded into
  their job (GPUs only) and counted as skipped; a step whose job is absent is counted apart.
* **Arrays**: each task (``123_7``) is a workload; a pending record for a task range
  (``123_[1-3,5%2]``) stands for each task it names.
* **Requeues**: ``sacct --duplicates`` prints one record per run of a requeued job; records
  with the same JobID are joined into one workload with several runs, ordered by submit and
  start. An identical repeated record is counted as a duplicate and adds nothing.

State of the last record -> what the ledger records (times are the record's End):

=================  =========================================================================
COMPLETED          completed, outcome ``succeeded``
FAILED             completed, ``failed``
OUT_OF_MEMORY      completed, ``failed``
TIMEOUT            completed, ``failed`` (killed at its time limit; the work did not finish)
DEADLINE           completed, ``cancelled`` (Slurm cancelled it at its deadline)
CANCELLED [by N]   completed, ``cancelled``; cancelled before it started (Start Unknown, or
                   NodeList ``None assigned``): no run, only the completion
PREEMPTED          preempted (``fair_share``), then completed ``cancelled``: Slurm's
                   PreemptMode=CANCEL, the project's non-resumable rule
NODE_FAIL,         preempted (``host_failure``), then completed ``failed``
BOOT_FAIL
REQUEUED,          preempted (``user``: sacct cannot tell an operator's requeue from Slurm's),
REQUEUE_HOLD,      then requeued; not ended
REQUEUE_FED,
SPECIAL_EXIT
RUNNING, SUSPENDED started, not ended (also RESIZING, SIGNALING, STOPPED, COMPLETING,
                   CONFIGURING, STAGE_OUT)
PENDING            submitted only
REVOKED            skipped (the job ran on a sibling cluster of a federation)
=================  =========================================================================

An earlier record of a requeued job ended in an interruption: ``PREEMPTED`` is a ``fair_share``
preemption, ``NODE_FAIL`` / ``BOOT_FAIL`` a ``host_failure`` one, any other state a ``user``
requeue; each is followed by ``WorkloadRequeued`` at that record's End. A requeued job is
marked resumable (the file shows it resumed); others take ``resumable``.

Malformed records (wrong field count, unreadable time, unknown state, end before start, start
before submit, bad GPU count) are rejected with file, line and reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, tzinfo
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

from ledger import events as ev
from ledger.adapters.common import (
    LATEST_US,
    UTF8_BOM,
    ImportResult,
    RowError,
    WallClock,
    budget_path,
)
from ledger.adapters.history import History, Run, check_history
from ledger.adapters.hostlist import expand_hostlist, expand_ranges
from ledger.gcpause import paused_gc

__all__ = [
    "NOHEADER_FIELDS",
    "SlurmOptions",
    "import_sacct",
    "import_sacct_bytes",
    "import_sacct_file",
    "parse_gpus",
    "parse_timelimit",
]

NOHEADER_FIELDS = (
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user", "uid",
    "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes", "ncpus", "reqcpus",
    "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
)  # fmt: skip

_FINAL: dict[str, ev.Outcome] = {
    "COMPLETED": "succeeded",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "TIMEOUT": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "cancelled",
    "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
    "NODE_FAIL": "failed",
}
_REQUEUED = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"})
_RUNNING = frozenset(
    {"RUNNING", "SUSPENDED", "RESIZING", "SIGNALING", "STOPPED", "COMPLETING", "CONFIGURING", "STAGE_OUT"}
)
_PENDING = frozenset({"PENDING"})
_KNOWN = frozenset(_FINAL) | _REQUEUED | _RUNNING | _PENDING | {"REVOKED"}
_NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
_GPU_TRES = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_GPU_GRES = re.compile(r"gpu(?::[^:,(]+)?:(\d+)")


@dataclass(frozen=True, slots=True)
class SlurmOptions:
    """How to read a sacct file: its clock, names and the choices sacct leaves open."""

    tz: tzinfo = UTC
    cluster: str | None = None  # overrides the Cluster column (needed when the file has none)
    gpus_for_cpu_jobs: int = 0  # 0: skip jobs without GPUs; N: import them as N-GPU workloads
    min_runtime_s: int = 3600
    resumable: bool = False


@dataclass(slots=True)
class _Record:
    line: int
    cluster: str
    jobid: str
    partition: str
    account: str
    user: str
    submit: int  # µs since the epoch
    start: int | None
    end: int | None
    state: str
    gpus: int
    nnodes: int
    timelimit_s: int | None
    nodelist: str


def parse_gpus(tres: str) -> int:
    """Return the GPU count in a TRES string ('gres/gpu=4', 'gres/gpu:p100=1'); 0 when there is none."""
    if "gpu" not in tres:
        return 0
    for entry in tres.split(","):
        key, eq, value = entry.partition("=")
        if eq and (key == "gres/gpu" or key.startswith("gres/gpu:")) and not (value.isdigit() and value.isascii()):
            # a count the pattern below cannot read would make the job a CPU job without a word
            raise RowError(f"{entry!r} is not a GPU count (gres/gpu=N)")
    generic = 0
    typed = 0
    for m in _GPU_TRES.finditer(tres):
        if tres[m.start() + 8] == "=":  # 'gres/gpu=' is the total; typed entries repeat it by type
            generic = max(generic, int(m.group(1)))
        else:
            typed += int(m.group(1))
    if generic or typed:
        return generic or typed
    # AllocGRES / ReqGRES ('gpu:2', 'gpu:tesla:2', 'gpu:2(IDX:0-1)')
    return sum(int(m.group(1)) for m in _GPU_GRES.finditer(tres))


@lru_cache(maxsize=4096)
def parse_timelimit(text: str) -> int | None:
    """Return seconds for a Slurm duration ('3-00:00:00', '14:20:00', '30:00', '45'); None if unlimited."""
    text = text.strip()
    if not text or not text[0].isdigit():
        return None  # UNLIMITED, Partition_Limit, empty
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if len(parts) > 3 or not all(p.isdigit() for p in parts) or (days and not days.isdigit()):
        raise RowError(f"time limit {text!r} is not [D-]HH:MM:SS")
    if len(parts) == 1:
        secs = int(parts[0]) * 60  # a bare number is minutes in Slurm
    else:
        h, m, s = ([0] * (3 - len(parts)) + [int(p) for p in parts]) if len(parts) == 3 else [0, *map(int, parts)]
        secs = h * 3600 + m * 60 + s
    return secs + (int(days) * 86_400 if days else 0)


class _Layout:
    """Column positions of one file."""

    def __init__(self, names: list[str] | tuple[str, ...], file: str) -> None:
        idx = {n.strip().lower(): i for i, n in enumerate(names)}
        missing = [c for c in ("jobid", "state", "submit", "start", "end") if c not in idx]
        if missing:
            from ledger.errors import InputError

            raise InputError(f"{file}:1: header lacks column(s) {', '.join(missing)} (found {'|'.join(names)})")
        self.n = len(names)
        # Absent optional columns read the empty field appended to each row of such a layout, so one
        # itemgetter call takes every field a row needs.
        absent = self.n
        self.pad = any(c not in idx for c in _OPTIONAL)
        self.pick = itemgetter(*(idx.get(c, absent) for c in (*_REQUIRED_COLUMNS, *_OPTIONAL)))
        self.has_timelimit = "timelimit" in idx
        tres = {"alloctres": "AllocTRES", "reqtres": "ReqTRES", "allocgres": "AllocGRES", "reqgres": "ReqGRES"}
        self.tres = [idx[c] for c in tres if c in idx]
        self.tres_names = {idx[c]: name for c, name in tres.items() if c in idx}


_REQUIRED_COLUMNS = ("jobid", "state", "submit", "start", "end")
_OPTIONAL = ("cluster", "partition", "account", "user", "uid", "nnodes", "timelimit", "nodelist")


def _parse_row(f: list[str], lay: _Layout, line: int, opts: SlurmOptions, clock: WallClock) -> _Record:
    if lay.pad:
        f.append("")
    jobid, raw_state, t_submit, t_start, t_end, cluster, partition, account, user, uid, nn, limit, nodelist = lay.pick(
        f
    )
    jobid = jobid.strip()
    if not jobid:
        raise RowError("JobID is empty")
    state = raw_state if raw_state in _KNOWN else raw_state.split(" ", 1)[0].rstrip("+")  # 'CANCELLED by 0'
    if state not in _KNOWN:
        raise RowError(f"State {raw_state!r} is not a Slurm job state")
    us = clock.us
    if t_submit in _NO_TIME:
        raise RowError(f"Submit {t_submit!r} is not a time")
    submit = us(t_submit, "Submit")
    start = None if t_start in _NO_TIME else us(t_start, "Start")
    if nodelist == "None assigned":
        start = None  # cancelled while pending: sacct prints Start = End, but nothing ran
    end = None if t_end in _NO_TIME else us(t_end, "End")
    if start is not None:
        if start < submit:
            raise RowError(f"Start {t_start} is before Submit {t_submit}")
        if end is not None and end < start:
            raise RowError(f"End {t_end} is before Start {t_start}")
    gpus = 0
    for i in lay.tres:
        if "gpu" in f[i]:  # (parse_gpus says 0 without a call for the many CPU jobs)
            try:
                gpus = parse_gpus(f[i])
            except RowError as exc:
                raise RowError(f"{lay.tres_names[i]} {f[i]!r}: {exc}") from None
            if gpus:
                break
    cluster = opts.cluster or cluster.strip()
    if not cluster:
        raise RowError("Cluster is empty (give --cluster)")
    user = user.strip() or uid.strip()
    nn = nn.strip()
    if nn and not (nn.isdigit() and nn.isascii()):
        raise RowError(f"NNodes {nn!r} is not a whole number")
    return _Record(  # positional (in field order): a keyword call costs more, once per row
        line,
        cluster,
        jobid,
        partition,
        account,
        user or "unknown",
        submit,
        start,
        end,
        state,
        gpus,
        int(nn) if nn else 0,
        parse_timelimit(limit) if lay.has_timelimit else None,
        nodelist,
    )


def _is_header(fields: list[str]) -> bool:
    return any(x.strip().lower() == "jobid" for x in fields)


@lru_cache(maxsize=1024)
def _kind(partition: str) -> ev.WorkloadKind:
    p = partition.lower()
    if "debug" in p:
        return "debug"
    if "interactive" in p:
        return "interactive"
    return "batch"


@lru_cache(maxsize=65_536)
def _hosts(nodelist: str, cluster: str) -> tuple[str, ...]:
    """Return the hosts a NodeList names (cached: a cluster's jobs run on the same node lists again and again)."""
    try:
        hosts = expand_hostlist(nodelist) if nodelist else ()
    except ValueError:
        hosts = (nodelist,)
    return hosts or (f"{cluster}-unknown",)


_INTERRUPT: dict[str, ev.PreemptReason] = {
    "PREEMPTED": "fair_share",
    "NODE_FAIL": "host_failure",
    "BOOT_FAIL": "host_failure",
}


def _single_history(rec: _Record, gpus: int, opts: SlurmOptions) -> History:
    """``_history`` of a job with one record (most jobs): the same result with the loop over records unrolled."""
    state, start, end = rec.state, rec.start, rec.end
    runs: list[Run] = []
    if start is not None:
        run = Run(start, end, _hosts(rec.nodelist, rec.cluster))
        if end is not None:
            if state in _INTERRUPT:
                run.preempted = _INTERRUPT[state]
            elif state in _REQUEUED:
                run.preempted, run.requeued = "user", True
        runs.append(run)
    outcome: ev.Outcome | None = _FINAL.get(state)
    if outcome is not None and end is None:
        raise RowError(f"State {state} but End is Unknown")
    limit = rec.timelimit_s
    min_rt = opts.min_runtime_s if limit is None or limit >= opts.min_runtime_s else limit
    work_s = (end - start) // 1_000_000 if outcome == "succeeded" and start is not None and end is not None else None
    return History(  # positional, in field order (see History)
        rec.jobid,
        rec.submit,
        budget_path(rec.cluster, rec.account, rec.user),
        rec.user,
        gpus,
        min_rt,
        state in _REQUEUED or opts.resumable,
        runs,
        outcome,
        end if outcome is not None else None,
        rec.nnodes,
        0,
        _kind(rec.partition),
        work_s,
    )


def _history(recs: list[_Record], gpus: int, opts: SlurmOptions) -> History:
    if len(recs) == 1:
        return _single_history(recs[0], gpus, opts)
    first, last = recs[0], recs[-1]
    runs: list[Run] = []
    before: _Record | None = None  # the record of the run before this one
    for rec in recs:
        if rec.start is None:
            continue
        if before is not None and before.end is not None and rec.start < before.end:
            raise RowError(
                f"JobID {rec.jobid}: record at line {rec.line} starts at {ev.from_us(rec.start).isoformat()}, "
                f"before the run of line {before.line} ended at {ev.from_us(before.end).isoformat()}"
            )
        run = Run(rec.start, rec.end, _hosts(rec.nodelist, rec.cluster))
        runs.append(run)
        before = rec
        if rec is not last:
            # an earlier record of the same job: this run was interrupted and the job requeued
            if rec.end is None:
                raise RowError(f"JobID {rec.jobid}: record at line {rec.line} has a later record but no End")
            run.preempted = _INTERRUPT.get(rec.state, "user")
            run.requeued = True
        elif rec.end is not None:
            if rec.state in _INTERRUPT:
                run.preempted = _INTERRUPT[rec.state]
            elif rec.state in _REQUEUED:
                run.preempted, run.requeued = "user", True
    outcome: ev.Outcome | None = _FINAL.get(last.state)
    if outcome is not None and last.end is None:
        raise RowError(f"State {last.state} but End is Unknown")
    if (
        outcome is not None and before is not None and before is not last  # a record that never ran ends the job
        and last.end is not None and before.end is not None and last.end < before.end
    ):
        raise RowError(  # the job ended before a run of it did: contradictory records
            f"JobID {last.jobid}: record at line {last.line} ends the job ({last.state}, never started) at "
            f"{ev.from_us(last.end).isoformat()}, before the run of line {before.line} ended"
        )
    limit = last.timelimit_s
    min_rt = opts.min_runtime_s if limit is None else min(opts.min_runtime_s, limit)
    requeued = len(runs) > 1 or last.state in _REQUEUED
    work_s = None
    if outcome == "succeeded" and len(runs) == 1 and runs[0].end is not None:
        work_s = (runs[0].end - runs[0].start) // 1_000_000
    return History(
        workload_id=first.jobid,
        submit=first.submit,
        budget=budget_path(first.cluster, first.account, first.user),
        user=first.user,
        gpus=gpus,
        min_runtime_s=min_rt,
        resumable=requeued or opts.resumable,
        runs=runs,
        outcome=outcome,
        end=last.end if outcome is not None else None,
        nodes=first.nnodes if len(recs) == 1 else max(r.nnodes for r in recs),
        kind=_kind(first.partition),
        work_s=work_s,
    )


def _array_tasks(jobid: str) -> list[str]:
    """Return the task ids a pending array record names ('7_[1-3,5%2]' -> 7_1, 7_2, 7_3, 7_5)."""
    head, _, rest = jobid.partition("_[")
    spec = rest.rstrip("]").split("%", 1)[0]
    try:
        return [f"{head}_{t}" for t in expand_ranges(spec)]
    except ValueError as exc:
        raise RowError(f"JobID {jobid!r}: array task list: {exc}") from None


def import_sacct(lines: Iterable[str], file: str, opts: SlurmOptions | None = None) -> ImportResult:
    """Read sacct --parsable2 lines and return the events they stand for, with the import summary."""
    with paused_gc():  # many small objects, no cycles: see paused_gc
        return _import_sacct(lines, file, opts)


def import_sacct_bytes(data: bytes, file: str, opts: SlurmOptions | None = None) -> ImportResult:
    """Read a sacct file's bytes (UTF-8; a byte that is not is read as U+FFFD and named by the row checks)."""
    text = data.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")  # a mark an editor put before line 1
    return import_sacct(text.splitlines(keepends=True) if "\r" in text else text.split("\n"), file, opts)


def _import_sacct(lines: Iterable[str], file: str, opts: SlurmOptions | None = None) -> ImportResult:
    opts = opts or SlurmOptions()
    res = ImportResult("slurm", file)
    res.notes.append(f"times read in {getattr(opts.tz, 'key', None) or opts.tz}")
    kept = _read_rows(enumerate(lines, 1), res, opts)
    res.add_histories(kept)
    res.workloads += len(kept)
    res.sort_events()
    return res


def _read_rows(
    numbered: Iterable[tuple[int, str]], res: ImportResult, opts: SlurmOptions
) -> list[tuple[History, str, str]]:
    """Read (line number, line) pairs row by row and return the checked histories, in the order their jobs appear.

    Rows read, skips and rejections go to ``res``. The first line decides the layout (a header
    names the fields; otherwise the 26-field ``--noheader`` layout).
    """
    lay: _Layout | None = None
    clock = WallClock(opts.tz)
    file = res.file
    jobs: dict[tuple[str, str], list[_Record]] = {}
    step_gpus: dict[tuple[str, str], int] = {}
    steps_of_missing: list[tuple[tuple[str, str], int]] = []
    rows_read, width, parse_row = 0, -1, _parse_row
    for n, raw in numbered:
        text = raw.rstrip("\r\n")
        if not text or text.isspace():
            continue
        f = text.split("|")
        if lay is None:
            if _is_header(f):
                lay = _Layout(f[:-1] if f[-1] == "" else f, file)
                continue
            lay = _Layout(NOHEADER_FIELDS, file)
        if width < 0:
            width = lay.n
        rows_read += 1
        if len(f) != width:
            if len(f) == width + 1 and f[-1] == "":
                f.pop()  # --parsable ends every line with '|'
            else:
                res.reject(n, f"expected {width} '|'-separated fields, found {len(f)}")
                continue
        try:
            rec = parse_row(f, lay, n, opts, clock)
            jobid = rec.jobid
            ids = _array_tasks(jobid) if "_[" in jobid else None
        except RowError as exc:
            res.reject(n, str(exc))
            continue
        if "." in jobid or ids is not None or rec.state == "REVOKED":
            if rec.state == "REVOKED":
                res.skipped["revoked (ran on a sibling cluster)"] += 1
                continue
            job, dot, _step = jobid.partition(".")
            if dot:
                key = (rec.cluster, job)
                step_gpus[key] = max(step_gpus.get(key, 0), rec.gpus)
                steps_of_missing.append((key, n))
                continue
        key = (rec.cluster, jobid)
        if ids is None:
            group = jobs.get(key)
            if group is None:
                jobs[key] = [rec]  # the common case: a job's first (and usually only) record
                continue
        for jid in ids or (jobid,):
            if jid != rec.jobid:
                rec = replace(rec, jobid=jid)
            group = jobs.setdefault((rec.cluster, jid), [])
            if group and any(_same(rec, o) for o in group):
                res.skipped["duplicate record"] += 1
                continue
            group.append(rec)
    res.rows_read += rows_read
    for key, _n in steps_of_missing:
        if key in jobs:
            res.skipped["job step (folded into its job)"] += 1
        else:
            res.skipped["job step whose job is not in the file"] += 1
    kept: list[tuple[History, str, str]] = []
    cpu_gpus = opts.gpus_for_cpu_jobs
    cpu_jobs = 0
    for key, recs in jobs.items():
        if len(recs) > 1:
            recs.sort(key=_record_order)
            gpus = max(r.gpus for r in recs)
        else:
            gpus = recs[0].gpus
        if step_gpus and not gpus:
            gpus = step_gpus.get(key, 0)
        if gpus == 0:
            if cpu_gpus <= 0:
                cpu_jobs += 1
                continue
            gpus = cpu_gpus
        try:
            h = _single_history(recs[0], gpus, opts) if len(recs) == 1 else _history(recs, gpus, opts)
            check_history(h)
        except RowError as exc:
            res.reject(recs[-1].line, str(exc))
            continue
        kept.append((h, key[0], "slurm"))
    if cpu_jobs:
        res.skipped["no GPUs (CPU job)"] += cpu_jobs
    return kept


def _same(a: _Record, b: _Record) -> bool:
    return a.submit == b.submit and a.start == b.start and a.end == b.end and a.state == b.state


def _record_order(r: _Record) -> tuple[int, int, int]:
    return (r.submit, LATEST_US if r.start is None else r.start, r.line)


def import_sacct_file(path: str | Path, opts: SlurmOptions | None = None) -> ImportResult:
    """Read a sacct --parsable2 file."""
    return import_sacct_bytes(Path(path).read_bytes(), str(path), opts)
