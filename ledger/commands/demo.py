"""Build a realistic month, replay it under fairshare and a priority baseline, print the audits side by side.

The month: a 1,024-GPU cluster (128 hosts x 8), a budget tree of 5 programs, 13 projects and
about 150 researchers, demand two to three times capacity, bursty teams, debug runs, long
resumable training runs, interactive sessions, and free preemptible fill work (sweeps, evals)
that keeps idle GPUs busy. Seeded: the same --seed
gives the same month and the same event logs. DIR gets trace.csv and budgets.yaml, one run
directory per policy, and report.html. The demo stops the clock at the month's end: to replay its
trace to the same figures, give the same stop, e.g. `gpuledger replay DIR/trace.csv --budgets
DIR/budgets.yaml --until 2026-04-01T00:00:00Z --out RUN` (without --until a replay runs on until
all work is done, past the month, and its figures differ). --scale shrinks the month, its cluster
and its tree together, so a small month keeps the big one's shape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ledger.core.knobs import Policy
from ledger.errors import ConfigError

POLICIES: tuple[Policy, ...] = ("fairshare", "priority")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("--out", metavar="DIR", default="out/demo", help="where to write (default out/demo)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the generated month (default 7)")
    p.add_argument(
        "--month",
        choices=("demo", "full"),
        default="demo",
        help="demo: ~9,800 workloads (default); full: ~100,000 workloads, many more short jobs (slower)",
    )
    p.add_argument("--scale", type=float, default=1.0, help="multiply the number of workloads (default 1.0)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--force", action="store_true", help="replace an earlier demo in --out (its files only)")


INTRO = """\
A month on a {gpus:,}-GPU cluster ({hosts} hosts x {per} GPUs), {teams} researchers in {projects} projects
under {programs} programs. {workloads:,} workloads: {debug:,} debug runs (minimum runtime <= 15 min),
{training:,} training runs (up to {widest:,} GPUs, checkpointing), {interactive:,} interactive sessions,
{batch:,} batch jobs and {sweeps:,} fill jobs: free sweeps and evals that use idle GPUs (minimum
runtime 0, preemptible by any allocated request). Demand averages {demand:.1f}x capacity.

The same workloads are replayed twice: under `fairshare` (budgets: each team is owed its share of
GPU time, ordered by use over a 7-day window, protected for its minimum runtime up to 8 h) and
under `priority` (the old way: highest priority first, then first come; no budgets).
"""

GUIDE = """\
How to read it: "received / owed" counts, hour by hour, the GPU-hours each team got out of what its
share entitled it to (capped at what it asked for); 100% means every team got its due. "At most
possible" is the hourly bound: what any schedule could have received of those hours, given the gangs
(a run needs all its GPUs at once) and the protected windows. "Over its week" lets a team's hours
even out within the week. Waits run from submission (or preemption) to start. "Thrown away" is work
lost since the last checkpoint plus the time to restart. Unallocated work (minimum runtime 0) is
free and may be preempted by anyone.
"""


def _describe(month: Any, demand: float) -> str:
    subs = month.submissions
    kinds: dict[str, int] = {}
    for s in subs:
        key = "sweeps" if s.kind == "batch" and s.min_runtime_s == 0 else s.kind
        kinds[key] = kinds.get(key, 0) + 1
    nodes = month.budgets.nodes
    return INTRO.format(
        gpus=month.budgets.gpus,
        hosts=month.budgets.gpus // month.budgets.gpus_per_node,
        per=month.budgets.gpus_per_node,
        teams=len(month.budgets.leaves),
        projects=sum(1 for n in nodes if n.path.count("/") == 2),
        programs=sum(1 for n in nodes if n.path.count("/") == 1),
        workloads=len(subs),
        debug=kinds.get("debug", 0),
        training=kinds.get("training", 0),
        widest=max((s.gpus for s in subs if s.kind == "training"), default=0),
        sweeps=kinds.get("sweeps", 0),
        interactive=kinds.get("interactive", 0),
        batch=kinds.get("batch", 0),
        demand=demand,
    )


def _headline(results: list[dict[str, Any]]) -> str:
    from ledger.queries.sidebyside import human, reported_level

    def get(r: dict[str, Any], *path: str) -> Any:
        v: Any = r["audit"]
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        return v

    fair, prio = results
    lines = []
    a, b = get(fair, "owed_hours", "overall_ratio"), get(prio, "owed_hours", "overall_ratio")
    if a is not None and b is not None:
        bounds = [get(r, "owed_hours", "hourly_bound", "ratio") for r in results]
        weeks = [next((p["ratio"] for p in get(r, "owed_hours", "received_by_period") or [] if p["period"] == "week"),
                      None) for r in results]
        lines.append(
            f"- Per {reported_level(results)[0]}, hour by hour, teams received {human(a, 'ratio')} of the GPU-hours "
            f"they were owed under fairshare (at most {human(bounds[0], 'ratio')} was possible), {human(b, 'ratio')} "
            f"under priority (at most {human(bounds[1], 'ratio')}); over each week {human(weeks[0], 'ratio')} and "
            f"{human(weeks[1], 'ratio')}."
        )
    a, b = get(fair, "wait_by_size", "debug_allocated", "p90_s"), get(prio, "wait_by_size", "debug_allocated", "p90_s")
    if a is not None and b is not None:
        lines.append(
            f"- Nine in ten debug runs started within {human(a, 'seconds')} under fairshare, "
            f"{human(b, 'seconds')} under priority."
        )
    a, b = get(fair, "discarded_work", "discarded_share"), get(prio, "discarded_work", "discarded_share")
    if a is not None and b is not None:
        lines.append(
            f"- Preemption threw away {human(a, 'share')} of delivered GPU-hours under fairshare "
            f"({human(b, 'share')} under priority): the price of routine time-slicing."
        )
    return "\n".join(lines) + ("\n" if lines else "")


def _report_html(out: Path, intro: str, results: list[dict[str, Any]]) -> Path:
    """Write report.html: both policies side by side, one column each, on shared scales."""
    from ledger.queries.report import compare_html

    page = compare_html(list(POLICIES), results, title="gpuledger demo: budgets versus priorities on one month",
                        intro=intro + "\n" + GUIDE)
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._paths import DEMO_OUTPUTS, output_dir
    from ledger.commands._sweep import default_jobs, run_settings
    from ledger.core.knobs import Knobs
    from ledger.queries.sidebyside import table
    from ledger.replay.demo_month import DEMO, FULL, generate
    from ledger.replay.run import inputs_from_budgets
    from ledger.replay.trace import write_trace

    if args.scale <= 0:
        raise ConfigError(f"--scale {args.scale}: must be more than 0")
    out = output_dir(args.out, force=args.force, ours=DEMO_OUTPUTS)
    out.mkdir(parents=True, exist_ok=True)
    month = generate(args.seed, scale=args.scale, mix=FULL if args.month == "full" else DEMO)
    write_trace(out / "trace.csv", month.submissions)
    (out / "budgets.yaml").write_text(month.budgets.to_yaml())
    inputs = inputs_from_budgets(month.budgets, list(month.submissions), start=month.start)
    inputs.source = str(out / "trace.csv")
    per = month.budgets.gpus_per_node
    settings = [(Knobs(policy=policy, gpus_per_node=per), policy, out / policy) for policy in POLICIES]
    # the two policies replay side by side where there are two cores (the same runs as one by one)
    results = run_settings(inputs, settings, jobs=default_jobs(), quiet=args.quiet, until=month.end)
    intro = _describe(month, results[0]["replay"]["demand_ratio"])
    text_table = table(list(POLICIES), results)
    sys.stdout.write(intro + "\n" + text_table + "\n" + _headline(results) + "\n" + GUIDE)
    report = _report_html(out, intro, results)
    walls = ", ".join(f"{p} {r['replay']['wall_s']:.1f} s" for p, r in zip(POLICIES, results, strict=True))
    print(f"wrote {report}, the runs in {out}/fairshare and {out}/priority (replays took {walls})", file=sys.stderr)
    print(f"to replay the trace to these figures: gpuledger replay {out}/trace.csv --budgets {out}/budgets.yaml "
          f"--until {month.end.isoformat().replace('+00:00', 'Z')} --out RUN_DIR", file=sys.stderr)
    return 0
