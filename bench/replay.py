"""Replay speed: the demo months (1,024 GPUs; ~9,800 and ~100,000 workloads) and the largest ITP trace.

Reports wall time, events per second, simulated seconds per wall second (target > 250,000, i.e.
the month in under 10 s), peak memory (target < 1 GiB), and where the time goes (cProfile top
functions of a replay of the ``demo`` month). The baseline, measured in the same run, is the
same month under ``fifo``: no fair-share order and no preemption, so the difference is what the
budget logic costs. Every replay writes its event log to disk, as ``gpuledger replay`` does.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import resource
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from ledger.core.knobs import Knobs
from ledger.replay.demo_month import FULL, generate
from ledger.replay.run import ReplayInputs, inputs_from_budgets, load_inputs, replay

ITP = Path(__file__).resolve().parent / "data" / "itp" / "cluster04.csv"  # MIT, with its licence beside it
TARGET_SIM_PER_WALL = 250_000
# the first days of the 100,000-workload month (BENCH_REPLAY_DAYS=30 for all of it: under the
# literal swap rule fair share makes many more preemptions once usage has built up, which is slow)
DAYS = float(os.environ.get("BENCH_REPLAY_DAYS", "3"))
TARGET_PEAK_BYTES = 1 << 30


def _peak_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _run(name: str, inputs: ReplayInputs, knobs: Knobs, until: object = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        stats = replay(inputs, knobs, Path(tmp), until=until)  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    row = {
        "wall_s": wall,
        "cpu_s": cpu,
        "sim_s_per_cpu_s": stats.simulated_s / cpu,
        "events": stats.events,
        "events_per_s": stats.events / wall,
        "sim_s_per_wall_s": stats.simulated_s / wall,
        "simulated_days": stats.simulated_s / 86_400,
    }
    print(
        f"{name:<34} {wall:7.2f} s wall {cpu:7.2f} s CPU  {stats.events:>9,} events  "
        f"{row['events_per_s']:>9,.0f} ev/s  "
        f"{row['sim_s_per_wall_s']:>10,.0f} sim-s/wall-s {row['sim_s_per_cpu_s']:>10,.0f} sim-s/CPU-s  "
        f"({row['simulated_days']:.1f} simulated days)",
        flush=True,
    )
    return row


def _profile(inputs: ReplayInputs, knobs: Knobs, until: object, top: int = 14) -> str:
    prof = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        prof.enable()
        replay(inputs, knobs, Path(tmp), until=until)  # type: ignore[arg-type]
        prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("tottime")
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    lines = [f"{'tottime':>8} {'share':>6}  function"]
    for (file, line, func), (_, calls, tt, _ct, _) in sorted(
        stats.stats.items(),
        key=lambda kv: kv[1][2],
        reverse=True,  # type: ignore[attr-defined]
    )[:top]:
        short = file.split("site-packages/")[-1].split(os.sep + "ledger" + os.sep)[-1]
        lines.append(f"{tt:8.2f} {tt / total:6.1%}  {short}:{line}({func}) x{calls:,}")
    return "\n".join(lines)


def main() -> None:
    """Run the replay benchmark and print its figures."""
    demo = generate(7)
    dinputs = inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start)
    print(f"`gpuledger demo` month: {len(demo.submissions):,} workloads", flush=True)
    _run("demo month, fifo (baseline)", dinputs, Knobs(policy="fifo"), demo.end)
    _run("demo month, fairshare + preemption", dinputs, Knobs(policy="fairshare"), demo.end)
    _run("demo month, priority", dinputs, Knobs(policy="priority"), demo.end)
    t0 = time.perf_counter()
    month = generate(7, mix=FULL)
    gen = time.perf_counter() - t0
    inputs = inputs_from_budgets(month.budgets, list(month.submissions), start=month.start)
    until = min(month.end, month.start + timedelta(days=DAYS))
    print(
        f"full month: {len(month.submissions):,} workloads generated in {gen:.2f} s; replaying {DAYS:g} days",
        flush=True,
    )
    fifo = _run("full month, fifo (baseline)", inputs, Knobs(policy="fifo"), until)
    fair = _run("full month, fairshare + preemption", inputs, Knobs(policy="fairshare"), until)
    met = "met" if fair["sim_s_per_wall_s"] > TARGET_SIM_PER_WALL else "NOT met"
    print(
        f"fairshare vs fifo: {fair['wall_s'] / fifo['wall_s']:.2f}x the wall time; "
        f"target > {TARGET_SIM_PER_WALL:,} sim-s/s: {met}"
    )
    if ITP.exists():
        itp = load_inputs(ITP, None)
        _run(f"ITP {ITP.stem} ({len(itp.inputs):,} jobs), fifo", itp, Knobs(policy="fifo"))
        _run(f"ITP {ITP.stem} ({len(itp.inputs):,} jobs), fairshare", itp, Knobs(policy="fairshare"))
    peak = _peak_bytes()
    met = "met" if peak < TARGET_PEAK_BYTES else "NOT met"
    print(f"peak memory (max RSS): {peak / 2**20:,.0f} MiB; target < 1 GiB: {met}")
    print("where the time goes (cProfile, the `demo` month under fairshare):")
    print(_profile(dinputs, Knobs(policy="fairshare"), demo.end), flush=True)


if __name__ == "__main__":
    main()
