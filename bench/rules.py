"""The preemption bill of the scheduling rules on measured months: the table of docs/rules.md.

Each month is replayed until all its work is done under ``final-share`` (the default rules),
``instant`` and the ``priority`` baseline, and audited: preemptions (allocated / free fill), per
submitted workload, discarded share of delivered GPU-hours, eviction ratio, received ÷ owed (hour by
hour, and with each team's hours summed over its UTC day: ``per day``) and the p90 wait of allocated
debug runs. The figures are deterministic (same code, same month, same figures); the wall time of
each run is printed beside them for information only.

``BENCH_RULES_MONTHS`` picks the months (default ``demo,A,B,C,I``) and ``BENCH_JOBS`` how many
replays run at once (default: the cores). The months:

* ``demo``: ``gpuledger demo``'s month (seed 7), replayed past its 30 days until all work is done;
* ``full``: the same month with about 100,000 workloads (``gpuledger demo --month full``), not in
  the default list (about 2 minutes a replay);
* ``A``, ``B``, ``C``: scenario-family months on 256 GPUs (``MONTHS`` below);
* ``I``: month A's parameters on 1,024 GPUs (about 83,000 workloads in a week at 2.5x demand).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ledger.commands._sweep import default_jobs, run_settings
from ledger.core.knobs import Knobs
from ledger.queries.sidebyside import human
from ledger.replay import scenario_family as family
from ledger.replay.run import ReplayInputs, inputs_from_budgets

MONTHS: dict[str, tuple[family.Params, int]] = {
    "A": (family.Params(demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15), 1),
    "B": (family.Params(demand=1.5, close_budgets=False, fill_share=0.3, exact_share=0.1), 2),
    "C": (family.Params(demand=3.0, close_budgets=True, fill_share=0.0, never_checkpoint=0.5, wide_share=0.4), 3),
    "I": (family.Params(gpus=1024, demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15), 1),
}
RULES: tuple[tuple[str, Knobs], ...] = (
    ("final-share", Knobs()),
    ("instant", Knobs(preemption_strategy="instant")),
    ("priority baseline", Knobs(policy="priority")),
)


def month_inputs(name: str) -> tuple[ReplayInputs, int]:
    """Return the inputs of month ``name`` and its number of workloads."""
    if name in ("demo", "full"):
        from ledger.replay.demo_month import DEMO, FULL, generate

        demo = generate(7, scale=1.0, mix=DEMO if name == "demo" else FULL)
        return inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start), len(demo.submissions)
    if name not in MONTHS:
        known = ", ".join(["demo", "full", *MONTHS])
        raise SystemExit(f"BENCH_RULES_MONTHS: unknown month {name!r} (expected one of {known})")
    params, seed = MONTHS[name]
    submissions, budgets = family.month(params, seed)
    return inputs_from_budgets(budgets, list(submissions), start=family.START), len(submissions)


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


def main() -> None:
    """Replay every month under every rule set and print the table."""
    months = [m.strip() for m in os.environ.get("BENCH_RULES_MONTHS", "demo,A,B,C,I").split(",") if m.strip()]
    jobs = int(os.environ.get("BENCH_JOBS", default_jobs()))
    print("| month | rules | ended | preemptions (allocated / fill) | per workload | discarded share "
          "| eviction ratio | received / owed | per day | debug p90 wait |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        for month in months:
            inputs, workloads = month_inputs(month)
            settings = [(knobs, label, Path(tmp) / f"{month}-{i}") for i, (label, knobs) in enumerate(RULES)]
            results = run_settings(inputs, settings, jobs=jobs, quiet=True)
            for (label, _), result in zip(RULES, results, strict=True):
                print(row(month, label, result, workloads), flush=True)
            pairs = zip(RULES, results, strict=True)
            walls = ", ".join(f"{label} {r['replay']['wall_s']:.0f} s" for (label, _), r in pairs)
            print(f"<!-- {month}: {workloads:,} workloads; replay wall {walls} -->", flush=True)


if __name__ == "__main__":
    main()
