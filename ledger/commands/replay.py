"""Replay a workload trace or event log through the decision core; write the event log and audit.json.

TRACE is a CSV (with header) or JSON Lines workload trace, or an event log / run directory.
The run directory DIR gets events/ (the embedded event log of everything that happened),
audit.json, replay.json (counts), and rejected_rows.txt when some trace rows were bad.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from ledger.commands._knobs import add_knob_arguments, knobs_from_args
from ledger.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument(
        "trace", metavar="TRACE", help="workload trace (CSV, JSON Lines, ITP raw trace) or event log directory"
    )
    p.add_argument("--budgets", metavar="FILE", help="budgets file (YAML or JSON); required for a trace")
    p.add_argument("--out", metavar="DIR", required=True, help="run directory to write (new or empty)")
    p.add_argument("--force", action="store_true", help="replace an earlier run in --out (its files only)")
    p.add_argument("--format", choices=("table", "json", "csv", "html"), default="table",
                   help="what goes to standard output: the run's summary table (default), json, csv, or the "
                        "HTML report")
    p.add_argument("--strict", action="store_true", help="refuse the whole trace if any row is bad")
    p.add_argument("--until", metavar="WHEN", help="stop the clock here: ISO time, or a duration after the first input")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary (for scripts)")
    add_knob_arguments(p)


def until_time(text: str | None, first: datetime) -> datetime | None:
    """Return the stop time --until names: an ISO 8601 time, or a duration (e.g. 30d) after ``first``.

    Either must lie within the span an event log can hold (2000 to the end of 2099): the replay
    clock cannot pass its end, so a later stop time is refused rather than silently cut.
    """
    if not text:
        return None
    from ledger.commands._when import flag_time, within_log_span
    from ledger.core.knobs import parse_duration

    try:
        seconds = parse_duration(text)
    except ConfigError:
        return flag_time("--until", text, expected="an ISO 8601 time or a duration such as 30d")
    try:
        stop: datetime | None = first + timedelta(seconds=seconds)
    except OverflowError:  # past year 9999
        stop = None
    return within_log_span("--until", text, stop, shown=True)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._paths import input_file, input_source, output_dir
    from ledger.commands._runs import report_rejected, run_one, unfinished_note
    from ledger.queries.sidebyside import table
    from ledger.replay.run import load_inputs, on_hosts_of

    started = time.perf_counter()
    input_source(args.trace)
    if args.budgets is not None:
        input_file(args.budgets, "budgets file")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        output_dir(args.out, force=False)  # raises: --out names a file
    inputs = load_inputs(args.trace, args.budgets, strict=args.strict)
    knobs = knobs_from_args(args, gpus_per_node=inputs.gpus_per_node)
    inputs = on_hosts_of(inputs, knobs.gpus_per_node)
    until = until_time(args.until, min(e.time for e in inputs.inputs))
    # checked after the inputs, the knobs and --until: a bad one leaves --out as it was
    out = output_dir(args.out, force=args.force, source=args.trace)
    report_rejected(inputs.rejected, out)
    result = run_one(inputs, knobs, out, quiet=args.quiet, until=until)
    left = unfinished_note(result["replay"], out / "replay.json")
    if left:
        print(left, file=sys.stderr)
    if not args.quiet:
        info = result["replay"]
        status = sys.stderr
        print(
            f"replayed {args.trace} under {info['knobs']}: {info['events']:,} events over "
            f"{info['simulated_days']:.1f} simulated days in {info['wall_s']:.1f} s, audited in "
            f"{info['audit_s']:.1f} s: {time.perf_counter() - started:.1f} s in all", file=status,
        )
        for note in info["notes"]:
            print(f"  {note}", file=status)
        print(f"wrote {out / 'events'} and {out / 'audit.json'}", file=status)
    if args.format == "html":
        from ledger.queries.report import html

        sys.stdout.write(html(result["audit"], f"gpuledger replay: {knobs.label()}"))
    else:  # --quiet drops the progress and the summary, not the result (as compare and demo)
        sys.stdout.write(table([knobs.policy], [result], args.format))
    return 0
