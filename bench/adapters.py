"""Import speed and memory of ``gpuledger import``, the command as a user types it, against an earlier build.

Files of ``BENCH_ADAPTER_ROWS`` rows (default 1,000,000) are made by repeating real rows with fresh ids:

* sacct: the rows of the sacct file ``BENCH_SACCT`` names, in the 26-field ``--noheader`` layout of
  Open XDMoD's Slurm exports, or of the test slice of its reference file (``pozidriv.log``) when it
  is not set; every row becomes a workload of about three events (imported with
  ``--gpus-for-cpu-jobs 1``: most of them are CPU jobs);
* CSV, six columns: the same rows as ``id,submit,start,end,gpus,budget`` (three events a row);
* ITP: the shape of ``tests/data/itp/cluster10.csv`` (one event a row);
* Philly: the jobs of ``tests/data/philly/jobs-slice.json`` as one JSON array (about seven events a job).

Each file is imported into a fresh log by ``gpuledger import ... --out LOG`` in its own process,
timed until the command returns (wall, CPU of the process, peak memory), and with no ``--out``
(the dry run: the file read, checked and made into events, nothing encoded or written). With
``BENCH_BASELINE=DIR`` the same commands of the build in ``DIR`` (another checkout with its own
``.venv``, such as ``git worktree add DIR main`` and ``make build`` there) run in the same sitting,
interleaved with ours ``BENCH_ADAPTER_REPEATS`` times (default 3), and the logs they write must be
byte for byte the same. Figures are medians with the range; the load average is printed.

``BENCH_ADAPTER_KINDS=sacct,csv`` runs some of them (``itp``, ``philly``: the others).
``BENCH_ADAPTER_SCALE=10`` also imports sacct and CSV files ten times as long (ours only) and
prints the peak memory of both sizes: a file is read a piece at a time, so its length must not
set the memory an import needs. The real files (the sacct and ITP slices in ``tests/data``,
pozidriv's whole month, ITP cluster 4 in ``bench/data``, the Philly slice) are imported once each.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROWS = int(os.environ.get("BENCH_ADAPTER_ROWS", "1000000"))
REPEATS = int(os.environ.get("BENCH_ADAPTER_REPEATS", "3"))
SCALE = int(os.environ.get("BENCH_ADAPTER_SCALE", "1"))
BASELINE = os.environ.get("BENCH_BASELINE")
KINDS = ("sacct", "CSV, six columns", "ITP", "Philly")
_SHORT = {"sacct": "sacct", "csv": "CSV, six columns", "itp": "ITP", "philly": "Philly"}
CHOSEN = tuple(_SHORT[k.strip()] for k in os.environ.get("BENCH_ADAPTER_KINDS", "sacct,csv,itp,philly").split(","))
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SLICE_SACCT = DATA / "slurm" / "pozidriv-slice.log"
ITP = DATA / "itp" / "cluster10.csv"
PHILLY = DATA / "philly" / "jobs-slice.json"
FULL_MAP = "workload_id=id,submit=submit,start=start,end=end,gpus=gpus,budget=budget"
ITP_MAP = "workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu"

# Runs a command and reports its wall time, CPU time and the peak memory (max RSS) of that one process.
_TIMED = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t0
if done.returncode:
    sys.exit(done.stderr[-3000:])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": used.ru_utime + used.ru_stime, "peak": used.ru_maxrss * 1024}))
"""


def timed(command: Sequence[str]) -> dict[str, float]:
    """Return the wall and CPU seconds and peak memory (bytes) of a command run to its end in its own process."""
    done = subprocess.run([sys.executable, "-c", _TIMED, *command], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench.adapters: {' '.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def sacct_rows(n: int) -> Iterator[list[str]]:
    """Yield ``n`` sacct rows: the real rows repeated, each copy with fresh job ids."""
    named = os.environ.get("BENCH_SACCT")
    source = Path(named) if named else SLICE_SACCT
    if not source.is_file():
        raise SystemExit(f"BENCH_SACCT={named}: no such file")
    rows = [line.split("|") for line in source.read_text().splitlines() if line]
    for k in range(n // len(rows) + 1):
        for f in rows[: n - k * len(rows)]:
            g = list(f)
            g[0] = g[1] = f"{f[0]}{k:03d}"
            yield g


def write_files(tmp: Path, n: int, kinds: Sequence[str] = KINDS, tag: str = "") -> dict[str, Path]:
    """Write files of ``n`` rows of the kinds asked for (sacct, CSV, ITP, Philly); return them by kind."""
    out: dict[str, Path] = {}
    if "sacct" in kinds:
        out["sacct"] = tmp / f"sacct{tag}.log"
        with out["sacct"].open("w") as fh:
            fh.writelines("|".join(f) + "\n" for f in sacct_rows(n))
    if "CSV, six columns" in kinds:
        out["CSV, six columns"] = tmp / f"full{tag}.csv"
        with out["CSV, six columns"].open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "submit", "start", "end", "gpus", "budget"])
            w.writerows([f[0], f[10], f[12], f[13], 1, f"{f[2]}/{f[5]}/{f[8]}"] for f in sacct_rows(n))
    if "ITP" in kinds:
        itp_rows = list(csv.reader(ITP.open()))
        header, body = itp_rows[0], itp_rows[1:]
        out["ITP"] = tmp / f"itp{tag}.csv"
        with out["ITP"].open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows([f"{r[0]}-{k}", *r[1:]] for k in range(n // len(body) + 1) for r in body[: n - k * len(body)])
    if "Philly" in kinds:
        jobs = json.loads(PHILLY.read_text())
        out["Philly"] = tmp / f"philly{tag}.json"
        with out["Philly"].open("w") as fh:
            fh.write("[\n")
            for count in range(n):
                job = jobs[count % len(jobs)]
                fh.write((",\n" if count else "") + json.dumps({**job, "id": f"{job['id']}-{count // len(jobs)}"}))
            fh.write("\n]\n")
    return out


def command(gpuledger: str, name: str, path: Path, out: Path | None) -> list[str]:
    """Return the import command for a file of the kind ``name`` (into ``out``; None: a dry run)."""
    kind = {"sacct": ["slurm", "--gpus-for-cpu-jobs", "1"], "CSV, six columns": ["csv", "--map", FULL_MAP],
            "ITP": ["csv", "--map", ITP_MAP, "--epoch", "2021-03-04T00:00:00", "--cluster", "itp"],
            "Philly": ["philly"]}[name]  # fmt: skip
    return [gpuledger, "import", kind[0], str(path), *kind[1:], *(["--out", str(out)] if out else [])]


def _cell(values: list[float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def _same_logs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.glob("*.avro"))
    return names == sorted(p.name for p in b.glob("*.avro")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names
    )


def compare(files: dict[str, Path], n: int, tmp: Path) -> dict[str, Any]:
    """Import each file with ours (and the baseline), interleaved; print and return the figures."""
    ours_cli = str(Path(sys.executable).with_name("gpuledger"))
    base_cli = str(Path(BASELINE) / ".venv" / "bin" / "gpuledger") if BASELINE else None
    results: dict[str, Any] = {}
    print(f"{n:,} rows a file; {REPEATS} runs each, interleaved; median (min-max); load average "
          f"{os.getloadavg()[0]:.1f}; cores: {os.cpu_count()}")  # fmt: skip
    for name, path in files.items():
        runs: dict[str, list[dict[str, float]]] = {"ours": [], "dry": [], "base": []}
        same = None
        for _ in range(REPEATS):
            for who, cli, out in (("ours", ours_cli, tmp / "log-ours"), ("dry", ours_cli, None),
                                  ("base", base_cli, tmp / "log-base")):  # fmt: skip
                if cli is None:
                    continue
                if out is not None:
                    shutil.rmtree(out, ignore_errors=True)
                runs[who].append(timed(command(cli, name, path, out)))
            if base_cli is not None:
                same = _same_logs(tmp / "log-ours", tmp / "log-base")
        results[name] = runs
        ours, dry = runs["ours"], runs["dry"]
        peak = max(r["peak"] for r in ours) / 2**20
        print(f"  {name}: ours {_cell([n / r['wall'] for r in ours])} rows/s wall, "
              f"{_cell([n / r['cpu'] for r in ours])} rows/s CPU, peak {peak:,.0f} MiB; "
              f"reading and checking alone (dry run) {_cell([r['cpu'] for r in dry], '{:.2f}')} CPU s of "
              f"{_cell([r['cpu'] for r in ours], '{:.2f}')}")  # fmt: skip
        if runs["base"]:
            base = runs["base"]
            peak = max(r["peak"] for r in base) / 2**20
            wall = statistics.median(r["wall"] for r in base) / statistics.median(r["wall"] for r in ours)
            cpu = statistics.median(r["cpu"] for r in base) / statistics.median(r["cpu"] for r in ours)
            print(f"    baseline {_cell([n / r['wall'] for r in base])} rows/s wall, "
                  f"{_cell([n / r['cpu'] for r in base])} rows/s CPU, peak {peak:,.0f} MiB; "
                  f"ours / baseline {wall:.1f}x wall, {cpu:.1f}x CPU; same log bytes: {same}")  # fmt: skip
            if not same:
                raise SystemExit(f"bench.adapters: {name}: the logs of ours and the baseline differ")
    return results


def real_files(tmp: Path) -> None:
    """Import each real file once (ours): rows/s as typed, peak memory."""
    pozidriv = tmp / "pozidriv.log"
    with gzip.open(DATA / "slurm" / "pozidriv.log.gz", "rb") as src, pozidriv.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    files = {"sacct": [SLICE_SACCT, pozidriv], "ITP": [ITP, ROOT / "bench" / "data" / "itp" / "cluster04.csv"],
             "Philly": [PHILLY]}  # fmt: skip
    cli = str(Path(sys.executable).with_name("gpuledger"))
    print("real files (ours, one run each, the command as typed):")
    for name, paths in files.items():
        for path in paths:
            rows = sum(1 for _ in path.open()) - (name == "ITP")
            if name == "Philly":
                rows = len(json.loads(path.read_text()))
            shutil.rmtree(tmp / "log-real", ignore_errors=True)
            r = timed(command(cli, name, path, tmp / "log-real"))
            print(f"  {path.name}: {rows:,} rows, {r['wall']:.2f} s wall ({rows / r['wall']:,.0f} rows/s), "
                  f"{r['cpu']:.2f} CPU s, peak {r['peak'] / 2**20:,.0f} MiB")  # fmt: skip


def main() -> None:
    """Import the files as typed, against the baseline when one is named; print rows/s, ratios and peak memory."""
    with tempfile.TemporaryDirectory(prefix="bench-adapters-", dir=os.environ.get("BENCH_TMP")) as tmpdir:
        tmp = Path(tmpdir)
        compare(write_files(tmp, ROWS, CHOSEN), ROWS, tmp)
        if SCALE > 1:
            scaled = tuple(k for k in ("sacct", "CSV, six columns") if k in CHOSEN)
            big = write_files(tmp, ROWS * SCALE, scaled, "-big")
            small = write_files(tmp, ROWS, scaled)
            cli = str(Path(sys.executable).with_name("gpuledger"))
            print(f"{ROWS * SCALE:,} rows against {ROWS:,} (ours, one run each): peak memory")
            for name in scaled:
                runs = []
                for path in (small[name], big[name]):
                    shutil.rmtree(tmp / "log-scale", ignore_errors=True)
                    runs.append(timed(command(cli, name, path, tmp / "log-scale")))
                shutil.rmtree(tmp / "log-scale", ignore_errors=True)
                one, ten = runs
                print(f"  {name}: {ROWS:,} rows peak {one['peak'] / 2**20:,.0f} MiB ({ROWS / one['wall']:,.0f} "
                      f"rows/s); {ROWS * SCALE:,} rows peak {ten['peak'] / 2**20:,.0f} MiB "
                      f"({ROWS * SCALE / ten['wall']:,.0f} rows/s): {ten['peak'] / one['peak']:.2f}x the memory for "
                      f"{SCALE}x the rows")  # fmt: skip
            for path in big.values():
                path.unlink()
        real_files(tmp)


if __name__ == "__main__":
    main()
