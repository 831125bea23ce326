"""Import speed of the adapters (rows/s) on files made by repeating real rows.

* sacct: the rows of the xdmod reference file ``pozidriv.log`` (or the test slice when the data
  folder is absent), repeated with fresh job ids to ``ROWS`` rows; every row becomes a workload
  with three events.
* CSV, ITP shape: ``tests/data/itp/cluster10.csv`` repeated with fresh ids (one event a row).
* CSV, full shape: the sacct rows rewritten as ``id,submit,start,end,gpus,budget`` (three events a row).

Each figure is compared with a baseline measured in the same run on the same file: reading it
and splitting every line (``str.split`` for sacct, ``csv.reader`` for CSV), which no parser can
beat. The last line measures a whole ``gpuledger import`` into an embedded log (the log
re-validates every event and fsyncs once).
"""

from __future__ import annotations

import csv
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ledger.adapters.csv_trace import CsvOptions, import_csv_file, parse_column_map
from ledger.adapters.sink import append_to_log
from ledger.adapters.slurm import SlurmOptions, import_sacct_file

ROWS = int(os.environ.get("BENCH_ADAPTER_ROWS", "100000"))
ROOT = Path(__file__).resolve().parent.parent
REAL_SACCT = Path("/work/shared/data/xdmod-slurm-referencedata/pozidriv.log")
SLICE_SACCT = ROOT / "tests" / "data" / "slurm" / "pozidriv-slice.log"
ITP = ROOT / "tests" / "data" / "itp" / "cluster10.csv"


def best_of(n: int, fn: Callable[[], object]) -> tuple[float, float]:
    """Return the fastest wall time and the smallest CPU time of ``n`` runs, in seconds.

    On a shared machine the wall time includes waiting for a core; the CPU time (``process_time``)
    is what the work itself costs on the core it got.
    """
    walls, cpus = [], []
    for _ in range(n):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def sacct_rows() -> list[list[str]]:
    source = REAL_SACCT if REAL_SACCT.is_file() else SLICE_SACCT
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


def main() -> None:
    """Print rows/s for each adapter and its baseline."""
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
        cases: list[tuple[str, Path, Callable[[], object], Callable[[], object]]] = [
            ("sacct (3 events/row)", sacct, lambda: import_sacct_file(sacct, slurm_opts), lambda: split_lines(sacct)),
            ("csv, full (3 events/row)", full, lambda: import_csv_file(full, full_opts), lambda: csv_lines(full)),
            ("csv, ITP (1 event/row)", itp, lambda: import_csv_file(itp, itp_opts), lambda: csv_lines(itp)),
        ]
        n = ROWS
        print(f"{n} rows per file; best of 3 runs; cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'adapter':<28}{'rows/s wall':>12}{'rows/s CPU':>12}{'baseline CPU':>14}{'x baseline':>12}")
        for name, _path, run, baseline in cases:
            t, c = best_of(3, run)
            _, b = best_of(3, baseline)
            print(f"{name:<28}{n / t:>12,.0f}{n / c:>12,.0f}{n / b:>14,.0f}{c / b:>11.1f}x")
        log = tmp / "log"
        w, c0 = time.perf_counter(), time.process_time()
        res = import_sacct_file(sacct, slurm_opts)
        added = append_to_log(log, res.events)
        wall, cpu = time.perf_counter() - w, time.process_time() - c0
        print(f"{'sacct -> embedded log':<28}{n / wall:>12,.0f}{n / cpu:>12,.0f}"
              f"   ({added} events appended, each validated again by the log)")
