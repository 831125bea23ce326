"""Philly-style jobs with attempts (Microsoft's Philly trace) to ledger events.

Input: a JSON array (or JSON Lines) of jobs: the Philly trace's own ``cluster_job_log``
(``{status, vc, jobid, attempts: [{start_time, end_time, detail: [{ip, gpus}]}], submitted_time,
user}``) or a list derived from it such as ``jobs.json`` (``{id, num_gpus, submitted_time,
attempts: [{start_time, end_time}]}``). Fields read: ``id`` (else ``jobid``), ``num_gpus``,
``submitted_time``, ``attempts[].start_time``, ``attempts[].end_time``, ``attempts[].detail[].ip``
(hosts, when present) and ``.gpus``, and the optional ``status`` (Pass / Failed / Killed), ``vc``
and ``user``.

* **GPUs**: ``num_gpus``; without it (the ``cluster_job_log``), the most GPUs any attempt's
  ``detail`` lists. A job without ``num_gpus`` that no attempt lists GPUs for (one never
  scheduled) gives no GPU count: it is skipped and counted as such, not guessed.

* **Times** are ``YYYY-MM-DD HH:MM:SS`` wall-clock times of the cluster; the Philly logs use
  US Pacific time, so the default zone is ``America/Los_Angeles`` (give another with ``tz``).
  Ambiguous autumn times are read as the first of the two (zoneinfo's fold=0).
* **Attempts**: one run per attempt. Between two attempts the ledger records a preemption
  (reason ``fair_share``: the trace does not say why an attempt ended) and a requeue at the end
  of the earlier attempt; the next attempt's start is the restart. A job with several attempts
  is therefore resumable.
* **Outcome** at the end of the last attempt: ``status`` Pass -> succeeded, Failed -> failed,
  Killed -> cancelled; without a status (the published subset keeps only Pass jobs) succeeded.
  A last attempt with no end time is still running.
* **Budget**: ``cluster/vc/user`` when the job names them, else ``cluster``; user ``unknown``
  when absent. **Minimum runtime**: ``min_runtime_s`` (the trace has none).
* Jobs with 0 GPUs are skipped and counted. Malformed jobs (missing fields, unreadable times,
  an attempt that ends before it starts or starts before the previous one ended or before
  submission) are rejected with the line the job starts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa

from ledger import events as ev
from ledger.adapters.columns import Seen, repeats
from ledger.adapters.common import Destination, ImportResult, Rejection, RowError, WallClock, budget_path
from ledger.adapters.history import OUTCOMES, REASONS, Histories, Runs, checked
from ledger.adapters.jsonstream import JsonSyntaxError, iter_json_values
from ledger.errors import ConfigError
from ledger.log.avro_columns import Coded

__all__ = ["PACIFIC", "PhillyOptions", "import_philly", "import_philly_file"]

PACIFIC = ZoneInfo("America/Los_Angeles")
_OUTCOMES: dict[str, ev.Outcome] = {"pass": "succeeded", "failed": "failed", "killed": "cancelled"}


@dataclass(frozen=True, slots=True)
class PhillyOptions:
    """How to read a Philly job list."""

    tz: tzinfo = PACIFIC
    cluster: str = "philly"
    min_runtime_s: int = 3600


def _text(job: dict[str, Any], key: str) -> str:
    value = job.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"{key} {value!r} is missing or not text")
    return value.strip()


class _Unsized(Exception):
    """A job that gives no GPU count: no ``num_gpus`` and no attempt that lists the GPUs it held."""


def _detail_gpus(wid: str, attempts: Any) -> int:
    """Return the most GPUs any attempt's ``detail`` lists (the cluster_job_log's only GPU count); 0 when none does."""
    most = 0
    for i, att in enumerate(attempts if isinstance(attempts, list) else (), 1):
        held = 0
        for d in (att.get("detail") or ()) if isinstance(att, dict) else ():
            gpus = d.get("gpus") if isinstance(d, dict) else None
            if gpus is None:
                continue
            if not isinstance(gpus, list):
                raise RowError(f"job {wid}: attempt {i} detail gpus {gpus!r} is not a list of GPUs")
            held += len(gpus)
        most = max(most, held)
    return most


# what one job gives: (workload id, submit, budget, user, GPUs, outcome or -1, end or -1, runs)
# where each run is (start, end or None, hosts, interrupted, requeued)
_Job = tuple[str, int, str, str, int, int, int, list[tuple[int, int | None, tuple[str, ...], bool]]]
JOBS = 1 << 16
"""Jobs made into events at a time."""


def _job(job: Any, opts: PhillyOptions, clock: WallClock) -> _Job | None:
    if not isinstance(job, dict):
        raise RowError(f"expected a job object, found {type(job).__name__}")
    wid = _text(job, "id" if "id" in job or "jobid" not in job else "jobid")
    if "num_gpus" in job:
        gpus = job["num_gpus"]
        if isinstance(gpus, float) and gpus.is_integer():
            gpus = int(gpus)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            raise RowError(f"job {wid}: num_gpus {gpus!r} is not a whole number of GPUs")
    else:
        gpus = _detail_gpus(wid, job.get("attempts"))
        if gpus == 0:
            raise _Unsized(wid)
    if gpus == 0:
        return None
    submit = clock.us(_text(job, "submitted_time"), f"job {wid}: submitted_time")
    attempts = job.get("attempts")
    if not isinstance(attempts, list):
        raise RowError(f"job {wid}: attempts {attempts!r} is not a list")
    status = job.get("status")
    outcome = 0  # succeeded
    if status is not None:
        if str(status).lower() not in _OUTCOMES:
            raise RowError(f"job {wid}: status {status!r} is not Pass, Failed or Killed")
        outcome = OUTCOMES.index(_OUTCOMES[str(status).lower()])
    runs: list[tuple[int, int | None, tuple[str, ...], bool]] = []
    previous_end = submit
    for i, att in enumerate(attempts, 1):
        if not isinstance(att, dict):
            raise RowError(f"job {wid}: attempt {i} is not an object")
        start = clock.us(_text(att, "start_time"), f"job {wid}: attempt {i} start_time")
        raw_end = att.get("end_time")
        end = None
        if raw_end not in (None, "", "None"):
            end = clock.us(str(raw_end), f"job {wid}: attempt {i} end_time")
        if start < previous_end:
            what = "submitted_time" if i == 1 else f"the end of attempt {i - 1}"
            raise RowError(f"job {wid}: attempt {i} starts {ev.from_us(start).isoformat()}, before {what}")
        if end is None and i < len(attempts):
            raise RowError(f"job {wid}: attempt {i} has no end_time but a later attempt")
        if end is not None and end < start:
            raise RowError(f"job {wid}: attempt {i} ends before it starts")
        hosts = tuple(str(d["ip"]) for d in att.get("detail") or () if isinstance(d, dict) and d.get("ip"))
        runs.append((start, end, hosts or (f"{opts.cluster}-unknown",), i < len(attempts)))
        previous_end = start if end is None else end
    last_end = runs[-1][1] if runs else None
    parts = [opts.cluster] + [str(job[k]) for k in ("vc", "user") if job.get(k)]
    return (
        wid, submit, budget_path(*parts), str(job.get("user") or "unknown"), gpus,
        outcome if last_end is not None else -1, last_end if last_end is not None else -1, runs,
    )  # fmt: skip


def import_philly(
    text: str, file: str, opts: PhillyOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read a Philly job list and return the events it stands for, with the import summary."""
    opts = opts or PhillyOptions()
    if not opts.cluster:
        raise ConfigError(f"--cluster {opts.cluster!r} is not a cluster name")
    res = ImportResult("philly", file, to=to or Destination())
    res.notes.append(f"times read in {getattr(opts.tz, 'key', None) or opts.tz}")
    clock = WallClock(opts.tz)
    seen = Seen()
    jobs: list[tuple[int, _Job]] = []
    zero = 0
    for line, job in iter_json_values(text):
        res.rows_read += 1
        if isinstance(job, JsonSyntaxError):
            res.reject(line, str(job))
            continue
        try:
            got = _job(job, opts, clock)
        except RowError as exc:
            res.reject(line, str(exc))
            continue
        except _Unsized:
            res.skipped["never scheduled: no GPU count"] += 1
            continue
        if got is None:
            zero += 1
        else:
            jobs.append((line, got))
            if len(jobs) == JOBS:
                _add(jobs, opts, seen, res)
                jobs = []
    _add(jobs, opts, seen, res)
    if zero:
        res.skipped["0 GPUs (not a GPU workload)"] += zero
    res.rejected.sort(key=_line)  # a job's own refusals and its repeated id's, in line order
    res.finish()
    return res


def _line(r: Rejection) -> int:
    return r.line


def _add(jobs: list[tuple[int, _Job]], opts: PhillyOptions, seen: Seen, res: ImportResult) -> None:
    """Add the events of good jobs (line, job), refusing a repeated id and a value the schema cannot hold."""
    if not jobs:
        return
    lines = np.array([line for line, _ in jobs], np.int64)
    again, refused = repeats(pa.array([j[0] for _, j in jobs], pa.string()), lines, seen)
    kept = [job for (_, job), a in zip(jobs, again.tolist(), strict=True) if not a]
    lines = lines[~again]
    runs = [(k, run) for k, job in enumerate(kept) for run in job[7]]
    hosts: dict[tuple[str, ...], int] = {}
    budgets: dict[str, int] = {}
    users: dict[str, int] = {}
    n = len(kept)
    run_rows = Runs(
        np.array([k for k, _ in runs], np.int64), np.array([r[0] for _, r in runs], np.int64),
        np.array([r[1] or 0 for _, r in runs], np.int64), np.array([r[1] is not None for _, r in runs], np.bool_),
        Coded(np.array([hosts.setdefault(r[2], len(hosts)) for _, r in runs], np.int64), []),
        np.array([REASONS.index("fair_share") if r[3] else 0 for _, r in runs], np.int64),
        np.array([r[3] for _, r in runs], np.bool_),
    )  # fmt: skip
    run_rows.hosts = Coded(run_rows.hosts.codes, list(hosts))
    histories = Histories(
        cluster=Coded(np.zeros(n, np.int64), [opts.cluster]),
        workload_id=pa.array([j[0] for j in kept], pa.string()),
        submit=np.array([j[1] for j in kept], np.int64),
        budget=Coded(np.array([budgets.setdefault(j[2], len(budgets)) for j in kept], np.int64), []),
        user=Coded(np.array([users.setdefault(j[3], len(users)) for j in kept], np.int64), []),
        gpus=np.array([j[4] for j in kept], dtype=object),
        min_runtime_s=np.full(n, opts.min_runtime_s, np.int64),
        resumable=np.array([len(j[7]) > 1 for j in kept], np.bool_),
        outcome=np.array([j[5] for j in kept], np.int64),
        end=np.array([j[6] for j in kept], np.int64),
        nodes=np.zeros(n, np.int64), priority=np.zeros(n, np.int64), kind=np.zeros(n, np.int64),
        work_s=np.full(n, -1, np.int64), rank=lines, runs=run_rows,
    )  # fmt: skip
    histories.budget = Coded(histories.budget.codes, list(budgets))
    histories.user = Coded(histories.user.codes, list(users))
    histories, bounds = checked(histories)
    for r, reason in bounds:
        refused.append((int(lines[r]), reason))
    for line, reason in refused:
        res.reject(line, reason)
    res.workloads += len(histories)
    res.add_histories(histories, "philly")


def import_philly_file(
    path: str | Path, opts: PhillyOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read a Philly job list file (JSON array or JSON Lines)."""
    with open(path, encoding="utf-8-sig") as fh:  # -sig: a byte-order mark, if any, is not text
        return import_philly(fh.read(), str(path), opts, to)
