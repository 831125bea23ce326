"""Audit a run directory or event log: owed hours, discarded work, wait by size, occupancy."""

from __future__ import annotations

import argparse
import json
import sys

from ledger.errors import InputError

REPORTS = ("owed_hours", "wait_by_team", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies",
           "workloads")


def report_name(text: str) -> str:
    """Return a report's name as the audit keys it (``owed-hours`` -> ``owed_hours``); refuse an unknown one."""
    name = text.replace("-", "_")
    if name not in REPORTS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a report: expected one of {', '.join(r.replace('_', '-') for r in REPORTS)}")
    return name


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("source", metavar="SOURCE", help="run directory (from replay) or embedded event log directory")
    p.add_argument("--report", type=report_name, metavar="NAME",
                   help=f"show one report only: {', '.join(r.replace('_', '-') for r in REPORTS)} (default: all)")
    p.add_argument("--since", metavar="ISO", help="start of the audit period (UTC if no offset; default: first event)")
    p.add_argument("--until", metavar="ISO", help="end of the audit period (default: last event)")
    p.add_argument("--budgets", metavar="FILE",
                   help="for a log with no budget tree: charge its imported workloads to this budgets file's tree "
                        "and take its capacity (nothing is written to SOURCE)")
    p.add_argument("--format", choices=("table", "json", "csv", "html"), default="table")
    p.add_argument("--window", default="7d", help="lookback window of the fairness series (default 7d)")
    p.add_argument("--out", metavar="FILE", help="write here instead of standard output (every format, html too)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file (never one the audit reads)")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._when import flag_time
    from ledger.core.knobs import parse_duration
    from ledger.events import to_us
    from ledger.queries.audit import audit
    from ledger.queries.report import html as page_html
    from ledger.queries.report import render_html
    from ledger.queries.tables import as_csv, as_text, headline, tables

    def when(text: str | None, flag: str) -> int | None:
        return None if text is None else to_us(flag_time(flag, text))

    since, until = when(args.since, "--since"), when(args.until, "--until")
    if since is not None and until is not None and until <= since:
        raise InputError(f"--until {args.until} is not after --since {args.since}")
    from ledger.commands._paths import input_source, output_file

    input_source(args.source, "run directory or event log")
    # the log (and a run directory around it) and a budgets file are read: --out may never land there
    around = [args.source] + ([args.budgets] if getattr(args, "budgets", None) else [])
    out = output_file(args.out, force=args.force, inputs=around) if args.out else None
    window_s = int(parse_duration(args.window))
    if window_s <= 0 or window_s % 3600:
        raise InputError(f"--window {args.window}: the fairness window must be a positive whole number of hours")
    source = args.source
    if getattr(args, "budgets", None):
        from ledger.commands._tree import audit_records_with_tree

        source = audit_records_with_tree(args.source, args.budgets)
    data = audit(source, since=since, until=until, window_s=window_s, within_log=True)
    report: str | None = args.report
    if args.format == "html":
        if report:
            raise InputError("--report: the HTML report is the whole audit; leave --report out for --format html")
        if out is None:
            sys.stdout.write(page_html(data, f"gpuledger audit: {args.source}"))
        else:
            render_html(data, out, title=f"gpuledger audit: {args.source}")
            print(f"wrote {out}", file=sys.stderr)
        return 0
    if args.format == "json":
        text = json.dumps({report: data[report]} if report else data, indent=1) + "\n"
    elif args.format == "csv":
        text = as_csv(tables(data, report))
    elif report:
        text = as_text(tables(data, report))
    else:  # the whole audit: its headline first, then every table
        text = "\n".join(headline(data)) + "\n\n" + as_text(tables(data, report))
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
