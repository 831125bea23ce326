"""The sacct importer's fast path: the common rows read a column at a time, every other row by ``slurm.read_rows``.

A row is read here only when the per-row reader would surely accept it and make from it, alone,
a workload with at most one run (or a step folded into such a workload): every time of the
fixed ``YYYY-MM-DD[T ]HH:MM:SS`` form, in order and in range; a known state; clean names; a
JobID no other record shares (no requeue duplicates, no pending array range naming it) and whose
job has no row that needs the per-row reader. Rules that depend on one field's value (the state,
a TRES string, the time limit, the partition, the node list, the budget path) are the per-row
functions, called once per distinct value. Every other row, and every row of a job that has
one, goes to ``read_rows`` with its own line number, so rejections, skips, duplicates and ids
are exactly the per-row reader's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger.adapters.batch import KINDS, OUTCOMES, REASONS, HistoryBatch
from ledger.adapters.columns import (
    Bools,
    Ints,
    bools,
    clean,
    clean_values,
    column,
    digits,
    fixed_times,
    per_value,
    read_columns,
    strings_equal,
)
from ledger.adapters.common import INT_MAX, LATEST_US, ImportResult, budget_path
from ledger.adapters.slurm import (
    _FINAL,
    _INTERRUPT,
    _KNOWN,
    _NO_TIME,
    _REQUEUED,
    NOHEADER_FIELDS,
    SlurmOptions,
    _hosts,
    _is_header,
    _kind,
    _Layout,
    parse_gpus,
    parse_timelimit,
    read_rows,
)

__all__ = ["fast_import_sacct"]

_TEN_YEARS_S = 10 * 366 * 86_400
_READ = ("jobid", "state", "submit", "start", "end", "cluster", "partition", "account", "user", "uid", "nnodes",
         "timelimit", "nodelist")  # fmt: skip


def _state(raw: str) -> str:
    """Return the state a State field names, as ``_parse_row`` reads it; ValueError if none."""
    state = raw if raw in _KNOWN else raw.split(" ", 1)[0].rstrip("+")  # 'CANCELLED by 0'
    if state not in _KNOWN or state == "REVOKED":
        raise ValueError(raw)  # (revoked rows are rare: the per-row reader counts them)
    return state


def _codes(*columns: pa.Array) -> tuple[Ints, list[tuple[str, ...]]]:
    """Return a code per row for the combination of several columns' values, and each code's values."""
    key = np.zeros(len(columns[0]), np.int64)
    dictionaries = []
    for col in columns:
        encoded = pc.dictionary_encode(col)
        dictionary = encoded.dictionary.to_pylist()
        dictionaries.append(dictionary)
        key = key * max(len(dictionary), 1) + np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)
    uniq, inverse = np.unique(key, return_inverse=True)
    found: list[tuple[str, ...]] = []
    for k in uniq.tolist():
        parts = []
        for dictionary in reversed(dictionaries):
            k, i = divmod(k, max(len(dictionary), 1))
            parts.append(dictionary[i])
        found.append(tuple(reversed(parts)))
    return inverse.reshape(-1).astype(np.int64), found


def fast_import_sacct(data: bytes, file: str, opts: SlurmOptions) -> ImportResult | None:
    """Import sacct --parsable2 bytes, the common rows column-wise; None when the file is not for the fast path."""
    eol = data.find(b"\n")
    first = data[: eol if eol >= 0 else len(data)].decode("utf-8", "replace").rstrip("\r\n")
    if not first or first.isspace():
        return None  # (the per-row reader looks for the header on the first line that is not blank)
    f = first.split("|")
    header = _is_header(f)
    names = (f[:-1] if f[-1] == "" else f) if header else list(NOHEADER_FIELDS)
    lay = _Layout(names, file)  # (raises the per-row reader's error for a header that lacks a column)
    width = len(f) if header else len(NOHEADER_FIELDS)
    skip = 1 if header else 0
    idx = {name.strip().lower(): i for i, name in enumerate(names)}
    # Only the fields the rules read are kept (the job name, the longest, is not: bad UTF-8 there
    # is replaced by the per-row reader and never shown, so it need not be checked either).
    used = sorted({idx[c] for c in _READ if c in idx} | set(lay.tres) | set(range(lay.n, width)))
    read = read_columns(data, [f"c{i}" for i in range(width)], "|", False, skip, [f"c{i}" for i in used])
    if read is None:
        return None
    table, line, other = read
    n = table.num_rows
    if width > lay.n and not all(strings_equal(column(table, f"c{i}"), "").all() for i in range(lay.n, width)):
        return None  # --parsable: every row must end in the empty field the per-row reader drops
    empty = pa.array([""] * n, pa.string())

    def col(name: str) -> pa.Array:
        return column(table, f"c{idx[name]}") if name in idx else empty

    res = ImportResult("slurm", file)
    res.notes.append(f"times read in {getattr(opts.tz, 'key', None) or opts.tz}")
    jobid, cluster_col = col("jobid"), col("cluster")
    ok = clean(jobid) & ~pc.match_substring(jobid, "_[").to_numpy(zero_copy_only=False)
    states, valid, state_code = per_value(col("state"), _state)
    ok &= valid[state_code]
    submit, good = fixed_times(col("submit"), opts.tz)
    ok &= good
    start, start_ok = fixed_times(col("start"), opts.tz)
    no_start = pc.is_in(col("start"), value_set=pa.array(sorted(_NO_TIME))).to_numpy(zero_copy_only=False)
    ok &= start_ok | no_start
    end, end_ok = fixed_times(col("end"), opts.tz)
    no_end = pc.is_in(col("end"), value_set=pa.array(sorted(_NO_TIME))).to_numpy(zero_copy_only=False)
    ok &= end_ok | no_end
    ran = start_ok & ~strings_equal(col("nodelist"), "None assigned")
    has_end = end_ok
    ok &= ~ran | (start >= submit)
    ok &= ~(ran & has_end) | (end >= start)
    gpus = np.zeros(n, np.int64)
    for i in lay.tres:
        counts, _, code = per_value(column(table, f"c{i}"), parse_gpus)
        g = np.array([c if c is not None and c <= INT_MAX else -1 for c in counts], np.int64)[code]
        gpus = np.where(gpus == 0, g, gpus)
    ok &= gpus >= 0
    if opts.cluster:
        cluster = pa.array([opts.cluster] * n, pa.string())
    else:
        cluster = cluster_col
        ok &= clean_values(cluster_col)
    user_col, uid_col = col("user"), col("uid")
    ok &= clean_values(user_col, empty_ok=True) & clean_values(uid_col, empty_ok=True)
    user = pc.if_else(
        pc.equal(user_col, ""), pc.if_else(pc.equal(uid_col, ""), pa.scalar("unknown"), uid_col), user_col
    )
    nn_col = col("nnodes")
    nnodes, nn_ok = digits(nn_col, 9)
    ok &= nn_ok | strings_equal(nn_col, "")
    min_rt = np.full(n, opts.min_runtime_s, np.int64)
    if lay.has_timelimit:
        limits, valid, code = per_value(col("timelimit"), _timelimit)
        # min_runtime_s cut to the time limit when that is shorter (the per-row rule)
        rt = [opts.min_runtime_s if lim is None or lim < 0 or lim >= opts.min_runtime_s else lim for lim in limits]
        min_rt = np.array(rt, np.int64)[code]
        ok &= valid[code]
    kinds, _, kind_code = per_value(col("partition"), _kind)
    kind = np.array([KINDS.index(k) if k is not None else 0 for k in kinds], np.int64)[kind_code]
    outcome_of = np.array([_code(OUTCOMES, _FINAL.get(s or "")) for s in states], np.int64)[state_code]
    interrupt = np.array([_code(REASONS, _INTERRUPT.get(s or "")) for s in states], np.int64)[state_code]
    requeue = np.array([(s in _REQUEUED) for s in states], np.bool_)[state_code]
    # A job (not a step) must also pass the history's checks, or the per-row reader rejects it.
    step = pc.match_substring(jobid, ".").to_numpy(zero_copy_only=False)
    job_ok = ~((outcome_of >= 0) & ~has_end)  # "State X but End is Unknown"
    job_ok &= (min_rt >= 0) & (min_rt < _TEN_YEARS_S)
    job_ok &= ~ran | (start + min_rt * 1_000_000 < LATEST_US)
    ok &= step | job_ok
    fast, job_key = _fast_rows(ok, step, jobid, cluster, col("cluster"), opts)
    # -- the rows read row by row
    slow = sorted(line[~fast].tolist() + other)
    lines = data.decode("utf-8", errors="replace").split("\n") if slow else []  # (as the per-row reader reads)
    numbered = [(k, lines[k - 1]) for k in slow]
    if header:
        numbered.insert(0, (1, first))
    kept, places = read_rows(numbered, res, opts, _Layout(names, file) if not header else None)
    # -- steps among the fast rows: their GPUs fill in a job without any, and they are counted
    key_code = np.unique(job_key, return_inverse=True)[1].reshape(-1)
    fast_step = fast & step
    fast_job = fast & ~step
    nkeys = int(key_code.max()) + 1 if n else 0
    has_job = np.zeros(nkeys, np.bool_)
    has_job[key_code[fast_job]] = True
    step_gpus = np.zeros(nkeys, np.int64)
    np.maximum.at(step_gpus, key_code[fast_step], gpus[fast_step])
    folded = int(has_job[key_code[fast_step]].sum())
    if folded:
        res.skipped["job step (folded into its job)"] += folded
    if int(fast_step.sum()) - folded:
        res.skipped["job step whose job is not in the file"] += int(fast_step.sum()) - folded
    res.rows_read += int(fast.sum())
    gpus = np.where(fast_job & (gpus == 0), step_gpus[key_code], gpus)
    cpu = fast_job & (gpus == 0)
    if opts.gpus_for_cpu_jobs <= 0:
        if cpu.any():
            res.skipped["no GPUs (CPU job)"] += int(cpu.sum())
        take = fast_job & ~cpu
    else:
        gpus = np.where(cpu, opts.gpus_for_cpu_jobs, gpus)
        take = fast_job
    batch = _batch(take, line, cluster, jobid, submit, user, gpus, min_rt, requeue, nnodes, kind, ran, start,
                   end, has_end, interrupt, outcome_of, opts, col("account"), col("nodelist"))  # fmt: skip
    res.add_batches([batch], kept, places)
    res.workloads += len(kept) + len(batch)
    res.sort_events()
    return res


def _timelimit(text: str) -> int:
    """Return ``parse_timelimit`` of a field, -1 for no limit."""
    limit = parse_timelimit(text)
    return -1 if limit is None else limit


def _code(values: Sequence[str], value: str | None) -> int:
    return -1 if value is None else values.index(value)


def _fast_rows(
    ok: Bools, step: Bools, jobid: pa.Array, cluster: pa.Array, raw_cluster: pa.Array, opts: SlurmOptions
) -> tuple[Bools, Ints]:  # fmt: skip
    """Return the rows to read column-wise (``ok`` ones whose job has one record and no row for the per-row
    reader) and each row's job as a number (cluster and JobID before any '.')."""
    jobpart = pc.replace_substring_regex(jobid, r"\..*", "", max_replacements=1)
    clusters, jobs = pc.dictionary_encode(cluster), pc.dictionary_encode(jobpart)
    n_jobs = max(len(jobs.dictionary), 1)
    key = _indices(clusters) * n_jobs + _indices(jobs)
    bad: list[int] = []
    heads: set[str] = set()
    slow = np.flatnonzero(~ok)
    if len(slow):  # the per-row reader's key of every row it will read (its own strip and partition)
        rows = pa.array(slow)
        found = {c: k for k, c in enumerate(clusters.dictionary.to_pylist())}
        slow_clusters, slow_jobs = [], []
        for jid, c in zip(jobid.take(rows).to_pylist(), raw_cluster.take(rows).to_pylist(), strict=True):
            jid = jid.strip()
            slow_clusters.append(found.get(opts.cluster or c.strip(), -1))
            slow_jobs.append(jid.partition(".")[0])
            if "_[" in jid:
                heads.add(jid.partition("_[")[0] + "_")
        job_index = pc.index_in(pa.array(slow_jobs, pa.string()), value_set=jobs.dictionary)
        for c, j in zip(slow_clusters, job_index.to_pylist(), strict=True):
            if c >= 0 and j is not None:  # (else no fast row shares it)
                bad.append(c * n_jobs + j)
    # A job with several records (requeues) is joined by the per-row reader.
    uniq, counts = np.unique(key[ok & ~step], return_counts=True)
    fast = ok & ~np.isin(key, np.concatenate([uniq[counts > 1], np.array(bad, np.int64)]))
    if heads:  # tasks a pending array record may name
        parts = jobpart.to_pylist()
        for i in np.flatnonzero(fast).tolist():
            if "_" in parts[i] and any(parts[i].startswith(h) for h in heads):
                fast[i] = False
    return fast, key


def _indices(encoded: pa.DictionaryArray) -> Ints:
    out: Ints = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)
    return out


def _batch(
    take: Bools, line: Ints, cluster: pa.Array, jobid: pa.Array, submit: Ints, user: pa.Array, gpus: Ints,
    min_rt: Ints, requeue: Bools, nnodes: Ints, kind: Ints, ran: Bools, start: Ints, end: Ints, has_end: Bools,
    interrupt: Ints, outcome: Ints, opts: SlurmOptions, accounts: pa.Array, nodelists: pa.Array,
) -> HistoryBatch:  # fmt: skip
    """Return the histories of the fast job rows ``take`` (``_single_history``, a column at a time)."""
    sel = bools(take)
    c = cluster.filter(sel)
    rows = np.flatnonzero(take)
    account = accounts.filter(sel)
    users = user.filter(sel)
    budget_code, triples = _codes(c, account, users)
    budgets = pa.array([budget_path(*t) for t in triples], pa.string()).take(pa.array(budget_code))
    host_code, pairs = _codes(nodelists.filter(sel), c)
    host_lists = [_hosts(nodelist, cl) for nodelist, cl in pairs]
    r, e, he = ran[take], end[take], has_end[take]
    st, o = start[take], outcome[take]
    user_requeue = np.where(requeue[take], REASONS.index("user"), -1)
    preempted = np.where(r & he, np.where(interrupt[take] >= 0, interrupt[take], user_requeue), -1)
    work = (e - st) // 1_000_000
    has_work = (o == OUTCOMES.index("succeeded")) & r & he
    return HistoryBatch(
        source="slurm",
        line=line[take],
        cluster=c,
        workload_id=jobid.filter(sel),
        submit=submit[take],
        budget=budgets,
        user=users,
        gpus=gpus[take],
        min_runtime_s=min_rt[take],
        resumable=requeue[take] | opts.resumable,
        nodes=nnodes[take],
        priority=np.zeros(len(rows), np.int64),
        kind=kind[take],
        work_s=np.where(has_work, work, 0),
        has_work=has_work,
        ran=r,
        start=st,
        hosts=host_code,
        host_lists=host_lists,
        end=e,
        has_end=he,
        preempted=preempted,
        requeued=requeue[take] & (interrupt[take] < 0),
        outcome=o,
    )
