"""Import speed of the adapters (rows/s), end to end: file -> parse -> records -> durable embedded log.

Files are made by repeating real rows with fresh ids, ``ROWS`` rows each:

* sacct: the rows of the sacct file ``BENCH_SACCT`` names, in the 26-field ``--noheader`` layout
  of Open XDMoD's Slurm exports (such as its reference file ``pozidriv.log``), or of the test slice
  of that file when it is not set; every row becomes a workload of about three events;
* CSV, full shape: the same rows as ``id,submit,start,end,gpus,budget`` (three events a row);
* CSV, ITP shape: ``tests/data/itp/cluster10.csv`` (one event a row).

Each run imports the file and appends its records to a fresh embedded log (one durable batch,
fsynced), exactly what ``gpuledger import FILE --out LOG`` does. Two baselines are measured in
the same run on the same data, and their sum is the floor for a pure-Python import into an Avro
log: reading the file and splitting every line (``str.split`` / ``csv.reader``), and bare
``fastavro.writer`` writing the import's very records to one container file with one fsync.
A last column writes the same records with the log's compiled block encoder alone (same bytes).

The machine is shared, so every figure is run ``REPEATS`` times and given as the median and the
range, in wall time and in the process's CPU time (what the work costs on the core it got).
"""

from __future__ import annotations

import csv
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from ledger.adapters.common import ImportResult, paused_gc
from ledger.adapters.csv_trace import CsvOptions, import_csv_file, parse_column_map
from ledger.adapters.sink import append_imports_to_log
from ledger.adapters.slurm import SlurmOptions, import_sacct_file
from ledger.codec import union_schema
from ledger.log.checks import FULL_NAMES
from ledger.log.container import BlockEncoder, new_header

ROWS = int(os.environ.get("BENCH_ADAPTER_ROWS", "100000"))
REPEATS = int(os.environ.get("BENCH_ADAPTER_REPEATS", "5"))
ROOT = Path(__file__).resolve().parent.parent
SLICE_SACCT = ROOT / "tests" / "data" / "slurm" / "pozidriv-slice.log"
ITP = ROOT / "tests" / "data" / "itp" / "cluster10.csv"


class Timing:
    """Wall and CPU seconds of repeated runs of one thing."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []

    def run(self, fn: Callable[[], object]) -> None:
        """Time one call of ``fn``."""
        w, c = time.perf_counter(), time.process_time()
        fn()
        self.walls.append(time.perf_counter() - w)
        self.cpus.append(time.process_time() - c)

    def rate(self, n: int, cpu: bool = False) -> tuple[float, float, float]:
        """Return (best, median, worst) of ``n`` per second."""
        xs = self.cpus if cpu else self.walls
        return n / min(xs), n / statistics.median(xs), n / max(xs)


def sacct_rows() -> list[list[str]]:
    named = os.environ.get("BENCH_SACCT")
    source = Path(named) if named else SLICE_SACCT
    if not source.is_file():
        raise SystemExit(f"BENCH_SACCT={named}: no such file")
    rows = [line.split("|") for line in source.read_text().splitlines() if line]
    out = []
    for k in range(ROWS // len(rows) + 1):
        for f in rows:
            g = list(f)
            g[0] = g[1] = f"{f[0]}{k:03d}"
            out.append(g)
    return out[:ROWS]


def write_files(tmp: Path) -> tuple[Path, Path, Path]:
    rows = sacct_rows()
    sacct = tmp / "sacct.log"
    sacct.write_text("".join("|".join(f) + "\n" for f in rows))
    full = tmp / "full.csv"
    with full.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "submit", "start", "end", "gpus", "budget"])
        for f in rows:
            w.writerow([f[0], f[10], f[12], f[13], 1, f"{f[2]}/{f[5]}/{f[8]}"])
    itp_rows = list(csv.reader(ITP.open()))
    header, body = itp_rows[0], itp_rows[1:]
    itp = tmp / "itp.csv"
    with itp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for k in range(ROWS // len(body) + 1):
            for r in body:
                w.writerow([f"{r[0]}-{k}", *r[1:]])
    return sacct, full, itp


def split_lines(path: Path) -> int:
    with path.open() as fh:
        return sum(1 for line in fh if line.split("|"))


def csv_lines(path: Path) -> int:
    with path.open(newline="") as fh:
        return sum(1 for _ in csv.reader(fh))


def bare_fastavro(records: list[tuple[str, dict[str, Any]]], path: Path) -> None:
    """Write the records to one Avro container file with bare fastavro, one block, one fsync."""
    full = FULL_NAMES
    with paused_gc(), path.open("wb") as fh:  # as the import pauses it: a like-for-like baseline
        fastavro.writer(fh, union_schema(), [(full[t], r) for t, r in records], codec="null", sync_interval=1 << 62)
        fh.flush()
        os.fsync(fh.fileno())


def bare_compiled(records: list[tuple[str, dict[str, Any]]], path: Path) -> None:
    """Write the records to one container file with the log's compiled block encoder, one block, one fsync."""
    full = FULL_NAMES
    sync = bytes(16)
    with paused_gc(), path.open("wb") as fh:
        fh.write(new_header(union_schema(), sync))
        fh.write(BlockEncoder(union_schema(), sync).encode([(full[t], r) for t, r in records]))
        fh.flush()
        os.fsync(fh.fileno())


def end_to_end(importer: Callable[[], ImportResult], log: Path) -> None:
    """Import a file and append its records to a fresh embedded log: ``gpuledger import FILE --out LOG``."""
    shutil.rmtree(log, ignore_errors=True)
    with paused_gc():  # as the import command: paused until the import's objects are freed
        res = importer()
        if res.rejected:
            raise SystemExit(f"benchmark file has malformed rows: {res.rejected[0]}")
        added = append_imports_to_log(log, [res])
        assert added == len(res.records), (added, len(res.records))
        del res


def _cell(rates: tuple[float, float, float]) -> str:
    """Return a median and its range (rows/s)."""
    return f"{rates[1]:>8,.0f} ({rates[2]:,.0f}-{rates[0]:,.0f})"


def main() -> None:
    """Print rows/s of each adapter end to end into the embedded log, with the baselines of the same run."""
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        sacct, full, itp = write_files(tmp)
        slurm_opts = SlurmOptions(gpus_for_cpu_jobs=1)
        full_opts = CsvOptions(
            columns=parse_column_map("workload_id=id,submit=submit,start=start,end=end,gpus=gpus,budget=budget")
        )
        itp_opts = CsvOptions(
            columns=parse_column_map("workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu"),
            epoch="2021-03-04T00:00:00",
        )
        cases: list[tuple[str, Callable[[], ImportResult], Callable[[], object]]] = [
            ("sacct", lambda: import_sacct_file(sacct, slurm_opts), lambda: split_lines(sacct)),
            ("CSV, full", lambda: import_csv_file(full, full_opts), lambda: csv_lines(full)),
            ("CSV, ITP", lambda: import_csv_file(itp, itp_opts), lambda: csv_lines(itp)),
        ]  # fmt: skip
        n = ROWS
        print(f"{n:,} rows per file; {REPEATS} runs each, median (worst-best) in rows/s; cores: {os.cpu_count()}; "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'adapter':<11}{'events/row':>11}{'end to end, wall':>33}{'end to end, CPU':>33}"
              f"{'split, CPU':>33}{'fastavro, CPU':>33}{'floor, CPU':>11}{'x floor':>8}"
              f"{'compiled, CPU':>33}")  # fmt: skip
        for name, importer, reader in cases:
            records = importer().records
            ours, base_read, base_avro, compiled = Timing(), Timing(), Timing(), Timing()
            for _ in range(REPEATS):  # interleaved, so a burst of load hits all four alike
                ours.run(lambda: end_to_end(importer, tmp / "log"))  # noqa: B023 - called at once
                base_read.run(reader)
                base_avro.run(lambda: bare_fastavro(records, tmp / "bare.avro"))  # noqa: B023
                compiled.run(lambda: bare_compiled(records, tmp / "compiled.avro"))  # noqa: B023
            floor = n / (min(base_read.cpus) + min(base_avro.cpus))
            best = ours.rate(n, cpu=True)[0]
            print(f"{name:<11}{len(records) / n:>11.2f}{_cell(ours.rate(n)):>33}{_cell(ours.rate(n, cpu=True)):>33}"
                  f"{_cell(base_read.rate(n, cpu=True)):>33}{_cell(base_avro.rate(n, cpu=True)):>33}"
                  f"{floor:>11,.0f}{best / floor:>8.2f}{_cell(compiled.rate(n, cpu=True)):>33}")  # fmt: skip
