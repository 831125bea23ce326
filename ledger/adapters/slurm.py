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

**Reading.** A file is read ``LINES`` lines (about ``ledger.adapters.lines.SIZE`` bytes) at a time.
Each chunk's rows are checked field by field and kept as a table of records and one of steps;
when the file takes more than one chunk, the tables wait in a temporary file. Then the jobs are
assembled (``ledger.adapters.slurm_jobs``): a job whose records (requeues, steps) all lie in one
chunk from that chunk alone, the few whose records are spread over several chunks from all of
theirs together. So a file of any size needs the memory of a chunk, and 8 bytes a row (a hash of
its job) while its jobs are sorted out.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from ledger import events as ev
from ledger.adapters.columns import (
    WHITESPACE,
    Bools,
    Ints,
    Rules,
    codes_of,
    ints,
    mask,
    per_value,
    strip,
    text,
    times,
)
from ledger.adapters.columns import unstood as _unstood
from ledger.adapters.common import UTF8_BOM, Destination, ImportResult, RowError, budget_path
from ledger.adapters.history import KINDS
from ledger.adapters.hostlist import expand_ranges
from ledger.adapters.lines import file_pieces, pieces_of, split_lines
from ledger.adapters.slurm_jobs import KNOWN, STATES, add_jobs, strings, wide
from ledger.errors import InputError

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
    state = raw if raw in KNOWN else raw.split(" ", 1)[0].rstrip("+")
    if state not in KNOWN:
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
_SPACES = pa.array(list(WHITESPACE), pa.string())
_TASK_BITS = 22  # a record's place in the file: its line, then its array task (a range names fewer than 4M)
LINES = 1 << 18
"""Lines read at a time when they are given as strings (a file is read a piece of bytes at a time)."""
TABLES = 128 << 20
"""Bytes of checked records kept in memory until the jobs are assembled; the older chunks wait on disk."""
# What ``str.splitlines`` ends a line at, besides "\n", "\r\n" and a lone "\r" (a file with a carriage return and
# any of them is split as Python splits it), as UTF-8: each looked for alone (memchr), faster than one pattern
_OTHER_BREAK_BYTES = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")


def import_sacct(
    lines: Iterable[str], file: str, opts: SlurmOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read sacct --parsable2 lines and return the events they stand for, with the import summary."""
    reading = _Reading(file, opts or SlurmOptions(), to)
    chunk: list[str] = []
    number = 1
    for line in lines:
        chunk.append(line)
        if len(chunk) == LINES:
            column, stood_in = text(chunk)
            reading.read(pc.utf8_rtrim(column, characters="\r\n"), number, stood_in)
            number += len(chunk)
            chunk = []
    column, stood_in = text(chunk)
    reading.read(pc.utf8_rtrim(column, characters="\r\n"), number, stood_in)
    return reading.finish()


def import_sacct_bytes(
    data: bytes, file: str, opts: SlurmOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read a sacct file's bytes (UTF-8; a byte that is not is read as U+FFFD and named by the row checks)."""
    data = data.removeprefix(UTF8_BOM)  # a mark an editor put before line 1
    return _import_pieces(lambda: pieces_of(data), file, opts or SlurmOptions(), to)


def import_sacct_file(
    path: str | Path, opts: SlurmOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read a sacct --parsable2 file, a piece at a time."""
    with open(path, "rb") as fh:
        start = len(UTF8_BOM) if fh.read(len(UTF8_BOM)) == UTF8_BOM else 0

    def pieces() -> Iterator[tuple[bytes, int]]:
        with open(path, "rb") as fh:
            yield from file_pieces(fh, start)

    return _import_pieces(pieces, str(path), opts or SlurmOptions(), to)


def _other_breaks(piece: bytes) -> bool:
    """Tell whether text holds a line break ``str.splitlines`` knows besides "\\n" and "\\r\\n"."""
    return any(b in piece for b in _OTHER_BREAK_BYTES) or (b"\r" in piece and b"\r" in piece.replace(b"\r\n", b""))


def _import_pieces(
    pieces: Callable[[], Iterator[tuple[bytes, int]]], file: str, opts: SlurmOptions, to: Destination | None
) -> ImportResult:
    """Read a file given as pieces of whole lines; a file that ``str.splitlines`` would split elsewhere is read whole.

    A file with a carriage return and another character that ``str.splitlines`` breaks lines at
    is split as Python splits it. The other characters are looked for once a carriage return is
    met (a second reading); nothing reaches the destination before the whole file was read once,
    so finding them late never gives a wrong event.
    """
    reading = _Reading(file, opts, to)
    carriage = False
    number = 1
    for piece, offset in pieces():
        if not carriage and b"\r" in piece:
            carriage = True
            if any(_other_breaks(p) for p, _ in pieces()):
                reading.close()
                text_ = b"".join(p for p, _ in pieces()).decode("utf-8", errors="replace")
                return import_sacct(text_.splitlines(keepends=True), file, opts, to)  # lines as Python splits them
        try:
            lines = split_lines(piece, offset, universal=False)
        except UnicodeDecodeError:
            lines = split_lines(piece.decode("utf-8", errors="replace").encode(), offset, universal=False)
        if carriage:
            lines = pc.utf8_rtrim(lines, characters="\r\n")
        reading.read(lines, number, False)
        number += len(lines)
    return reading.finish()


class _Reading:
    """A sacct file being read: the layout its first line sets, and each chunk's records and steps, checked.

    ``read`` takes a chunk of lines and keeps its tables (on disk once there is more than one);
    ``finish`` assembles the jobs and adds their events to the result.
    """

    def __init__(self, file: str, opts: SlurmOptions, to: Destination | None) -> None:
        self.res = ImportResult("slurm", file, to=to or Destination())
        self.res.notes.append(f"times read in {getattr(opts.tz, 'key', None) or opts.tz}")
        self.opts = opts
        self.layout: _Layout | None = None
        self.stood_in = False
        self.chunks: list[tuple[pa.RecordBatch, pa.RecordBatch]] = []  # (records, steps) while in memory
        self.spilled = 0  # chunks on disk (the first ones)
        self.held = 0  # bytes of the chunks in memory
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.job_refusals: list[tuple[int, int, str]] = []  # (rank, line, reason) of records that made no job

    def read(self, lines: pa.StringArray, first: int, stood_in: bool) -> None:
        """Check a chunk of lines (``first``: the first one's number) and keep its records and steps."""
        self.stood_in |= stood_in
        tables = _rows(lines, first, self)
        if tables is None:
            return
        self.chunks.append(tables)
        self.held += tables[0].nbytes + tables[1].nbytes
        while self.held > TABLES and len(self.chunks) > 1:  # the oldest wait on disk
            self._spill(self.chunks.pop(0))

    def _add_jobs(self, records: pa.Table, steps: pa.Table) -> None:
        add_jobs(records, steps, self.res, self.job_refusals, gpus_for_cpu_jobs=self.opts.gpus_for_cpu_jobs,
                 resumable=self.opts.resumable, stood_in=self.stood_in)  # fmt: skip

    def _spill(self, pair: tuple[pa.RecordBatch, pa.RecordBatch]) -> None:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gpuledger-sacct-")
        for name, table in zip(("records", "steps"), pair, strict=True):
            with ipc.new_file(str(Path(self._tmp.name) / f"{name}{self.spilled:05d}.arrow"), table.schema) as out:
                out.write_batch(table)
        self.held -= pair[0].nbytes + pair[1].nbytes
        self.spilled += 1

    def _all_chunks(self) -> Iterator[tuple[pa.Table, pa.Table]]:
        """Yield every chunk's (records, steps) in file order: those on disk first (read, not mapped), then the rest."""
        for k in range(self.spilled):
            assert self._tmp is not None
            pair = []
            for name in ("records", "steps"):
                with pa.OSFile(str(Path(self._tmp.name) / f"{name}{k:05d}.arrow")) as source:
                    pair.append(ipc.open_file(source).read_all())
            yield pair[0], pair[1]
        for records, steps in self.chunks:
            yield pa.Table.from_batches([records]), pa.Table.from_batches([steps])

    def finish(self) -> ImportResult:
        """Assemble the jobs of every chunk, add their events, and return the result."""
        try:
            if self.spilled + len(self.chunks) > 1:
                self._assemble_spread()
            else:
                for records, steps in self._all_chunks():
                    self._add_jobs(records, steps)
            for _, line, reason in sorted(self.job_refusals):
                self.res.reject(line, reason)
            if self.stood_in:
                _unstood(self.res)
            self.res.finish()
            return self.res
        finally:
            self.close()

    def _assemble_spread(self) -> None:
        """Assemble the jobs chunk by chunk, and those whose records lie in several chunks together at the end."""
        hashes: list[npt.NDArray[np.uint64]] = []
        with _Hasher() as hasher:
            for records, steps in self._all_chunks():
                for table, ids in ((records, "rec_id"), (steps, "job")):
                    hashes.append(hasher.keys(table.column("cluster"), table.column(ids)))
        # a key met in more than one chunk: each chunk's keys once, then the keys counted over the chunks
        each = np.concatenate([np.unique(np.concatenate(hashes[k : k + 2])) for k in range(0, len(hashes), 2)])
        keys, counts = np.unique(each, return_counts=True)
        spread = keys[counts > 1]
        del each, keys, counts
        at = 0
        later: list[tuple[pa.Table, pa.Table]] = []
        for records, steps in self._all_chunks():
            r_hash, s_hash = hashes[at], hashes[at + 1]
            at += 2
            r_far, s_far = np.isin(r_hash, spread), np.isin(s_hash, spread)
            self._add_jobs(records.filter(pa.array(~r_far)), steps.filter(pa.array(~s_far)))
            if r_far.any() or s_far.any():
                later.append((_plain(records.filter(pa.array(r_far))), _plain(steps.filter(pa.array(s_far)))))
        if later:
            self._add_jobs(_joined([r for r, _ in later]), _joined([s for _, s in later]))

    def close(self) -> None:
        """Remove the tables waiting on disk."""
        self.chunks = []
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class _Hasher:
    """64-bit hashes of job keys (cluster, job id), to find the jobs whose records lie in several chunks."""

    def __enter__(self) -> _Hasher:
        import duckdb

        self._db = duckdb.connect()
        return self

    def keys(self, cluster: pa.Array, ids: pa.Array) -> npt.NDArray[np.uint64]:
        self._db.register("job_keys", pa.table({"c": strings(cluster), "j": strings(ids)}))
        try:
            got = self._db.execute("SELECT hash(c, j) AS h FROM job_keys").fetchnumpy()["h"]
        finally:
            self._db.unregister("job_keys")
        return np.asarray(got, np.uint64)

    def __exit__(self, *exc: object) -> None:
        self._db.close()


def _plain(table: pa.Table) -> pa.Table:
    """Return a table with its dictionary columns as plain ones (tables of several chunks can then be joined)."""
    return pa.table({name: strings(table.column(name)) for name in table.column_names})


def _joined(tables: list[pa.Table]) -> pa.Table:
    """Return tables of several chunks as one (whole numbers as text in all where one chunk had to write them so)."""
    for name in ("gpus", "nodes"):
        if name in tables[0].column_names and any(pa.types.is_string(t.schema.field(name).type) for t in tables):
            tables = [t.set_column(t.schema.get_field_index(name), name, t.column(name).cast(pa.string()))
                      for t in tables]  # fmt: skip
    return pa.concat_tables(tables)


def _rows(lines: pa.StringArray, first: int, st: _Reading) -> tuple[pa.RecordBatch, pa.RecordBatch] | None:
    """Check a chunk of lines a column at a time; return its (records, steps) tables, or None when it has no row.

    Rows read, skips and rejections go to the result. The first line of the file that is not
    blank decides the layout (a header names the fields; otherwise the 26-field ``--noheader`` layout).
    """
    res, opts = st.res, st.opts
    # a blank line (empty, or spaces only) is no row; only one that starts with a space can be one of spaces
    blank = mask(pc.equal(lines, ""))
    spaced = np.flatnonzero(mask(pc.is_in(pc.utf8_slice_codeunits(lines, 0, 1), value_set=_SPACES)))
    blank[spaced] = mask(pc.equal(strip(lines.take(pa.array(spaced, pa.int64()))), ""))
    filled = np.flatnonzero(~blank)
    if not len(filled):
        return None
    if st.layout is None:
        head = str(lines[int(filled[0])].as_py()).split("|")
        if _is_header(head):
            st.layout = _Layout(head[:-1] if head[-1] == "" else head, res.file)
            filled = filled[1:]
        else:
            st.layout = _Layout(NOHEADER_FIELDS, res.file)
    lay = st.layout
    if not len(filled):  # the header alone
        return None
    res.rows_read += len(filled)
    rows = lines.slice(int(filled[0]), len(filled)) if int(filled[-1]) - int(filled[0]) == len(filled) - 1 else (
        lines.take(pa.array(filled, pa.int64())))  # (no blank line among them: a slice, no copy)
    fields = pc.split_pattern(rows, "|")
    offsets = ints(fields.offsets)
    values = fields.values
    found = np.diff(offsets)
    width = lay.n
    last = values.take(pa.array(offsets[1:] - 1)) if len(filled) else values
    fits = (found == width) | ((found == width + 1) & mask(pc.equal(last, "")))  # --parsable: a trailing '|'
    refused = [
        (int(filled[r]) + first, f"expected {width} '|'-separated fields, found {found[r]}")
        for r in np.flatnonzero(~fits).tolist()
    ]
    good = np.flatnonzero(fits)
    line = filled[good] + first
    at = offsets[good]
    n = len(good)
    empty = pa.nulls(n, pa.string()).fill_null("")

    def col(name: str) -> pa.StringArray:
        k = lay.idx.get(name)
        return empty if k is None else values.take(pa.array(at + k))

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
        tres = values.take(pa.array(at + k))
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

    # Records: the rows the rules kept, less revoked rows and job steps, one per array task
    revoked_code = states.index("REVOKED") if "REVOKED" in states else -1
    revoked = rules.ok & (state_code == revoked_code)
    if revoked.any():
        res.skipped["revoked (ran on a sibling cluster)"] += int(revoked.sum())
    ok = rules.ok & ~revoked
    step = ok & mask(pc.match_substring(jobid, "."))
    job_rows = np.flatnonzero(ok & ~step)
    step_rows = np.flatnonzero(step)
    task = np.zeros(len(job_rows), np.int64)
    expand = [r for r in job_rows.tolist() if r in tasks]
    if expand:
        repeat = np.ones(len(job_rows), np.int64)
        repeat[np.searchsorted(job_rows, expand)] = [len(tasks[r]) for r in expand]
        src = np.repeat(job_rows, repeat)
        task = np.arange(len(src)) - np.repeat(np.cumsum(repeat) - repeat, repeat)
        ids = jobid.take(pa.array(src, pa.int64())).to_pylist()
        for r, k in zip(expand, np.searchsorted(src, expand).tolist(), strict=True):
            ids[k : k + len(tasks[r])] = tasks[r]
        rec_ids = pa.array(ids, jobid.type)
    else:
        src = job_rows
        rec_ids = jobid.take(pa.array(src, pa.int64()))
    rows = pa.array(src, pa.int64())
    budget_code, budget_keys = codes_of(cluster, col("account"), user)
    budgets = pa.array([budget_path(c, a, u) for c, a, u in budget_keys], pa.string())
    kind_code, kind_keys = codes_of(col("partition"))
    kinds = np.array([KINDS.index(_kind(p)) for (p,) in kind_keys], np.int8)
    state_of = np.array([STATES.index(s) if s else 0 for s in states], np.int8)
    records = pa.RecordBatch.from_pydict({
        "rec_id": rec_ids, "cluster": pc.dictionary_encode(cluster.take(rows)),
        "user": pc.dictionary_encode(user.take(rows)),
        "budget": pa.DictionaryArray.from_arrays(pa.array(budget_code[src].astype(np.int32)), budgets),
        "nodelist": pc.dictionary_encode(nodelist.take(rows)), "kind": kinds[kind_code[src]] if len(src) else
        np.zeros(0, np.int8), "line": line[src], "pos": (line[src] << _TASK_BITS) | task, "submit": submit[src],
        "start": start[src], "end": end[src], "ran": ran[src], "ended": ended[src], "gpus": wide(gpus[src]),
        "nodes": wide(nodes[src]), "min_rt": min_rt[src], "state": state_of[state_code[src]],
    })  # fmt: skip
    step_jobs = pc.list_element(pc.split_pattern(jobid.take(pa.array(step_rows, pa.int64())), ".", max_splits=1), 0)
    steps = pa.RecordBatch.from_pydict({
        "cluster": cluster.take(pa.array(step_rows, pa.int64())), "job": step_jobs, "gpus": wide(gpus[step_rows]),
    })  # fmt: skip
    return records, steps
