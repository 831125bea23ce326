"""Join a sacct file's records into workload histories.

A job's records (a row, or an array task of one; a requeued job has one per run) are put in order,
each record that ran becomes a run, one before the job's last record was interrupted and requeued,
the last record's state is the outcome, and records that contradict each other refuse the job
(``ledger.adapters.slurm`` reads the file and checks each row; this module sees checked columns).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ledger import events as ev
from ledger.adapters.columns import Ints, codes_of, group_of, ints, put_back, time_at
from ledger.adapters.common import LATEST_US, ImportResult
from ledger.adapters.history import OUTCOMES, REASONS, Histories, Runs, checked
from ledger.adapters.hostlist import expand_hostlist
from ledger.log.avro_columns import Coded

__all__ = ["KNOWN", "STATES", "add_jobs", "strings", "wide"]

Refusals = list[tuple[int, int, str]]
"""(rank, line, reason) of records that made no job."""

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
KNOWN = frozenset(_FINAL) | _REQUEUED | _RUNNING | _PENDING | {"REVOKED"}

_INTERRUPT: dict[str, ev.PreemptReason] = {
    "PREEMPTED": "fair_share",
    "NODE_FAIL": "host_failure",
    "BOOT_FAIL": "host_failure",
}

STATES = tuple(sorted(KNOWN))  # a record's state is its index here


@lru_cache(maxsize=65_536)
def _hosts(nodelist: str, cluster: str) -> tuple[str, ...]:
    """Return the hosts a NodeList names (cached: a cluster's jobs run on the same node lists again and again)."""
    try:
        hosts = expand_hostlist(nodelist) if nodelist else ()
    except ValueError:
        hosts = (nodelist,)
    return hosts or (f"{cluster}-unknown",)


def strings(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Return a column of strings as one plain array (a dictionary column decoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.cast(pa.string()) if pa.types.is_dictionary(column.type) else column


def wide(numbers: npt.NDArray[Any]) -> pa.Array:
    """Return whole numbers as a column: int64, or their decimal text when one does not fit (a value to refuse)."""
    if numbers.dtype != object:
        return pa.array(numbers, pa.int64())
    return pa.array([str(v) for v in numbers.tolist()], pa.string())


def _narrow(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[Any]:
    """Return a column ``wide`` made as numbers again (Python integers when one does not fit int64)."""
    if pa.types.is_integer(column.type):
        out: npt.NDArray[Any] = np.asarray(column.to_numpy(), np.int64)
        return out
    return np.array([int(v) for v in column.to_pylist()] + [None], dtype=object)[:-1]


class _Records:
    """The records of jobs (a row, or an array task of one), ordered job by job, with the columns they read."""

    def __init__(self, table: pa.Table, key: Ints) -> None:
        # a job's records in order: by submit, then start (none last), then place in the file
        first_seen = np.full(int(key.max()) + 1 if len(key) else 0, len(key), np.int64)
        np.minimum.at(first_seen, key, np.arange(len(key)))
        pos = np.asarray(table.column("pos").to_numpy(), np.int64)
        rank = pos[first_seen[key]] if len(key) else pos
        ran = np.asarray(table.column("ran").to_numpy(), np.bool_)
        submit = np.asarray(table.column("submit").to_numpy(), np.int64)
        start = np.asarray(table.column("start").to_numpy(), np.int64)
        order = np.lexsort((pos, np.where(ran, start, LATEST_US), submit, rank))
        taken = table.take(pa.array(order, pa.int64()))

        def numbers(name: str) -> Ints:
            out: Ints = np.asarray(taken.column(name).to_numpy(), np.int64)
            return out

        self.table = taken
        self.key = key[order]
        self.rank = rank[order]
        self.ids = taken.column("rec_id")
        self.line = numbers("line")
        self.submit = numbers("submit")
        self.start = numbers("start")
        self.end = numbers("end")
        self.ran = np.asarray(taken.column("ran").to_numpy(), np.bool_)
        self.ended = np.asarray(taken.column("ended").to_numpy(), np.bool_)
        self.gpus = _narrow(taken.column("gpus"))
        self.nodes = _narrow(taken.column("nodes"))
        self.min_rt = numbers("min_rt")
        self.state = np.asarray(taken.column("state").to_numpy(), np.int64)
        self.kind = np.asarray(taken.column("kind").to_numpy(), np.int64)


_FINAL_CODE = np.array([OUTCOMES.index(_FINAL[s]) if s in _FINAL else -1 for s in STATES], np.int64)
_INTERRUPT_CODE = np.array([REASONS.index(_INTERRUPT.get(s)) for s in STATES], np.int64)
_REQUEUE_STATE = np.array([s in _REQUEUED for s in STATES], np.bool_)


def add_jobs(
    records: pa.Table, steps: pa.Table, res: ImportResult, refusals: Refusals, *,
    gpus_for_cpu_jobs: int, resumable: bool, stood_in: bool,
) -> None:
    """Join each job's records into its history (runs, requeues, outcome), check it, and add its events to ``res``."""
    m = records.num_rows
    cluster = strings(records.column("cluster"))
    keys = group_of(
        pa.concat_arrays([cluster, strings(steps.column("cluster"))]),
        pa.concat_arrays([strings(records.column("rec_id")), strings(steps.column("job"))]),
    )
    rec_key, step_key = keys[:m], keys[m:]
    # a record the same as an earlier one of its job (submit, start, end, state) adds nothing: --duplicates
    kept = np.ones(m, np.bool_)
    several = np.flatnonzero(np.bincount(rec_key, minlength=len(keys) and int(keys.max()) + 1)[rec_key] > 1)
    if len(several):
        never = np.iinfo(np.int64).min
        table = records.take(pa.array(several, pa.int64()))

        def numbers(name: str) -> Ints:
            out: Ints = np.asarray(table.column(name).to_numpy(), np.int64)
            return out

        ran, ended = np.asarray(table.column("ran").to_numpy(), np.bool_), np.asarray(table.column("ended").to_numpy())
        same = np.stack([
            rec_key[several], numbers("submit"), np.where(ran, numbers("start"), never),
            np.where(ended, numbers("end"), never), numbers("state"),
        ], axis=1)  # fmt: skip
        _, first_seen = np.unique(same, axis=0, return_index=True)
        kept[several] = False
        kept[several[first_seen]] = True
    if not kept.all():
        res.skipped["duplicate record"] += int((~kept).sum())
    folded = np.isin(step_key, rec_key)
    if folded.any():
        res.skipped["job step (folded into its job)"] += int(folded.sum())
    if not folded.all():
        res.skipped["job step whose job is not in the file"] += int((~folded).sum())
    step_numbers = _narrow(steps.column("gpus"))
    step_gpus = np.zeros(len(keys) and int(keys.max()) + 1, step_numbers.dtype)
    np.maximum.at(step_gpus, step_key, step_numbers)
    if not kept.all():
        records, rec_key = records.filter(pa.array(kept)), rec_key[kept]
    if not records.num_rows:
        return
    histories = _histories(_Records(records, rec_key), step_gpus, res, refusals, gpus_for_cpu_jobs, resumable)
    if stood_in:
        put_back(histories, res, len(res.rejected))
    res.add_histories(histories, "slurm")


def _histories(
    recs: _Records, step_gpus: npt.NDArray[Any], res: ImportResult, refusals: Refusals, gpus_for_cpu_jobs: int,
    resumable: bool,
) -> Histories:
    """Return the checked histories of the jobs (records ``recs``, job by job); refuse the others."""
    m = len(recs.line)
    starts = np.flatnonzero(np.r_[True, recs.key[1:] != recs.key[:-1]])
    stops = np.r_[starts[1:], m]
    lasts = stops - 1
    key = recs.key[starts]
    gpus = np.maximum.reduceat(recs.gpus, starts)
    none = gpus == 0
    gpus[none] = step_gpus[key[none]]
    cpu = gpus == 0
    if cpu.any():
        if gpus_for_cpu_jobs <= 0:
            res.skipped["no GPUs (CPU job)"] += int(cpu.sum())
        gpus[cpu] = gpus_for_cpu_jobs
    wanted = ~cpu | (gpus_for_cpu_jobs > 0)
    outcome = _FINAL_CODE[recs.state[lasts]]
    # each record that ran is a run; one before the job's last record was interrupted and requeued
    is_last = np.zeros(m, np.bool_)
    is_last[lasts] = True
    interrupt = _INTERRUPT_CODE[recs.state]
    requeue_state = _REQUEUE_STATE[recs.state]
    last_reason = np.where(interrupt > 0, interrupt, np.where(requeue_state, 3, 0))
    reason = np.where(is_last, np.where(recs.ended, last_reason, 0), np.where(interrupt > 0, interrupt, 3))
    requeued = ~is_last | (recs.ended & (interrupt == 0) & requeue_state)
    runs_done = np.r_[0, np.cumsum(recs.ran)]
    n_runs = runs_done[stops] - runs_done[starts]
    the_run = np.maximum.reduceat(np.where(recs.ran, np.arange(m), -1), starts)
    only = np.maximum(the_run, 0)
    worked = (outcome == 0) & (n_runs == 1) & recs.ended[only]
    work_s = np.where(worked, (recs.end[only] - recs.start[only]) // 1_000_000, -1)
    unended = (outcome >= 0) & ~recs.ended[lasts]
    # a job of several records, or whose last one ended it without an End, is looked at alone
    alone = np.flatnonzero((((stops - starts) > 1) | unended) & wanted)
    refused = np.zeros(len(starts), np.bool_)
    for g in alone.tolist():
        why = _why_not(recs, int(starts[g]), int(stops[g]), bool(unended[g]), outcome[g] >= 0)
        if why is not None:
            refused[g] = True
            refusals.append((int(recs.rank[starts[g]]), int(recs.line[lasts[g]]), why))
    table = recs.table
    first = pa.array(starts, pa.int64())
    run_rows = np.flatnonzero(recs.ran)
    host_code, host_keys = codes_of(strings(table.column("nodelist")).take(pa.array(run_rows, pa.int64())),
                                    strings(table.column("cluster")).take(pa.array(run_rows, pa.int64())))
    group_of_record = np.repeat(np.arange(len(starts)), stops - starts)
    clusters = pc.dictionary_encode(strings(table.column("cluster")).take(first))
    budgets = pc.dictionary_encode(strings(table.column("budget")).take(first))
    users = pc.dictionary_encode(strings(table.column("user")).take(first))
    histories = Histories(
        cluster=Coded(ints(clusters.indices), clusters.dictionary.to_pylist()),
        workload_id=recs.ids.take(first).combine_chunks(), submit=recs.submit[starts],
        budget=Coded(ints(budgets.indices), budgets.dictionary.to_pylist()),
        user=Coded(ints(users.indices), users.dictionary.to_pylist()), gpus=gpus,
        min_runtime_s=recs.min_rt[lasts],
        resumable=(n_runs > 1) | requeue_state[lasts] | resumable, outcome=outcome,
        end=np.where(outcome >= 0, recs.end[lasts], 0), nodes=np.maximum.reduceat(recs.nodes, starts),
        priority=np.zeros(len(starts), np.int64), kind=recs.kind[starts], work_s=work_s,
        rank=recs.rank[starts], runs=Runs(
            group_of_record[run_rows], recs.start[run_rows], recs.end[run_rows], recs.ended[run_rows],
            Coded(host_code, [_hosts(nl, c) for nl, c in host_keys]), reason[run_rows], requeued[run_rows],
        ),
    )  # fmt: skip
    histories = histories.take(np.flatnonzero(wanted & ~refused))
    ranks, lines = histories.rank, recs.line[lasts][wanted & ~refused]
    histories, bounds = checked(histories)
    for r, reason_ in bounds:
        refusals.append((int(ranks[r]), int(lines[r]), reason_))
    res.workloads += len(histories)
    return histories


def _why_not(recs: _Records, a: int, b: int, unended: bool, ends: bool) -> str | None:
    """Return why the records ``a:b`` of one job make no history, in the order the rules are stated (None: they do)."""
    why = _contradiction(recs, a, b) if b - a > 1 else None
    if why is None and unended:
        why = f"State {STATES[recs.state[b - 1]]} but End is Unknown"
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
        f"({STATES[recs.state[last]]}, never started) at {time_at(int(recs.end[last]))}, "
        f"before the run of line {recs.line[ran[-1]]} ended"
    )
