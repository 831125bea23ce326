"""Replay one trace under several policies or knob settings and show the audits side by side.

Each knob takes a comma list and --policy repeats; every combination is replayed, e.g.
``gpuledger compare trace.csv --budgets b.yaml --max-min-runtime 1h,2h,4h,8h,16h`` gives the
slice-length trade-off: the largest jobs' mean and p90 wait against the discarded GPU-hours.
The settings replay side by side in a pool of processes (``--jobs``, default: the cores), with the
same results as one by one.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from ledger.commands._knobs import add_knob_arguments, knob_grid
from ledger.core.knobs import Knobs, format_duration
from ledger.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument(
        "trace", metavar="TRACE", help="workload trace (CSV, JSON Lines, ITP raw trace) or event log directory"
    )
    p.add_argument("--budgets", metavar="FILE", help="budgets file (YAML or JSON); required for a trace")
    p.add_argument("--out", metavar="DIR", help="keep each run directory under DIR (default: a temporary directory)")
    p.add_argument("--force", action="store_true", help="replace earlier runs in --out (their files only)")
    p.add_argument("--format", choices=("table", "json", "csv", "html"), default="table",
                   help="output format; html is one page (see --view)")
    p.add_argument(
        "--view", choices=("sweep", "columns"), default=None,
        help="html, csv and json: 'sweep' gives one row per setting with the best values marked and trade-off charts; "
        "'columns' one column per setting (default: sweep for three settings or more, columns for two)",
    )
    p.add_argument("--strict", action="store_true", help="refuse the whole trace if any row is bad")
    p.add_argument("--until", metavar="WHEN", help="stop the clock here: ISO time, or a duration after the first input")
    p.add_argument("--quiet", action="store_true", help="no progress bars (for scripts)")
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N",
        help="replay up to N settings at once, each in its own process (default: the cores); 1: one by one",
    )
    add_knob_arguments(p, many_policies=True)


def column_labels(grid: list[Knobs]) -> list[str]:
    """Return short column names that show only the knobs that differ between the settings."""
    if len(grid) == 1:
        return [grid[0].policy]
    parts: list[list[str]] = [[] for _ in grid]
    fields = (
        ("policy", lambda k: k.policy),
        (
            "window",
            lambda k: (
                f"half-life {format_duration(k.half_life_s)}"
                if k.half_life_s
                else f"window {format_duration(k.window_s)}"
            ),
        ),
        ("cap", lambda k: f"cap {format_duration(k.max_min_runtime_s)}"),
        ("charge", lambda k: k.charge),
        ("grace", lambda k: f"grace {format_duration(k.grace_s)}"),
        ("strategy", lambda k: k.preemption_strategy),
        ("cycle", lambda k: f"cycle {format_duration(k.preempt_cycle_s)}"),
        ("bound", lambda k: f"max {k.max_preemptions} preemptions"),
        ("headroom", lambda k: f"fill headroom {k.fill_headroom * 100:g}%"),
        ("uncheckpointed", lambda k: "preempt uncheckpointed" if k.preempt_uncheckpointed else "spare uncheckpointed"),
        ("debug hosts", lambda k: "debug hosts auto" if k.debug_hosts is None else f"{k.debug_hosts} debug hosts"),
    )
    for _, show in fields:
        values = [show(k) for k in grid]
        if len(set(values)) > 1:
            for i, v in enumerate(values):
                parts[i].append(v)
    return [" ".join(p) or f"run {i + 1}" for i, p in enumerate(parts)]


# Knobs read only by fair share's rules (its standings, its preemption walk, its progress rules and
# fill headroom): under ``priority`` and ``fifo`` they cannot change a decision, so settings that
# differ only in these are replayed once. (The cap is not among them: it bounds every policy's
# minimum runtime, and so its protected windows.)
FAIR_SHARE_ONLY = {
    "window_s": "window", "half_life_s": "half-life", "charge": "charge",
    "preemption_strategy": "preemption strategy", "max_preemptions": "preemption bound",
    "preempt_uncheckpointed": "uncheckpointed rule", "fill_headroom": "fill headroom",
    "standing_check_s": "standing check", "debug_hosts": "debug partition",
}


def deciding(knobs: Knobs) -> Knobs:
    """Return ``knobs`` with every knob its policy never reads set to its default (so equal ones decide alike)."""
    if knobs.policy == "fairshare":
        return knobs
    default = Knobs()
    return dataclasses.replace(knobs, **{name: getattr(default, name) for name in FAIR_SHARE_ONLY})


def replayed_once(grid: list[Knobs], labels: list[str]) -> tuple[list[str | None], list[str]]:
    """Return, per setting, the label of an earlier one that decides alike (or None), and the notes saying so."""
    first: dict[Knobs, int] = {}
    same: list[str | None] = []
    for i, k in enumerate(grid):
        j = first.setdefault(deciding(k), i)
        same.append(labels[j] if j != i else None)
    notes = []
    for policy in dict.fromkeys(k.policy for k in grid):
        group = [i for i, k in enumerate(grid) if k.policy == policy]
        dupes = [i for i in group if same[i] is not None]
        if not dupes:
            continue
        varied = [FAIR_SHARE_ONLY[n] for n in FAIR_SHARE_ONLY
                  if len({getattr(grid[i], n) for i in group}) > 1]
        notes.append(
            f"Under {policy}, the {' and '.join(varied) or 'fair-share settings'} cannot change a decision (only "
            f"fair share reads {'them' if len(varied) != 1 else 'it'}): {len(dupes)} of its {len(group)} settings "
            f"were not replayed again; each shows the results of the one it decides alike with."
        )
    return same, notes


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._paths import input_file, input_source, output_dir
    from ledger.commands._runs import report_rejected, unfinished_note
    from ledger.commands._sweep import default_jobs, run_settings
    from ledger.commands.replay import until_time
    from ledger.queries.sidebyside import table
    from ledger.replay.run import load_inputs, on_hosts_of

    input_source(args.trace)
    if args.budgets is not None:
        input_file(args.budgets, "budgets file")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        output_dir(args.out, force=False)  # raises: --out names a file
    inputs = load_inputs(args.trace, args.budgets, strict=args.strict)
    grid = knob_grid(args, gpus_per_node=inputs.gpus_per_node)  # bad knob values refused before --out is touched
    inputs = on_hosts_of(inputs, grid[0].gpus_per_node)  # one width for every column
    until = until_time(args.until, min(e.time for e in inputs.inputs))
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: expected 1 or more")
    # checked after every argument: a bad one leaves --out as it was
    out = output_dir(args.out, force=args.force, run_subdirs=True, source=args.trace) if args.out else None
    report_rejected(inputs.rejected, out)
    labels = column_labels(grid)
    same, notes = replayed_once(grid, labels)
    with tempfile.TemporaryDirectory(prefix="gpuledger-compare-") as tmp:
        base = Path(args.out) if args.out else Path(tmp)
        settings = []
        for i, (knobs, label) in enumerate(zip(grid, labels, strict=True)):
            if same[i] is None:
                slug = f"{i + 1:02d}-" + "".join(c if c.isalnum() else "-" for c in label).strip("-")
                settings.append((knobs, label, base / slug))
        jobs = args.jobs if args.jobs is not None else default_jobs()
        done = dict(zip((s[1] for s in settings), run_settings(inputs, settings, jobs=jobs, quiet=args.quiet,
                                                                until=until), strict=True))
    results = [done[label if same[i] is None else str(same[i])] for i, label in enumerate(labels)]
    for (_, label, run_dir) in settings:
        left = unfinished_note(done[label]["replay"], run_dir / "replay.json" if args.out else None)
        if left:  # its column audits work that did not end: say so, as replay does
            print(f"{label}: {left}", file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    view = args.view or ("sweep" if len(grid) >= 3 else "columns")
    title = f"gpuledger compare: {args.trace}"
    if args.format == "html" and view == "sweep":
        from ledger.queries.report import sweep_page

        sys.stdout.write(sweep_page(labels, results, title=title, notes=notes, same_as=same))
    elif args.format == "html":
        from ledger.queries.report import compare_html

        sys.stdout.write(compare_html(labels, results, title=title))
    elif args.format in ("csv", "json") and view == "sweep":
        from ledger.queries.sweep import sweep_table

        sys.stdout.write(sweep_table(labels, results, args.format, same_as=same))
    else:
        sys.stdout.write(table(labels, results, args.format))
    return 0
