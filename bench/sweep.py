"""A what-if sweep: ``gpuledger compare`` of 8 settings in a process pool against the same 8 one by one.

The month (``BENCH_SWEEP_MONTH``: ``demo``, the ~9,800-workload month, by default; ``full``) is
written as a trace and a budgets file, then ``gpuledger compare`` replays and audits it under 8
protected-runtime caps (30m ... 24h), once with ``--jobs 1`` and once with ``--jobs N`` (the cores,
or ``BENCH_SWEEP_JOBS``), back to back, ``BENCH_REPEAT`` times (default 1). Both print the same
table (checked); the figure is the wall-time speed-up, with the load average at each start.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CAPS = "30m,1h,2h,4h,6h,8h,12h,24h"


def _compare(trace: Path, budgets: Path, until: str, jobs: int) -> tuple[float, float, str]:
    cli = Path(sys.executable).with_name("gpuledger")
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "ledger.cli"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(
        [*command, "compare", str(trace), "--budgets", str(budgets), "--until", until, "--max-min-runtime", CAPS,
         "--format", "json", "--quiet", "--jobs", str(jobs)],
        capture_output=True, text=True, check=False,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"bench.sweep: compare --jobs {jobs} failed:\n{done.stderr[-3000:]}")
    return wall, load, done.stdout


def main() -> None:
    """Write the month, run the sweep both ways back to back, print the speed-up and check the tables match."""
    from ledger.commands._sweep import default_jobs
    from ledger.replay.demo_month import DEMO, FULL, generate
    from ledger.replay.trace import write_trace

    which = os.environ.get("BENCH_SWEEP_MONTH", "demo")
    jobs = int(os.environ.get("BENCH_SWEEP_JOBS", "0")) or default_jobs()
    repeat = int(os.environ.get("BENCH_REPEAT", "1"))
    month = generate(7, mix=FULL if which == "full" else DEMO)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        trace, budgets = Path(tmp) / "trace.csv", Path(tmp) / "budgets.yaml"
        write_trace(trace, month.submissions)
        budgets.write_text(month.budgets.to_yaml())
        until = month.end.isoformat()
        serial, pooled, tables = [], [], set()
        for _ in range(repeat):
            for n, walls in ((1, serial), (jobs, pooled)):
                wall, load, table = _compare(trace, budgets, until, n)
                walls.append(wall)
                tables.add(table)
                print(f"  8 settings, --jobs {n}: {wall:7.1f} s wall (load {load:.2f} at start)", flush=True)
    s, p = statistics.median(serial), statistics.median(pooled)
    print(f"{which} month ({len(month.submissions):,} workloads), 8 caps ({CAPS}), replay + audit each: "
          f"one by one {s:.1f} s, {jobs} at a time {p:.1f} s: {s / p:.2f}x on {default_jobs()} cores "
          f"(median of {repeat}); tables {'identical' if len(tables) == 1 else 'DIFFERENT'}")
    if len(tables) != 1:
        raise SystemExit("the pooled sweep printed a different table than the serial one")


if __name__ == "__main__":
    main()
