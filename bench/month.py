"""The whole replay of a month, both builds: the full demo month and one scenario-family month.

Each replay runs in a fresh process (``GPULEDGER_PURE=1`` for the pure build), the builds
alternating, ``BENCH_REPEAT`` times (default 3): wall and CPU seconds of ``replay()`` (the clock,
the core and the log written to disk; not generating the month, not the audits), simulated seconds
per wall second against the target (the month in 10 s: 250,000), the load average when each run
started (the machine may be shared), and the sha256 of the event log's segment files: the two
builds must write the same bytes. ``BENCH_MONTHS`` picks the months (``full,family``; ``demo``
is the small ~9,800-workload month), ``BENCH_UNTIL_DAYS`` cuts every replay short (for a profile).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_WALL_S = 10.0
TARGET_SIM_PER_WALL = 250_000

_CHILD = """
import hashlib, json, os, sys, tempfile, time
from datetime import timedelta
from pathlib import Path
import ledger.core, ledger.replay
from bench.month import month_inputs
from ledger.core.knobs import Knobs
from ledger.replay.run import replay
assert ledger.core.COMPILED == ledger.replay.COMPILED == (sys.argv[2] == "compiled"), "build not as asked"
inputs, until, label = month_inputs(sys.argv[1])
if float(sys.argv[3]) > 0:
    until = min(e.time for e in inputs.inputs) + timedelta(days=float(sys.argv[3]))
load = os.getloadavg()[0]
with tempfile.TemporaryDirectory(prefix="bench-month-") as tmp:
    t0, c0 = time.perf_counter(), time.process_time()
    stats = replay(inputs, Knobs(policy="fairshare", gpus_per_node=inputs.gpus_per_node), tmp, until=until)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    digest = hashlib.sha256()
    for path in sorted(Path(tmp, "events").glob("*.avro")):  # the segments: the log's data, not its lock or index
        digest.update(path.name.encode() + b"\\0" + path.read_bytes())
print(json.dumps({"wall": wall, "cpu": cpu, "sim_s": stats.simulated_s, "events": stats.events,
                  "load": load, "label": label, "sha256": digest.hexdigest()}))
"""


def month_inputs(name: str) -> tuple[object, object, str]:
    """Return (inputs, until or None for the end, description) of the month ``name``: full, demo or family."""
    from ledger.replay.run import inputs_from_budgets

    if name in ("full", "demo"):
        from ledger.replay.demo_month import DEMO, FULL, generate

        demo = generate(7, mix=FULL if name == "full" else DEMO)
        inputs = inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start)
        mix = "full" if name == "full" else "demo"
        return inputs, demo.end, f"demo month ({mix} mix), {len(demo.submissions):,} workloads"
    if name != "family":
        raise SystemExit(f"BENCH_MONTHS: unknown month {name!r} (expected full, demo or family)")
    from ledger.replay import scenario_family

    params, seed = family_month(scenario_family)
    submissions, budgets = scenario_family.month(params, seed)
    inputs = inputs_from_budgets(budgets, submissions, start=scenario_family.START)
    what = f"family A: {params.gpus:,} GPUs, {params.days} days of submissions, seed {seed}, to its end"
    return inputs, None, f"scenario family month ({what}), {len(submissions):,} workloads"


def family_month(family: object) -> tuple[object, int]:
    """Return the parameters and seed of the benchmark's scenario-family month: family A of docs/rules.md.

    Close budgets, a third of the workloads short jobs whose work equals their minimum runtime,
    replayed until all work is done (no cut-off).
    """
    params = family.Params(demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15)  # type: ignore[attr-defined]
    return params, 1


def _child(month: str, build: str, until_days: float) -> dict[str, float | str]:
    env = {k: v for k, v in os.environ.items() if k != "GPULEDGER_PURE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if build == "pure":
        env["GPULEDGER_PURE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, month, build, str(until_days)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.month: the {build} replay of the {month} month failed:\n{done.stderr[-3000:]}")
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} s ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    """Replay each month with both builds, alternating; print median and spread, and check the logs match."""
    import ledger.core

    builds = ["pure", "compiled"] if ledger.core.COMPILED else ["pure"]
    if not ledger.core.COMPILED:
        print("(no compiled build here: the pure build only)")
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    until_days = float(os.environ.get("BENCH_UNTIL_DAYS", "0"))
    months = [m.strip() for m in os.environ.get("BENCH_MONTHS", "full,family").split(",") if m.strip()]
    failed = []
    for month in months:
        runs: dict[str, list[dict[str, float | str]]] = {b: [] for b in builds}
        for _ in range(repeat):
            for build in builds:
                r = _child(month, build, until_days)
                runs[build].append(r)
                print(f"  {month:<7} {build:<9} {float(r['wall']):7.1f} s wall {float(r['cpu']):7.1f} s CPU  "
                      f"{int(r['events']):>10,} events  load {float(r['load']):.2f}", flush=True)
        first = runs[builds[0]][0]
        print(f"{first['label']}, fairshare, {float(first['sim_s']) / 86_400:.1f} simulated days:")
        for build, rows in runs.items():
            walls, cpus = [float(r["wall"]) for r in rows], [float(r["cpu"]) for r in rows]
            sim = float(rows[0]["sim_s"]) / statistics.median(walls)
            met = "met" if statistics.median(walls) <= TARGET_WALL_S else "not met"
            target = f"; <= {TARGET_WALL_S:g} s target {met}" if not until_days else ""
            print(f"  {build:<9} wall {_spread(walls)}  CPU {_spread(cpus)}  {sim:>9,.0f} sim-s/wall-s  "
                  f"(median of {len(rows)}{target})")
        hashes = {str(r["sha256"]) for rows in runs.values() for r in rows}
        print(f"  event log sha256 {'identical' if len(hashes) == 1 else 'DIFFERENT'}: {sorted(hashes)[0]}")
        if len(hashes) != 1:
            failed.append(month)
    if failed:
        raise SystemExit(f"the builds (or runs) wrote different event logs: {', '.join(failed)}")


if __name__ == "__main__":
    main()
