"""Audit a run directory or event log: owed hours, discarded work, wait by size, occupancy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ledger.errors import InputError

REPORTS = ("owed_hours", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies", "workloads")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("source", metavar="SOURCE", help="run directory (from replay) or embedded event log directory")
    p.add_argument("--report", choices=REPORTS, type=lambda s: s.replace("-", "_"), metavar="NAME",
                   help=f"show one report only: {', '.join(r.replace('_', '-') for r in REPORTS)} (default: all)")
    p.add_argument("--since", metavar="ISO", help="start of the audit period (UTC if no offset; default: first event)")
    p.add_argument("--until", metavar="ISO", help="end of the audit period (default: last event)")
    p.add_argument("--budgets", metavar="FILE",
                   help="for a log with no budget tree: charge its imported workloads to this budgets file's tree "
                        "and take its capacity (nothing is written to SOURCE)")
    p.add_argument("--format", choices=("table", "json", "csv", "html"), default="table")
    p.add_argument("--window", default="7d", help="lookback window of the fairness series (default 7d)")
    p.add_argument("--out", metavar="FILE", help="write here instead of standard output (html needs it or writes "
                   "report.html)")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.core.knobs import parse_duration
    from queries.audit import audit
    from queries.report import render_html
    from queries.tables import as_csv, as_text, tables
    from queries.timefmt import parse_iso

    def when(text: str | None, flag: str) -> int | None:
        if text is None:
            return None
        try:
            return parse_iso(text)
        except ValueError:
            raise InputError(f"{flag} {text!r}: not an ISO 8601 time (e.g. 2026-03-02T00:00:00Z)") from None

    since, until = when(args.since, "--since"), when(args.until, "--until")
    if since is not None and until is not None and until <= since:
        raise InputError(f"--until {args.until} is not after --since {args.since}")
    window_s = int(parse_duration(args.window))
    source = args.source
    if getattr(args, "budgets", None):
        from ledger.commands._tree import audit_records_with_tree

        source = audit_records_with_tree(args.source, args.budgets)
    data = audit(source, since=since, until=until, window_s=window_s)
    report: str | None = args.report
    if args.format == "html":
        out = Path(args.out or "report.html")
        render_html(data, out)
        print(f"wrote {out}")
        return 0
    if args.format == "json":
        text = json.dumps({report: data[report]} if report else data, indent=1) + "\n"
    elif args.format == "csv":
        text = as_csv(tables(data, report))
    else:
        text = as_text(tables(data, report))
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
