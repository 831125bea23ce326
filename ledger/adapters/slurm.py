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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.columns import (
    WHITESPACE,
    Bools,
    Ints,
    Rules,
    codes_of,
    group_of,
    ints,
    mask,
    per_value,
    put_back,
    strip,
    text,
    time_at,
    times,
)
from ledger.adapters.common import LATEST_US, UTF8_BOM, ImportResult, RowError, budget_path
from ledger.adapters.history import History, Run, check_history
from ledger.adapters.hostlist import expand_hostlist, expand_ranges
from ledger.errors import InputError
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
            raise InputError(f"{file}:1: header lacks column(s) {', '.join(missing)} (found {'|'.join(names)})")
        self.n = len(names)
        self.idx = idx
        tres = {"alloctres": "AllocTRES", "reqtres": "ReqTRES", "allocgres": "AllocGRES", "reqgres": "ReqGRES"}
        self.tres = [(idx[c], name) for c, name in tres.items() if c in idx]


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


def _array_tasks(jobid: str) -> list[str]:
    """Return the task ids a pending array record names ('7_[1-3,5%2]' -> 7_1, 7_2, 7_3, 7_5)."""
    head, _, rest = jobid.partition("_[")
    spec = rest.rstrip("]").split("%", 1)[0]
    try:
        return [f"{head}_{t}" for t in expand_ranges(spec)]
    except ValueError as exc:
        raise RowError(f"JobID {jobid!r}: array task list: {exc}") from None


def _state(raw: str) -> str:
    """Return the job state a State field names ('CANCELLED by 0' is CANCELLED); RowError if none."""
    state = raw if raw in _KNOWN else raw.split(" ", 1)[0].rstrip("+")
    if state not in _KNOWN:
        raise RowError(f"State {raw!r} is not a Slurm job state")
    return state


def _nodes(text: str) -> int:
    """Return the NNodes field's count (0 when empty); RowError if it is no whole number."""
    nn = text.strip()
    if nn and not (nn.isdigit() and nn.isascii()):
        raise RowError(f"NNodes {nn!r} is not a whole number")
    return int(nn) if nn else 0


def _numbers(results: list[int | None], codes: Ints) -> npt.NDArray[Any]:
    """Return per-value integers as a column (int64, or Python ints when one does not fit 63 bits)."""
    fits = all(r is None or -(1 << 62) < r < 1 << 62 for r in results)
    values = np.array([0 if r is None else r for r in results], np.int64 if fits else object)
    return values[codes]


def _tres_reason(name: str, tres: pa.StringArray, errors: list[str | None], code: Ints) -> Callable[[int], str]:
    """Return how to phrase a TRES column's refusal of a row: the column, its value, why."""
    return lambda r: f"{name} {tres[r].as_py()!r}: {errors[code[r]]}"


def _timelimit(text: str) -> int:
    """Return a time limit in seconds, -1 when unlimited."""
    limit = parse_timelimit(text)
    return -1 if limit is None else limit


def _flags(values: list[Any], codes: Ints) -> Bools:
    """Return where a per-value result is not None (a per-value error, mostly)."""
    out: Bools = np.array([v is not None for v in values], np.bool_)[codes]
    return out


_NO_TIMES = pa.array(sorted(_NO_TIME), pa.string())
_LARGE = 1 << 30  # characters: a file this long is split into a column of 64-bit offsets
_SPACES = pa.array(list(WHITESPACE), pa.string())
_REASONS: tuple[ev.PreemptReason | None, ...] = (None, "fair_share", "host_failure", "user")


def import_sacct(lines: Iterable[str], file: str, opts: SlurmOptions | None = None) -> ImportResult:
    """Read sacct --parsable2 lines and return the events they stand for, with the import summary."""
    column, stood_in = text(list(lines))
    return _import(pc.utf8_rtrim(column, characters="\r\n"), stood_in, file, opts or SlurmOptions())


# What ``str.splitlines`` ends a line at, besides "\n" and "\r\n" (a file with any of them is split by it)
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def import_sacct_bytes(data: bytes, file: str, opts: SlurmOptions | None = None) -> ImportResult:
    """Read a sacct file's bytes (UTF-8; a byte that is not is read as U+FFFD and named by the row checks)."""
    text = data.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")  # a mark an editor put before line 1
    if "\r" in text and _OTHER_BREAKS.search(text.replace("\r\n", "\n")):
        return import_sacct(text.splitlines(keepends=True), file, opts)  # lines as Python splits them
    whole = pa.array([text], pa.large_string() if len(text) >= _LARGE else pa.string())
    lines = pc.split_pattern(whole, "\n").values  # a column of lines, split in one call
    if "\r" in text:
        lines = pc.utf8_rtrim(lines, characters="\r\n")
    return _import(lines, False, file, opts or SlurmOptions())


def _import(lines: pa.StringArray, stood_in: bool, file: str, opts: SlurmOptions) -> ImportResult:
    res = ImportResult("slurm", file)
    res.notes.append(f"times read in {getattr(opts.tz, 'key', None) or opts.tz}")
    with paused_gc():  # many small objects, no cycles: see paused_gc
        kept = _read(lines, res, opts)
        if stood_in:
            put_back(kept, res)
        res.add_histories(kept)
        res.workloads += len(kept)
        res.sort_events()
    return res


def import_sacct_file(path: str | Path, opts: SlurmOptions | None = None) -> ImportResult:
    """Read a sacct --parsable2 file."""
    return import_sacct_bytes(Path(path).read_bytes(), str(path), opts)


def _read(lines: pa.StringArray, res: ImportResult, opts: SlurmOptions) -> list[tuple[History, str, str]]:
    """Read the lines a column at a time and return the checked histories, in the order their jobs appear.

    Rows read, skips and rejections go to ``res``. The first line that is not blank decides the
    layout (a header names the fields; otherwise the 26-field ``--noheader`` layout).
    """
    # a blank line (empty, or spaces only) is no row; only one that starts with a space can be one of spaces
    blank = mask(pc.equal(lines, ""))
    spaced = np.flatnonzero(mask(pc.is_in(pc.utf8_slice_codeunits(lines, 0, 1), value_set=_SPACES)))
    blank[spaced] = mask(pc.equal(strip(lines.take(pa.array(spaced, pa.int64()))), ""))
    filled = np.flatnonzero(~blank)
    if not len(filled):
        return []
    head = str(lines[int(filled[0])].as_py()).split("|")
    if _is_header(head):
        lay = _Layout(head[:-1] if head[-1] == "" else head, res.file)
        filled = filled[1:]
    else:
        lay = _Layout(NOHEADER_FIELDS, res.file)
    res.rows_read += len(filled)
    fields = pc.split_pattern(lines.take(pa.array(filled, pa.int64())), "|")
    offsets = ints(fields.offsets)
    values = fields.values
    found = np.diff(offsets)
    width = lay.n
    last = values.take(pa.array(offsets[1:] - 1)) if len(filled) else values
    fits = (found == width) | ((found == width + 1) & mask(pc.equal(last, "")))  # --parsable: a trailing '|'
    refused = [
        (int(filled[r]) + 1, f"expected {width} '|'-separated fields, found {found[r]}")
        for r in np.flatnonzero(~fits).tolist()
    ]
    good = np.flatnonzero(fits)
    line = filled[good] + 1
    first = offsets[good]
    n = len(good)
    empty = pa.nulls(n, pa.string()).fill_null("")

    def col(name: str) -> pa.StringArray:
        k = lay.idx.get(name)
        return empty if k is None else values.take(pa.array(first + k))

    rules = Rules(n)
    jobid = strip(col("jobid"))
    rules.add(mask(pc.equal(jobid, "")), lambda r: "JobID is empty")
    states, state_errors, state_code = per_value(col("state"), _state)
    rules.add(_flags(state_errors, state_code), lambda r: str(state_errors[state_code[r]]))
    t_submit, t_start, t_end, nodelist = col("submit"), col("start"), col("end"), col("nodelist")
    no_submit = mask(pc.is_in(t_submit, value_set=_NO_TIMES))
    rules.add(no_submit, lambda r: f"Submit {t_submit[r].as_py()!r} is not a time")
    submit, bad, why = times(t_submit, opts.tz, "Submit", skip=no_submit)
    rules.add(bad, why)
    no_start = mask(pc.is_in(t_start, value_set=_NO_TIMES))
    start, bad, why = times(t_start, opts.tz, "Start", skip=no_start)
    rules.add(bad & ~no_start, why)
    ran = ~no_start & ~mask(pc.equal(nodelist, "None assigned"))  # cancelled while pending: Start = End, nothing ran
    ended = ~mask(pc.is_in(t_end, value_set=_NO_TIMES))
    end, bad, why = times(t_end, opts.tz, "End", skip=~ended)
    rules.add(bad & ended, why)
    rules.add(ran & (start < submit), lambda r: f"Start {t_start[r]} is before Submit {t_submit[r]}")
    rules.add(ran & ended & (end < start), lambda r: f"End {t_end[r]} is before Start {t_start[r]}")
    gpus: npt.NDArray[Any] = np.zeros(n, np.int64)
    decided = np.zeros(n, np.bool_)  # the first TRES column with a GPU count (or a wrong one) decides
    for k, name in lay.tres:
        tres = values.take(pa.array(first + k))
        counts, errors, code = per_value(tres, parse_gpus)
        wrong = _flags(errors, code) & ~decided
        rules.add(wrong, _tres_reason(name, tres, errors, code))
        here = _numbers(counts, code)
        gpus = np.where(decided, gpus, here)
        decided |= wrong | (here > 0)
    if opts.cluster:
        cluster = pa.nulls(n, pa.string()).fill_null(opts.cluster)
    else:
        cluster = strip(col("cluster"))
        rules.add(mask(pc.equal(cluster, "")), lambda r: "Cluster is empty (give --cluster)")
    user = strip(col("user"))
    user = pc.if_else(pc.equal(user, ""), strip(col("uid")), user)
    user = pc.if_else(pc.equal(user, ""), pa.scalar("unknown"), user)
    counts, errors, code = per_value(col("nnodes"), _nodes)
    rules.add(_flags(errors, code), lambda r: str(errors[code[r]]))
    nodes = _numbers(counts, code)
    min_rt = np.full(n, opts.min_runtime_s, np.int64)
    if "timelimit" in lay.idx:
        limits, limit_errors, limit_code = per_value(col("timelimit"), _timelimit)
        rules.add(_flags(limit_errors, limit_code), lambda r: str(limit_errors[limit_code[r]]))
        cut = [opts.min_runtime_s if t is None or t < 0 or t >= opts.min_runtime_s else t for t in limits]
        min_rt = np.array(cut, np.int64)[limit_code]
    ranges = np.flatnonzero(mask(pc.match_substring(jobid, "_[")))
    tasks: dict[int, list[str]] = {}
    task_errors: dict[int, str] = {}
    for r, value in zip(ranges.tolist(), jobid.take(pa.array(ranges, pa.int64())).to_pylist(), strict=True):
        try:
            tasks[r] = _array_tasks(value)
        except RowError as exc:
            task_errors[r] = str(exc)
    array_wrong = np.zeros(n, np.bool_)
    array_wrong[list(task_errors)] = True
    rules.add(array_wrong, task_errors.__getitem__)
    refused += [(int(line[r]), reason) for r, reason in rules.refused()]
    for number, reason in sorted(refused, key=lambda x: x[0]):
        res.reject(number, reason)

    # Jobs: the rows the rules kept, less revoked rows and job steps, a record per array task
    revoked_code = states.index("REVOKED") if "REVOKED" in states else -1
    revoked = rules.ok & (state_code == revoked_code)
    if revoked.any():
        res.skipped["revoked (ran on a sibling cluster)"] += int(revoked.sum())
    ok = rules.ok & ~revoked
    step = ok & mask(pc.match_substring(jobid, "."))
    job_rows = np.flatnonzero(ok & ~step)
    step_rows = np.flatnonzero(step)
    expand = [r for r in job_rows.tolist() if r in tasks]
    if expand:
        repeat = np.ones(len(job_rows), np.int64)
        repeat[np.searchsorted(job_rows, expand)] = [len(tasks[r]) for r in expand]
        src = np.repeat(job_rows, repeat)
        ids = jobid.take(pa.array(src, pa.int64())).to_pylist()
        at = np.searchsorted(src, expand)
        for r, k in zip(expand, at.tolist(), strict=True):
            ids[k : k + len(tasks[r])] = tasks[r]
        rec_ids = pa.array(ids, jobid.type)
    else:
        src = job_rows
        rec_ids = jobid.take(pa.array(src, pa.int64()))
    step_jobs = pc.list_element(pc.split_pattern(jobid.take(pa.array(step_rows, pa.int64())), ".", max_splits=1), 0)
    keys = group_of(
        pa.concat_arrays([cluster.take(pa.array(src, pa.int64())), cluster.take(pa.array(step_rows, pa.int64()))]),
        pa.concat_arrays([rec_ids, step_jobs]),
    )
    rec_key, step_key = keys[: len(src)], keys[len(src) :]
    # a record the same as an earlier one of its job (submit, start, end, state) adds nothing: --duplicates
    never = np.iinfo(np.int64).min
    normal = np.array([sorted(set(s for s in states if s is not None)).index(s) if s else -1 for s in states])
    same = np.stack([
        rec_key, submit[src], np.where(ran[src], start[src], never), np.where(ended[src], end[src], never),
        normal[state_code[src]],
    ], axis=1)  # fmt: skip
    _, first_seen = np.unique(same, axis=0, return_index=True)
    kept = np.zeros(len(src), np.bool_)
    kept[first_seen] = True
    if not kept.all():
        res.skipped["duplicate record"] += int((~kept).sum())
    folded = np.isin(step_key, rec_key)
    if folded.any():
        res.skipped["job step (folded into its job)"] += int(folded.sum())
    if not folded.all():
        res.skipped["job step whose job is not in the file"] += int((~folded).sum())
    step_gpus = np.zeros(len(keys), gpus.dtype)
    np.maximum.at(step_gpus, step_key, gpus[step_rows])
    src, rec_key, rec_ids = src[kept], rec_key[kept], rec_ids.filter(pa.array(kept))
    budget_code, budget_keys = codes_of(cluster, col("account"), user)
    kind_code, kind_keys = codes_of(col("partition"))
    host_code, host_keys = codes_of(nodelist, cluster)
    names = _Names(
        [budget_path(c, a, u) for c, a, u in budget_keys], budget_code, [_kind(p) for (p,) in kind_keys], kind_code,
        [_hosts(nl, c) for nl, c in host_keys], host_code, cluster, user,
    )  # fmt: skip
    return _jobs(_Records(src, rec_key, rec_ids, line, submit, start, end, ran, ended, gpus, nodes, min_rt,
                          states, state_code), names, step_gpus, res, opts)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Names:
    """What a row's names stand for, each made once per distinct value: budget paths, kinds, hosts."""

    budgets: list[str]
    budget: Ints
    kinds: list[ev.WorkloadKind]
    kind: Ints
    hosts: list[tuple[str, ...]]
    host: Ints
    cluster: pa.StringArray
    user: pa.StringArray


class _Records:
    """The records of jobs (a row, or an array task of one), with the row columns they read."""

    def __init__(
        self, src: Ints, key: Ints, ids: pa.StringArray, line: Ints, submit: Ints, start: Ints, end: Ints,
        ran: Bools, ended: Bools, gpus: npt.NDArray[Any], nodes: npt.NDArray[Any], min_rt: Ints,
        states: list[str | None], state_code: Ints,
    ) -> None:  # fmt: skip
        # a job's records in order: by submit, then start (none last), then line
        first_seen = np.full(int(key.max()) + 1 if len(key) else 0, len(key), np.int64)
        np.minimum.at(first_seen, key, np.arange(len(key)))
        rank = first_seen[key]
        s_ran = ran[src]
        order = np.lexsort((line[src], np.where(s_ran, start[src], LATEST_US), submit[src], rank))
        take = src[order]
        self.row = take
        self.ids = ids.take(pa.array(order, pa.int64()))
        self.key = key[order]
        self.line = line[take]
        self.submit = submit[take]
        self.start = start[take]
        self.end = end[take]
        self.ran = ran[take]
        self.ended = ended[take]
        self.gpus = gpus[take]
        self.nodes = nodes[take]
        self.min_rt = min_rt[take]
        self.state = state_code[take]
        self.states = states


def _jobs(
    recs: _Records, names: _Names, step_gpus: npt.NDArray[Any], res: ImportResult, opts: SlurmOptions
) -> list[tuple[History, str, str]]:
    """Join each job's records into its history (runs, requeues, outcome) and check it."""
    m = len(recs.row)
    if not m:
        return []
    starts = np.flatnonzero(np.r_[True, recs.key[1:] != recs.key[:-1]])
    stops = np.r_[starts[1:], m]
    lasts = stops - 1
    key = recs.key[starts]
    gpus = np.maximum.reduceat(recs.gpus, starts)
    none = gpus == 0
    gpus[none] = step_gpus[key[none]]
    cpu = gpus == 0
    if cpu.any():
        if opts.gpus_for_cpu_jobs <= 0:
            res.skipped["no GPUs (CPU job)"] += int(cpu.sum())
        gpus[cpu] = opts.gpus_for_cpu_jobs
    wanted = ~cpu | (opts.gpus_for_cpu_jobs > 0)
    states = recs.states
    state = [s or "" for s in states]
    final = [_FINAL.get(s) for s in state]
    last_state = recs.state[lasts]
    outcome_of = [final[c] for c in last_state.tolist()]
    # each record that ran is a run; one before the job's last record was interrupted and requeued
    is_last = np.zeros(m, np.bool_)
    is_last[lasts] = True
    interrupt = np.array([_REASONS.index(_INTERRUPT.get(s)) for s in state], np.int64)[recs.state]
    requeue_state = np.array([s in _REQUEUED for s in state], np.bool_)[recs.state]
    last_reason = np.where(interrupt > 0, interrupt, np.where(requeue_state, 3, 0))
    reason = np.where(is_last, np.where(recs.ended, last_reason, 0), np.where(interrupt > 0, interrupt, 3))
    requeued = ~is_last | (recs.ended & (interrupt == 0) & requeue_state)
    runs_done = np.r_[0, np.cumsum(recs.ran)]
    n_runs = runs_done[stops] - runs_done[starts]
    the_run = np.maximum.reduceat(np.where(recs.ran, np.arange(m), -1), starts)
    run_rows = np.flatnonzero(recs.ran)
    hosts = names.hosts
    host_code = names.host[recs.row]
    run_ends = zip(recs.end[run_rows].tolist(), recs.ended[run_rows].tolist(), strict=True)
    end_or_none = [e if k else None for e, k in run_ends]
    runs = [
        Run(s, e, hosts[h], _REASONS[p], q)
        for s, e, h, p, q in zip(
            recs.start[run_rows].tolist(), end_or_none, host_code[run_rows].tolist(),
            reason[run_rows].tolist(), requeued[run_rows].tolist(), strict=True,
        )
    ]  # fmt: skip
    budgets, kinds = names.budgets, names.kinds
    budget_code, kind_code = names.budget[recs.row], names.kind[recs.row]
    nodes = np.maximum.reduceat(recs.nodes, starts).tolist()
    succeeded = np.array([o == "succeeded" for o in outcome_of], np.bool_)
    only = np.maximum(the_run, 0)
    worked = succeeded & (n_runs == 1) & recs.ended[only]
    work_s = [w if k else None for w, k in zip(((recs.end[only] - recs.start[only]) // 1_000_000).tolist(),
                                                 worked.tolist(), strict=True)]  # fmt: skip
    unended = np.array([o is not None for o in outcome_of], np.bool_) & ~recs.ended[lasts]
    resumable = (n_runs > 1) | requeue_state[lasts] | opts.resumable
    first = pa.array(starts, pa.int64())
    first_rows = pa.array(recs.row[starts], pa.int64())
    # a job of several records, or whose last one ended it without an End, is looked at alone
    alone = (((stops - starts) > 1) | unended) & wanted
    kept: list[tuple[History, str, str]] = []
    for g, (wid, submit, budget, user, n_gpus, min_rt, again, r0, r1, outcome, end, n_nodes, kind, work, cluster,
             special) in (
        enumerate(zip(
            recs.ids.take(first).to_pylist(), recs.submit[starts].tolist(),
            [budgets[c] for c in budget_code[starts].tolist()], names.user.take(first_rows).to_pylist(), gpus.tolist(),
            recs.min_rt[lasts].tolist(), resumable.tolist(), runs_done[starts].tolist(), runs_done[stops].tolist(),
            outcome_of, recs.end[lasts].tolist(), nodes, [kinds[c] for c in kind_code[starts].tolist()], work_s,
            names.cluster.take(first_rows).to_pylist(), (~wanted | alone).tolist(), strict=True,
        ))
    ):  # fmt: skip
        if special:
            if wanted[g]:
                why = _why_not(recs, int(starts[g]), int(stops[g]), bool(unended[g]), outcome is not None)
                if why is not None:
                    res.reject(int(recs.line[stops[g] - 1]), why)
                    continue
            else:
                continue
        h = History(  # positional, in field order (see History)
            wid, submit, budget, user, n_gpus, min_rt, again, runs[r0:r1], outcome,
            end if outcome is not None else None, n_nodes, 0, kind, work,
        )  # fmt: skip
        try:
            check_history(h)
        except RowError as exc:
            res.reject(int(recs.line[stops[g] - 1]), str(exc))
            continue
        kept.append((h, cluster, "slurm"))
    return kept


def _why_not(recs: _Records, a: int, b: int, unended: bool, ends: bool) -> str | None:
    """Return why the records ``a:b`` of one job make no history, in the order the rules are stated (None: they do)."""
    why = _contradiction(recs, a, b) if b - a > 1 else None
    if why is None and unended:
        why = f"State {recs.states[recs.state[b - 1]]} but End is Unknown"
    if why is None and b - a > 1 and ends:
        why = _ended_before_a_run(recs, a, b)
    return why


def _contradiction(recs: _Records, a: int, b: int) -> str | None:
    """Return why a job's records cannot follow one another (a run starting before the one before it ended...)."""
    before = -1  # the record of the run before this one
    for k in range(a, b):
        if not recs.ran[k]:
            continue
        if before >= 0 and recs.ended[before] and recs.start[k] < recs.end[before]:
            return (
                f"JobID {recs.ids[k].as_py()}: record at line {recs.line[k]} starts at {time_at(int(recs.start[k]))}, "
                f"before the run of line {recs.line[before]} ended at {time_at(int(recs.end[before]))}"
            )
        before = k
        if k < b - 1 and not recs.ended[k]:
            return f"JobID {recs.ids[k].as_py()}: record at line {recs.line[k]} has a later record but no End"
    return None


def _ended_before_a_run(recs: _Records, a: int, b: int) -> str | None:
    """Return why a job's last record, which ended it without running, contradicts an earlier run (if it does)."""
    last = b - 1
    ran = [k for k in range(a, b) if recs.ran[k]]
    if not ran or ran[-1] == last or not recs.ended[ran[-1]] or recs.end[last] >= recs.end[ran[-1]]:
        return None
    return (  # the job ended before a run of it did: contradictory records
        f"JobID {recs.ids[last].as_py()}: record at line {recs.line[last]} ends the job "
        f"({recs.states[recs.state[last]]}, never started) at {time_at(int(recs.end[last]))}, "
        f"before the run of line {recs.line[ran[-1]]} ended"
    )
