"""Against the Alibaba PAI v2020 simulator: ITP cluster04 under FIFO, both run to their end in the same sitting.

The simulator is public code (github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2020/simulator``,
numpy and matplotlib); the project carries none of it and runs the checkout ``BENCH_PAI_SIMULATOR``
names. ``BENCH_PAI_PYTHON`` is an interpreter with the simulator's requirements; without it a venv
is made once in ``.bench-cache/pai-venv`` from the simulator's own ``requirements.txt`` (PyPI).

1. ITP cluster04 (``bench/data/itp``, 15,802 jobs) is read by the project's ITP reader, as
   ``gpuledger replay`` reads it, and written as the simulator's job CSV (untimed): each job once,
   numbered in submission order (the simulator keeps ids in an integer array), one user, its
   submission second, its duration, and its GPUs: one instance up to a host's 8 GPUs, wider jobs
   as gangs of 8-GPU instances (all or nothing, the simulator's gang scheduling), no GPU type.
2. The cluster is the one ``gpuledger replay`` sizes for the trace (616 GPUs: 77 hosts of 8).
   ``run_simulator_fifo.py`` cannot be given it: it fixes ``HETERO = True`` (the 1,352-GPU,
   380-node PAI cluster; ``-g`` only sets the CPU count). So a few lines here call the simulator's
   ``Simulator`` from the checkout with that entry's settings (FIFO allocation, large-gang-first
   preemption, ``--pack`` node order, GPU types matched as it does, job statistics and cluster
   utilisation exported, seed 42, the trace's own submission times) on 77 8-GPU nodes
   (``hetero=False``), and run the experiment once, as the entry does.
3. ``BENCH_REPEAT`` times (default 3), one after the other: the simulator in its own interpreter,
   and ``gpuledger replay TRACE --out RUN --policy fifo --quiet`` as a user types it (a fresh
   process, until the work is done, the audit and every file included), each timed the same way
   (``bench.commands.timed``: wall until it returns, CPU of its process tree by ``getrusage``).

It prints the median and spread of both, their ratio (target: gpuledger ≥ 100x faster), and what
each simulated (jobs finished, the last finish, the mean wait from submission to start) so the two
can be seen to do the same work. ``BENCH_JSON=path`` also writes every figure.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.commands import GPULEDGER, ITP, ROOT, timed
from ledger.events import WorkloadSubmitted
from ledger.replay.run import ReplayInputs

TARGET = 100.0
HOST_GPUS = 8  # the simulator's homogeneous nodes hold 8 GPUs (its Node default)
VENV = ROOT / ".bench-cache" / "pai-venv"
HOW = ("git clone https://github.com/alibaba/clusterdata, then "
       "BENCH_PAI_SIMULATOR=clusterdata/cluster-trace-gpu-v2020/simulator")
COLUMNS = ("job_id", "user", "submit_time", "duration", "num_gpu", "num_inst", "gpu_type")

# The simulator's FIFO experiment on a cluster of NODES 8-GPU nodes; the settings of its
# run_simulator_fifo.py but the node list. Writes what it simulated to OUT as JSON.
_SIMULATE = """
import json, logging, sys
from pathlib import Path
folder, trace, nodes, jobs, out = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
sys.dont_write_bytecode = True  # leave the checkout as it was
sys.path.insert(0, folder)
from simulator import Simulator
log_file = out.with_suffix(".log")
logging.basicConfig(level=logging.WARNING, format="%(message)s", filename=log_file, filemode="a")
sim = Simulator(csv_file=trace, alloc_policy=8, preempt_policy=2, sort_node_policy=0, num_nodes=nodes,
                random_seed=42, max_time=int(1e9), num_spare_node=0, pattern=0, hetero=False,
                num_gpus=nodes * 8, num_cpus=round(23.22 * nodes * 8), describe_file=None, log_file=log_file,
                export_job_stats=True, export_cluster_util=True, arrival_rate=-1, num_jobs_limit=jobs,
                gpu_type_matching=2, verbose=0)
(instances, jct, wait, makespan), = sim.simulator_go(repeat=1)
waits = {j["job_id"]: j["jct"] - j["duration"] for j in sim.cluster.job_history.job_done_list}
out.write_text(json.dumps({"jobs": len(waits), "instances": instances, "makespan_s": makespan,
                           "mean_wait_s": sum(waits.values()) / len(waits)}))
"""


def simulator_folder() -> Path:
    """Return the simulator's folder BENCH_PAI_SIMULATOR names, or stop with how to get it."""
    named = os.environ.get("BENCH_PAI_SIMULATOR")
    if not named:
        raise SystemExit(f"bench.pai: BENCH_PAI_SIMULATOR is not set; {HOW}")
    folder = Path(named).expanduser().resolve()
    missing = [f for f in ("simulator.py", "run_simulator_fifo.py", "requirements.txt") if not (folder / f).is_file()]
    if missing:
        raise SystemExit(f"bench.pai: BENCH_PAI_SIMULATOR={named} has no {missing[0]}: not the simulator's folder; "
                         f"{HOW}")
    return folder


def simulator_python(folder: Path) -> Path:
    """Return an interpreter with the simulator's requirements: BENCH_PAI_PYTHON, or a venv made once from PyPI."""
    named = os.environ.get("BENCH_PAI_PYTHON")
    python = Path(named) if named else VENV / "bin" / "python"
    if not named and not python.exists():
        print(f"(making {VENV} with the simulator's requirements from PyPI)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(folder / "requirements.txt")], check=True)
    found = subprocess.run([str(python), "-c", "import numpy, matplotlib"], capture_output=True, text=True)
    if found.returncode:
        why = (found.stderr.strip().splitlines() or ["it does not run"])[-1]
        raise SystemExit(f"bench.pai: {python} cannot import numpy and matplotlib ({why}); "
                         "set BENCH_PAI_PYTHON to an interpreter that can, or remove it to make one")
    return python


def write_simulator_trace(inputs: ReplayInputs, path: Path) -> int:
    """Write the inputs' workloads as the simulator's job CSV (seconds after the trace's epoch); return the rows."""
    from ledger.replay.itp import EPOCH

    jobs = [e for e in inputs.inputs if isinstance(e, WorkloadSubmitted)]
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        for number, job in enumerate(jobs):
            if job.gpus > HOST_GPUS and job.gpus % HOST_GPUS:
                raise SystemExit(f"bench.pai: workload {job.workload_id} asks {job.gpus} GPUs, "
                                 f"not whole {HOST_GPUS}-GPU hosts: the simulator's gangs are of equal instances")
            instances = max(1, job.gpus // HOST_GPUS)
            submit = round((job.time - EPOCH).total_seconds())
            out.writerow((number, "itp", submit, job.work_s, job.gpus // instances, instances, ""))
    return len(jobs)


def replayed(run: Path) -> dict[str, float]:
    """Return what ``gpuledger replay`` simulated: jobs finished, the last finish and the mean wait, from its files."""
    from ledger.replay.itp import EPOCH
    from ledger.replay.trace import parse_time

    report = json.loads((run / "replay.json").read_text())
    audit = json.loads((run / "audit.json").read_text())
    buckets = [b for b in audit["wait_by_size"]["buckets"] if b["jobs"]]  # an empty bucket has no mean
    started = sum(b["jobs"] for b in buckets)
    return {"jobs": report["events_by_type"].get("WorkloadCompleted", 0),
            "makespan_s": (parse_time(audit["period"]["end"]) - EPOCH).total_seconds(),
            "mean_wait_s": sum(b["mean_s"] * b["jobs"] for b in buckets) / max(started, 1),
            "capacity_gpus": report["capacity_gpus"]}


def measure(repeat: int, where: Path) -> dict[str, Any]:
    """Run the simulator and ``gpuledger replay`` on ITP cluster04 ``repeat`` times each; return every figure."""
    from ledger.replay.itp import load_itp

    folder = simulator_folder()
    python = simulator_python(folder)
    inputs = load_itp(ITP)
    if inputs.gpus % HOST_GPUS:
        raise SystemExit(f"bench.pai: the replay's cluster of {inputs.gpus} GPUs is not whole {HOST_GPUS}-GPU hosts")
    nodes = inputs.gpus // HOST_GPUS
    trace = where / "itp_cluster04_jobs.csv"
    jobs = write_simulator_trace(inputs, trace)
    run, sim_out = where / "itp-run", where / "simulated.json"
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        row: dict[str, Any] = {"load": os.getloadavg()[0]}
        row["simulator"] = timed(str(python), "-c", _SIMULATE, str(folder), str(trace), str(nodes), str(jobs),
                                 str(sim_out))
        row["simulator"] |= json.loads(sim_out.read_text())
        row["gpuledger"] = timed(str(GPULEDGER), "replay", str(ITP), "--out", str(run), "--force", "--quiet",
                                 "--policy", "fifo")
        row["gpuledger"] |= replayed(run)
        runs.append(row)
        print(f"  run {len(runs)} of {repeat}: simulator {row['simulator']['wall']:.2f} s wall, "
              f"{row['simulator']['cpu']:.2f} s CPU; gpuledger replay {row['gpuledger']['wall']:.2f} s wall, "
              f"{row['gpuledger']['cpu']:.2f} s CPU; load {row['load']:.1f}", flush=True)
    return {"jobs": jobs, "gpus": inputs.gpus, "nodes": nodes, "simulator": str(folder), "runs": runs}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} s ({min(values):.2f}-{max(values):.2f})"


def report(m: dict[str, Any]) -> list[str]:
    """Return the lines that print the comparison: both sides' medians and spreads, the ratio, what each simulated."""
    runs = m["runs"]
    loads = [r["load"] for r in runs]
    lines = [f"ITP cluster04, FIFO, {m['jobs']:,} jobs on {m['gpus']:,} GPUs ({m['nodes']} hosts of {HOST_GPUS}), "
             f"to the end; load {min(loads):.1f}-{max(loads):.1f} (median of {len(runs)})"]
    ratios: dict[str, float] = {}
    for key in ("wall", "cpu"):
        sim = [float(r["simulator"][key]) for r in runs]
        ours = [float(r["gpuledger"][key]) for r in runs]
        lines.append(f"  {key:4} PAI v2020 simulator {_spread(sim)}   gpuledger replay (as typed) {_spread(ours)}")
        ratios[key] = statistics.median(sim) / statistics.median(ours)
        each = [s / o for s, o in zip(sim, ours, strict=True)]
        lines.append(f"       simulator / gpuledger {ratios[key]:6.1f}x (each run {min(each):.1f}-{max(each):.1f}x; "
                     f"target >= {TARGET:g}x: {'met' if ratios[key] >= TARGET else 'NOT met'})")
    for name in ("simulator", "gpuledger"):
        got = runs[-1][name]
        lines.append(f"  {name:9} simulated {got['jobs']:,} jobs done, the last at {got['makespan_s']:,.0f} s "
                     f"({got['makespan_s'] / 86_400:.2f} days), mean wait {got['mean_wait_s']:,.0f} s")
    m["ratios"] = ratios
    return lines


def main() -> None:
    """Measure the simulator and ``gpuledger replay`` on ITP cluster04 and print the comparison."""
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    if not GPULEDGER.exists():
        raise SystemExit(f"bench.pai: no {GPULEDGER} (install the project: make build)")
    with tempfile.TemporaryDirectory(prefix="bench-pai-", dir=os.environ.get("BENCH_TMP")) as tmp:
        m = measure(repeat, Path(tmp))
    for line in report(m):
        print(line, flush=True)
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps(m, indent=1) + "\n")


if __name__ == "__main__":
    main()
