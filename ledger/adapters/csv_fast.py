"""The CSV importer's fast path: the common rows read a column at a time, every other row by ``csv_trace.histories``.

Taken here: files without quote characters whose map names only ``workload_id``, ``submit``,
``gpus``, ``start``, ``end``, ``duration`` and ``budget`` (the shapes of the ITP traces and of
plain exports). A row is read here only when the per-row reader would surely accept it alone:
a clean workload id no other row shares, whole-number GPUs and durations, times as whole
seconds or the fixed ``YYYY-MM-DD[T ]HH:MM:SS`` form, in order and in range, a budget path the
per-row check accepts (checked once per distinct value). Every other row goes to the per-row
reader with its own line number, so rejections, skips and ids are exactly its own.
"""

from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger.adapters.batch import KINDS, OUTCOMES, HistoryBatch
from ledger.adapters.columns import Bools, Ints, bools, clean, clean_or_empty, column, digits, fixed_times, read_columns
from ledger.adapters.columns import per_value as _per_value
from ledger.adapters.common import EARLIEST_US, INT_MAX, LATEST_US, ImportResult, RowError
from ledger.adapters.csv_trace import _PATH, CsvOptions, _Reader, histories
from ledger.adapters.history import keep_histories

__all__ = ["fast_import_csv"]

_FAST_FIELDS = frozenset(("workload_id", "submit", "gpus", "start", "end", "duration", "budget"))
_TEN_YEARS_S = 10 * 366 * 86_400


def _times(arr: pa.Array, reader: _Reader) -> tuple[Ints, Bools]:
    """Return (µs, ok) of a time column as ``_Reader.time`` reads its common forms (whole seconds, fixed ISO)."""
    seconds, ok = digits(arr, 12)
    us = reader.epoch_us + seconds * 1_000_000
    ok &= (us >= EARLIEST_US) & (us < LATEST_US)
    if reader.epoch is None:
        iso, iso_ok = fixed_times(arr, reader.opts.tz)
        us = np.where(ok, us, iso)
        ok |= iso_ok
    return np.where(ok, us, 0), ok


def _budget(text: str) -> str:
    if not _PATH.match(text):
        raise RowError(f"budget {text!r} is not a budget path like org/team")
    return text


def fast_import_csv(data: bytes, file: str, opts: CsvOptions) -> ImportResult | None:
    """Import CSV bytes, the common rows column-wise; None when the file or map is not for the fast path."""
    if not set(opts.columns) <= _FAST_FIELDS or b'"' in data or len(opts.delimiter) != 1:
        return None
    eol = data.find(b"\n")
    first = data[: eol if eol >= 0 else len(data)].decode("utf-8", "replace")
    header = next(csv.reader([first], delimiter=opts.delimiter), None)
    if not header or len(header) < 2:
        return None
    reader = _Reader(header, opts, file)  # (raises the per-row reader's errors for the header and options)
    read = read_columns(data, [f"c{i}" for i in range(len(header))], opts.delimiter, False, 1)
    if read is None:
        return None
    table, line, other = read
    n = table.num_rows
    res = ImportResult("csv", file)
    if "start" not in opts.columns:
        res.notes.append("no start column: submissions only (work_s from duration); the file observed no waits")
    if reader.epoch is not None:
        res.notes.append(f"times are seconds after {reader.epoch.isoformat()}")
    i = reader.idx
    empty = pa.array([""] * n, pa.string())

    def col(index: int | None) -> pa.Array:
        return empty if index is None else column(table, f"c{index}")

    wid = col(i.workload_id)
    ok = clean(wid)
    gpus, good = digits(col(i.gpus), 9)
    ok &= good
    zero = ok & (gpus == 0)  # a 0-GPU row is skipped before anything else is read
    submit, good = _times(col(i.submit), reader)
    ok &= good
    start, has_start = _times(col(i.start), reader)
    ok &= has_start | np.asarray(pc.equal(col(i.start), "").to_numpy(zero_copy_only=False), np.bool_)
    end, has_end = _times(col(i.end), reader)
    ok &= has_end | np.asarray(pc.equal(col(i.end), "").to_numpy(zero_copy_only=False), np.bool_)
    duration, has_duration = digits(col(i.duration), 12)
    ok &= has_duration | np.asarray(pc.equal(col(i.duration), "").to_numpy(zero_copy_only=False), np.bool_)
    end = np.where(has_start & ~has_end & has_duration, start + duration * 1_000_000, end)
    has_end = has_end | (has_start & has_duration)
    ok &= ~has_start | (start >= submit)
    ok &= ~(has_start & has_end) | (end >= start)
    ok &= has_start | ~has_end | (end >= submit)
    budget_col = col(i.budget)
    ok &= clean_or_empty(budget_col)
    budget = pc.if_else(pc.equal(budget_col, ""), pa.scalar(reader.budget), budget_col)
    _, valid, code = _per_value(budget, _budget)
    ok &= valid[code]
    min_rt = opts.min_runtime_s
    ok &= (0 <= min_rt < _TEN_YEARS_S) & (~has_start | (start + min_rt * 1_000_000 < LATEST_US))
    ok &= gpus <= INT_MAX
    ok |= zero & clean(wid)
    counts = pc.value_counts(wid)
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):  # the first of repeated ids wins: the per-row reader decides which
        ok &= ~np.asarray(pc.is_in(wid, value_set=repeated).to_numpy(zero_copy_only=False), np.bool_)
    fast = ok
    if not ok.all():  # an id the per-row reader will read (after its strip) is no fast row's
        stripped = {text.strip() for text in wid.take(pa.array(np.flatnonzero(~ok))).to_pylist()}
        fast = ok & ~np.asarray(
            pc.is_in(wid, value_set=pa.array(sorted(stripped), pa.string())).to_numpy(zero_copy_only=False), np.bool_
        )
    slow = sorted(line[~fast].tolist() + other)
    if slow:
        lines = data.decode().split("\n")
        rows = ((k, next(csv.reader([lines[k - 1]], delimiter=opts.delimiter), [])) for k in slow)
        kept, places = keep_histories(res, histories(rows, reader, res), opts.cluster, "csv")
    else:
        kept, places = [], []
    zeros = int((fast & zero).sum())
    if zeros:
        res.skipped["0 GPUs (not a GPU workload)"] += zeros
    res.rows_read += int(fast.sum())
    take = fast & ~zero
    batch = _batch(take, line, wid, submit, budget, gpus, start, has_start, end, has_end, duration, has_duration, opts)
    res.add_batches([batch], kept, places)
    res.workloads += len(kept) + len(batch)
    res.sort_events()
    return res


def _batch(
    take: Bools, line: Ints, wid: pa.Array, submit: Ints, budget: pa.Array, gpus: Ints, start: Ints, has_start: Bools,
    end: Ints, has_end: Bools, duration: Ints, has_duration: Bools, opts: CsvOptions,
) -> HistoryBatch:  # fmt: skip
    """Return the histories of the fast rows ``take`` (``_Reader.history``, a column at a time)."""
    sel = bools(take)
    rows = np.flatnonzero(take)
    k = len(rows)
    ran, he = has_start[take], has_end[take]
    st, e = start[take], end[take]
    # an end without a start: cancelled while waiting; with one: succeeded (no outcome column here)
    outcome = np.where(he, np.where(ran, OUTCOMES.index("succeeded"), OUTCOMES.index("cancelled")), -1)
    work = np.where(has_duration[take], duration[take], (e - st) // 1_000_000)
    has_work = has_duration[take] | (ran & he)
    return HistoryBatch(
        source="csv",
        line=line[take],
        cluster=pa.array([opts.cluster] * k, pa.string()),
        workload_id=wid.filter(sel),
        submit=submit[take],
        budget=budget.filter(sel),
        user=pa.array(["unknown"] * k, pa.string()),
        gpus=gpus[take],
        min_runtime_s=np.full(k, opts.min_runtime_s, np.int64),
        resumable=np.zeros(k, np.bool_),
        nodes=np.zeros(k, np.int64),
        priority=np.zeros(k, np.int64),
        kind=np.full(k, KINDS.index("batch"), np.int64),
        work_s=np.where(has_work, work, 0),
        has_work=has_work,
        ran=ran,
        start=st,
        hosts=np.zeros(k, np.int64),
        host_lists=[(f"{opts.cluster}-unknown",)],
        end=e,
        has_end=he,
        preempted=np.full(k, -1, np.int64),
        requeued=np.zeros(k, np.bool_),
        outcome=outcome,
    )
