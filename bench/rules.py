"""The preemption bill of the scheduling rules on measured months: the table of docs/rules.md.

Each month is replayed until all its work is done under ``final-share`` (the default rules),
``instant`` and the ``priority`` baseline, and audited: preemptions (allocated / free fill), per
submitted workload, discarded share of delivered GPU-hours, eviction ratio, received ÷ owed (hour by
hour, and with each team's hours summed over its UTC day: ``per day``) and the p90 wait of allocated
debug runs. A second table gives, per replay, what a cluster of wide training runs asks of the
rules: the first waits of runs of 65–256 and of 257 or more GPUs (runs still waiting when the replay
stops count with their wait so far: ``≥``), *start in step* (of the runs submitted in the first
third of the submission period, the share that started before the end of its second third: 65–256
GPUs against 1–8 GPUs), received ÷ owed at the team level and at the researcher level (per hour and
per week, the worst team over its weeks, the teams at 95 % or more over their weeks) and occupancy.
The figures are deterministic (same code, same month, same figures); the wall time of each run is
printed beside them for information only.

A third table holds the short-work targets of docs/rules.md ("Must show") for every month replayed
under both ``final-share`` and ``priority``: each figure beside its target, the miss marked ``✗``.

``BENCH_RULES_MONTHS`` picks the months (default ``demo,A,B,C,I,S,F0,F1,F2,F3,F4,F5``),
``BENCH_RULES`` the rule sets (default ``final-share,priority``; also ``instant``, ``accrued`` (the
entry charge as it accrues), ``no-debug-first`` (debug runs first on the partition only),
``no-debug-lane`` (no debug partition)) and ``BENCH_JOBS`` how many replays run at once (default: the
cores). The months:

* ``demo``: ``gpuledger demo``'s month (seed 7), replayed past its 30 days until all work is done;
* ``full``: the same month with about 100,000 workloads (``gpuledger demo --month full``), not in
  the default list (about 2 minutes a replay);
* ``A``, ``B``, ``C``: scenario-family months on 256 GPUs (``MONTHS`` below);
* ``I``: month A's parameters on 1,024 GPUs (about 83,000 workloads in a week at 2.5x demand);
* ``S``: a sustained-demand month (``scenario_family.sustained``): 1,024 GPUs, submissions at 2.5x
  for 22 days, 70 % of the GPU-hours in 8–256-GPU training runs, 150 researchers in 15 projects in
  4 programs; replayed and audited over its first three weeks, while submissions still go on;
* ``F0``, ``F1``, …: the drawn family (``scenario_family.family_draw``): each index draws a week on
  256 GPUs across the ranges the short-work targets are stated over (demand 1.2–3x, training runs
  1–10 % of the workloads up to the whole cluster, debug runs 20–60 %, trees of 2–4 levels and
  5–40 teams, shares 0.5–2.0 at every level), replayed until all its work is done;
* ``L``: a large month of the same family (1,024 GPUs, 30 days, 2.5x, 2 % training runs, 40 % debug
  runs, 16 teams in 4 levels), about 46,000 workloads.

Levels (the audit's ``owed_hours.levels``): the *team* is the level the budgets name as the team
level (the family months, the sustained month), the project (``lab/program/project``) in the demo
and full months and the leaf (``lab/tN``) in months A–C and I; the *researcher* is the leaf. "Per
week", the worst team and the teams at 95 % sum each node's owed and delivered hours over its weeks
before the smaller is taken.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.commands._sweep import default_jobs, run_settings
from ledger.core.knobs import Knobs
from ledger.events import to_us
from ledger.queries.detail import FOLDER, Details
from ledger.queries.sidebyside import human
from ledger.queries.timefmt import parse_iso
from ledger.replay import scenario_family as family
from ledger.replay.run import ReplayInputs, inputs_from_budgets

MONTHS: dict[str, tuple[family.Params, int]] = {
    "A": (family.Params(demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15), 1),
    "B": (family.Params(demand=1.5, close_budgets=False, fill_share=0.3, exact_share=0.1), 2),
    "C": (family.Params(demand=3.0, close_budgets=True, fill_share=0.0, never_checkpoint=0.5, wide_share=0.4), 3),
    "I": (family.Params(gpus=1024, demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15), 1),
}
SUSTAINED: dict[str, tuple[family.Sustained, int, int]] = {  # params, seed, days replayed and audited
    "S": (family.Sustained(), 1, 21),
}
RULES: dict[str, tuple[str, Knobs]] = {
    "final-share": ("final-share", Knobs()),
    "instant": ("instant", Knobs(preemption_strategy="instant")),
    "priority": ("priority baseline", Knobs(policy="priority")),
    "accrued": ("final-share, charged as it accrues", Knobs(charge="accrued")),
    "no-debug-first": ("final-share, debug runs first on the partition only", Knobs(debug_first=False)),
    "no-debug-lane": ("final-share, no debug partition", Knobs(debug_hosts=0)),
}
TEAM_DEPTH = {"demo": 2, "full": 2}  # the team level (0: the root) where the budgets do not name it
LARGE = family.Family(gpus=1024, days=30, demand=2.5, wide_share=0.02, debug_share=0.4, teams=16, depth=4,
                      fill_share=0.01)
DEFAULT_MONTHS = "demo,A,B,C,I,S,F0,F1,F2,F3,F4,F5"


@dataclass(frozen=True)
class Month:
    """One month to replay: its inputs, size, submission period and where the replay stops (None: at its end)."""

    inputs: ReplayInputs
    workloads: int
    first_us: int
    last_us: int
    until: datetime | None = None


def month_inputs(name: str) -> Month:
    """Return month ``name``."""
    if name in ("demo", "full"):
        from ledger.replay.demo_month import DEMO, FULL, generate

        demo = generate(7, scale=1.0, mix=DEMO if name == "demo" else FULL)
        subs, budgets, start, until = list(demo.submissions), demo.budgets, demo.start, None
    elif name in MONTHS:
        params, seed = MONTHS[name]
        subs, budgets = family.month(params, seed)
        start, until = family.START, None
    elif name in SUSTAINED:
        sparams, seed, days = SUSTAINED[name]
        subs, budgets = family.sustained(sparams, seed)
        start, until = family.START, family.START + timedelta(days=days)
    elif name == "L" or (name[:1] == "F" and name[1:].isdigit()):
        drawn, seed = (LARGE, 1) if name == "L" else family.family_draw(int(name[1:]))
        subs, budgets = family.drawn(drawn, seed)
        start, until = family.START, None
    else:
        known = ", ".join(["demo", "full", *MONTHS, *SUSTAINED, "L", "F0, F1, ..."])
        raise SystemExit(f"BENCH_RULES_MONTHS: unknown month {name!r} (expected one of {known})")
    times = [to_us(s.time) for s in subs]
    return Month(inputs_from_budgets(budgets, subs, start=start), len(subs), min(times), max(times), until)


def row(month: str, rules: str, result: dict[str, Any], workloads: int) -> str:
    """Return the table row of one replay."""
    audit, info = result["audit"], result["replay"]
    bill = audit["discarded_work"]
    tiers = bill["by_tier"]
    debug = audit["wait_by_size"]["debug_allocated"]["p90_s"]
    ended = f"{info['ended']} ({info['simulated_days']:.1f} d)"
    day = next(r["ratio"] for r in audit["owed_hours"]["received_by_period"] if r["period"] == "day")
    return (
        f"| {month} | {rules} | {ended} | {bill['preemptions']:,} ({tiers['allocated']['preemptions']:,} / "
        f"{tiers['unallocated']['preemptions']:,}) | {bill['preemptions'] / workloads:.2f} | "
        f"{bill['discarded_share'] * 100:.1f} % | {human(bill.get('eviction_ratio'), 'rate')} | "
        f"{audit['owed_hours']['overall_ratio'] * 100:.1f} % | {day * 100:.1f} % | {human(debug, 'seconds')} |"
    )


def _waits(month: Month, stop_us: int, workloads: list[dict[str, Any]], lo: int, hi: int) -> str:
    """Return the p50 / p90 / max first wait of runs of lo–hi GPUs, runs still waiting at the stop counted so far."""
    waits, open_ = [], 0
    for w in workloads:
        if lo <= w["gpus"] <= hi and w["min_runtime_s"] > 0:
            submit = parse_iso(w["submit_time"])
            if w["first_start_time"] is None:
                open_ += 1
                waits.append((stop_us - submit) / 1e6)
            else:
                waits.append((parse_iso(w["first_start_time"]) - submit) / 1e6)
    if not waits:
        return "none"
    waits.sort()
    at = "≥ " if open_ else ""
    p50, p90 = (waits[min(len(waits) - 1, int(q * len(waits)))] for q in (0.5, 0.9))
    figures = " / ".join(human(x, "seconds") for x in (p50, p90, waits[-1]))
    return f"{at}{figures} ({len(waits):,}{f', {open_:,} waiting' if open_ else ''})"


def in_step(month: Month, workloads: list[dict[str, Any]], lo: int, hi: int) -> float | None:
    """Return the share of lo–hi-GPU runs submitted in the first third that started before the second third ended."""
    third = (month.last_us - month.first_us) / 3
    early = [w for w in workloads if lo <= w["gpus"] <= hi and w["min_runtime_s"] > 0
             and parse_iso(w["submit_time"]) < month.first_us + third]
    ends = month.first_us + 2 * third
    started = [w for w in early if w["first_start_time"] is not None and parse_iso(w["first_start_time"]) < ends]
    return len(started) / len(early) if early else None


def level(audit: dict[str, Any], depth: int | None) -> dict[str, Any]:
    """Return the audit's owed hours at ``depth`` (0: the root; None: the team level, named or the leaves)."""
    every = audit["owed_hours"]["levels"]
    if depth is None:
        return next((lv for lv in every if lv["team_level"]), every[-1])
    return next((lv for lv in every if lv["depth"] == depth), every[-1])


def _level(figures: dict[str, Any]) -> str:
    worst = figures["worst_node_week"]
    return (f"{figures['ratio'] * 100:.1f} % / {figures['ratio_week'] * 100:.1f} % / {worst['ratio_week'] * 100:.1f} % "
            f"({worst['budget'].rsplit('/', 1)[-1]}) / {figures['nodes_at_95_week']} of {figures['nodes_owed']}")


def must_show(name: str, month: Month, rules: str, result: dict[str, Any], run_dir: Path) -> str:
    """Return the wide-run and per-level row of one replay."""
    audit, info = result["audit"], result["replay"]
    work = Details.files(run_dir / FOLDER).rows("workloads")  # every workload (audit.json lists the first few)
    stop = max(parse_iso(w["end_time"]) for w in work if w["end_time"] is not None)
    if month.until is not None:
        stop = to_us(month.until)
    bill = audit["discarded_work"]
    team, leaf = level(audit, TEAM_DEPTH.get(name)), level(audit, 99)
    wide, small = in_step(month, work, 65, 256), in_step(month, work, 1, 8)
    step = f"{'–' if wide is None else f'{wide * 100:.0f} %'} / {'–' if small is None else f'{small * 100:.0f} %'}"
    debug = audit["wait_by_size"]["debug_allocated"]["p90_s"]
    return (
        f"| {name} | {rules} | {info['simulated_days']:.1f} d | {_waits(month, stop, work, 65, 256)} | "
        f"{_waits(month, stop, work, 257, 1 << 30)} | {step} | {_level(team)} | "
        f"{_level(leaf) if leaf is not team else 'the same'} | {bill['preemptions'] / month.workloads:.2f} | "
        f"{bill['discarded_share'] * 100:.1f} % | {human(bill.get('eviction_ratio'), 'rate')} | "
        f"{human(debug, 'seconds')} | {audit['occupancy']['occupied_share'] * 100:.1f} % |"
    )


def _p90(workloads: list[dict[str, Any]], lo: int, hi: int) -> float | None:
    """Return the p90 first wait of allocated work of lo–hi GPUs that started (as the audit's buckets count them)."""
    waits = sorted(
        (parse_iso(w["first_start_time"]) - parse_iso(w["submit_time"])) / 1e6 for w in workloads
        if lo <= w["gpus"] <= hi and w["min_runtime_s"] > 0 and w["first_start_time"] is not None
    )
    return waits[min(len(waits) - 1, int(0.9 * len(waits)))] if waits else None


def busy_occupancy(run_dir: Path) -> float | None:
    """Return occupied ÷ capacity GPU-hours over the hours whose allocated demand exceeded the capacity."""
    import duckdb

    folder = run_dir / FOLDER
    rows = duckdb.connect().execute(f"""
        SELECT sum(c.allocated_gpu_hours + c.unallocated_gpu_hours) / nullif(sum(c.capacity_gpu_hours), 0)
        FROM read_parquet('{folder / "cluster_hourly.parquet"}') c
        JOIN (SELECT hour, sum(demand_gpu_hours) AS demand FROM read_parquet('{folder / "levels_hourly.parquet"}')
              WHERE depth = 0 GROUP BY hour) d USING (hour)
        WHERE d.demand > c.capacity_gpu_hours""").fetchall()
    value = rows[0][0] if rows else None
    return None if value is None else float(value)


def targets(name: str, month: Month, fair: dict[str, Any], prio: dict[str, Any], dirs: tuple[Path, Path]) -> str:
    """Return the short-work targets' row of one month: final-share's figures beside the targets and priority's."""
    work = [Details.files(d / FOLDER).rows("workloads") for d in dirs]
    audit, base = fair["audit"], prio["audit"]
    cells: list[str] = []

    def cell(text: str, ok: bool | None) -> None:
        cells.append(text if ok is None or ok else f"✗ {text}")

    debug = audit["wait_by_size"]["debug_allocated"]["p90_s"]
    cell(human(debug, "seconds"), debug is None or debug <= 300)
    buckets = [{b["size"]: b["p90_s"] for b in a["wait_by_size"]["buckets"]} for a in (audit, base)]
    for size, (lo, hi) in (("2-8", (2, 8)), ("9-64", (9, 64))):
        ours, theirs = buckets[0][size], buckets[1][size]
        mine, others = _p90(work[0], lo, hi), _p90(work[1], lo, hi)
        cell(f"{human(ours, 'seconds')} / {human(theirs, 'seconds')} (allocated {human(mine, 'seconds')} / "
             f"{human(others, 'seconds')})", ours is None or theirs is None or ours <= theirs)
    wide = in_step(month, work[0], 65, 256)
    cell("–" if wide is None else f"{wide * 100:.0f} %", wide is None or wide >= 0.6)
    team = level(audit, TEAM_DEPTH.get(name))
    worst = team["worst_node_week"]["ratio_week"]
    cell(f"{team['ratio_week'] * 100:.1f} % / {worst * 100:.1f} %", team["ratio_week"] >= 0.95 and worst >= 0.9)
    bound = (team.get("hourly_bound") or {}).get("ratio")
    cell(f"{team['ratio'] * 100:.1f} % / {'–' if bound is None else f'{bound * 100:.1f} %'}",
         bound is None or team["ratio"] >= bound - 0.10)
    bill = audit["discarded_work"]
    per = bill["preemptions"] / month.workloads
    cell(f"{per:.2f}", per <= 1)
    cell(f"{bill['discarded_share'] * 100:.1f} %", bill["discarded_share"] <= 0.10)
    ratio = bill.get("eviction_ratio")
    cell(human(ratio, "rate"), ratio is None or ratio <= 1.5)
    busy = busy_occupancy(dirs[0])
    cell("–" if busy is None else f"{busy * 100:.1f} %", busy is None or busy >= 0.95)
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    """Replay every month under every rule set and print the three tables."""
    months = [m.strip() for m in os.environ.get("BENCH_RULES_MONTHS", DEFAULT_MONTHS).split(",") if m.strip()]
    names = [r.strip() for r in os.environ.get("BENCH_RULES", "final-share,priority").split(",") if r.strip()]
    unknown = [r for r in names if r not in RULES]
    if unknown:
        raise SystemExit(f"BENCH_RULES: unknown rules {unknown[0]!r} (expected some of {', '.join(RULES)})")
    jobs = int(os.environ.get("BENCH_JOBS", default_jobs()))
    print("| month | rules | ended | preemptions (allocated / fill) | per workload | discarded share "
          "| eviction ratio | received / owed | per day | debug p90 wait |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    second: list[str] = []
    third: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        for name in months:
            month = month_inputs(name)
            chosen = [RULES[r] for r in names]
            settings = [(knobs, label, Path(tmp) / f"{name}-{i}") for i, (label, knobs) in enumerate(chosen)]
            results = run_settings(month.inputs, settings, jobs=jobs, quiet=True, until=month.until)
            for (label, _), result, (_, _, run_dir) in zip(chosen, results, settings, strict=True):
                print(row(name, label, result, month.workloads), flush=True)
                second.append(must_show(name, month, label, result, run_dir))
            if "final-share" in names and "priority" in names:
                i, j = names.index("final-share"), names.index("priority")
                third.append(targets(name, month, results[i], results[j], (settings[i][2], settings[j][2])))
            pairs = zip(chosen, results, strict=True)
            walls = ", ".join(f"{label} {r['replay']['wall_s']:.0f} s" for (label, _), r in pairs)
            print(f"<!-- {name}: {month.workloads:,} workloads; replay wall {walls} -->", flush=True)
    print()
    print("| month | rules | replayed | 65–256 GPUs: wait p50 / p90 / max (runs) | 257+ GPUs | start in step "
          "(65–256 / 1–8 GPUs) | team: per hour / per week / worst team per week / teams ≥ 95 % "
          "| researcher: the same | preemptions per workload | discarded | eviction ratio | debug p90 | occupancy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for line in second:
        print(line)
    if third:
        print()
        print("| month | debug p90 ≤ 5 min | 2–8 GPUs p90: final-share / priority (allocated work alone) | 9–64 GPUs "
              "| 65–256 in step ≥ 60 % | team per week ≥ 95 % / worst team ≥ 90 % | team per hour / its bound "
              "(within 10 points) | preemptions per workload ≤ 1 | discarded ≤ 10 % | eviction ratio ≤ 1.5 "
              "| occupancy while demand exceeds capacity ≥ 95 % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for line in third:
            print(line)


if __name__ == "__main__":
    main()
