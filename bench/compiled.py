"""The compiled core and replay driver (``make fast``) against the pure ones: same decisions, how much faster.

Runs the `gpuledger demo` month under fair share (the replay speed target: > 250,000 simulated
seconds per wall second) and the core benchmark's fair-share days once with the Python sources
of ``ledger.core`` and the replay driver and once with the compiled modules, each in a fresh process of the same run,
alternating. Each replay's event log is hashed (every record, in order): the two builds must
write the same log. Skipped when the compiled modules are not built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SIM_PER_WALL = 250_000

_CHILD = """
import hashlib, json, sys, tempfile, time
pure = sys.argv[1] == "pure"
if pure:
    import bench._pure_core
    bench._pure_core.install()
import ledger.core
from bench.core import replay_month
from ledger.core.knobs import Knobs
from ledger.events import to_us
from ledger.log import EventLog
from ledger.replay.demo_month import FULL, generate
from ledger.replay.run import inputs_from_budgets, replay
import ledger.replay
assert ledger.core.COMPILED != pure and ledger.replay.COMPILED != pure
demo = generate(7)
inputs = inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start)
with tempfile.TemporaryDirectory(prefix="bench-compiled-") as tmp:
    t0, c0 = time.perf_counter(), time.process_time()
    stats = replay(inputs, Knobs(policy="fairshare"), tmp, until=demo.end)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    digest = hashlib.sha256()
    for name, record in EventLog(tmp + "/events").records():
        digest.update(repr((name, record)).encode())
full = generate(7, mix=FULL)
finputs = inputs_from_budgets(full.budgets, list(full.submissions), start=full.start)
core = replay_month(Knobs(policy="fairshare"), finputs, to_us(full.start) + int(float(sys.argv[2]) * 86_400e6))
print(json.dumps({"wall": wall, "cpu": cpu, "sim_s": stats.simulated_s, "events": stats.events,
                  "log_sha256": digest.hexdigest(), "core_cpu": core["core_s"],
                  "core_us_per_event": core["us_per_event"], "preemptions": core["preemptions"]}))
"""


def _child(build: str, core_days: float) -> dict[str, float | str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, build, str(core_days)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Replay the demo month and run the core bench under both builds; print speed-ups and check the logs."""
    import ledger.core

    if not ledger.core.COMPILED:
        print("compiled core not built (`make fast`): nothing to compare")
        return
    repeat = int(os.environ.get("BENCH_REPEAT", "1"))
    core_days = float(os.environ.get("BENCH_COMPILED_DAYS", "3"))
    runs: dict[str, list[dict[str, float | str]]] = {"pure": [], "compiled": []}
    for _ in range(repeat):
        for build in ("pure", "compiled"):
            runs[build].append(_child(build, core_days))
    print(f"{'build':<9} {'replay wall s':>13} {'CPU s':>6} {'sim-s/wall-s':>12} {'sim-s/CPU-s':>11}"
          f" {'core CPU s':>10} {'core us/ev':>10}  log sha256")
    best: dict[str, dict[str, float]] = {}
    for build, rows in runs.items():
        for r in rows:
            w, c, sim = float(r["wall"]), float(r["cpu"]), float(r["sim_s"])
            print(f"{build:<9} {w:>13.2f} {c:>6.2f} {sim / w:>12,.0f} {sim / c:>11,.0f}"
                  f" {float(r['core_cpu']):>10.2f} {float(r['core_us_per_event']):>10.1f}  {str(r['log_sha256'])[:16]}")
        best[build] = {k: min(float(r[k]) for r in rows) for k in ("wall", "cpu", "core_cpu")}
    hashes = {str(r["log_sha256"]) for rows in runs.values() for r in rows}
    same = "identical" if len(hashes) == 1 else "DIFFERENT"
    p, c = best["pure"], best["compiled"]
    sim = float(runs["compiled"][0]["sim_s"])
    met = "met" if sim / c["wall"] > TARGET_SIM_PER_WALL else "NOT met"
    print(
        f"compiled vs pure (best of {repeat}): replay {p['wall'] / c['wall']:.2f}x wall, "
        f"{p['cpu'] / c['cpu']:.2f}x CPU; "
        f"core bench (the full month's first {core_days:g} days, fair share) {p['core_cpu'] / c['core_cpu']:.2f}x CPU; "
        f"event logs {same}; replay target > {TARGET_SIM_PER_WALL:,} sim-s/wall-s with the compiled core: {met}"
    )
    if same != "identical":
        raise SystemExit("the compiled core wrote a different event log than the pure one")


if __name__ == "__main__":
    main()
