"""Audit a run directory or event log: owed hours, discarded work, wait by size, occupancy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.errors import InputError

REPORTS = ("owed_hours", "owed_levels", "wait_by_team", "discarded_work", "wait_by_size", "occupancy", "fairness",
           "anomalies", "workloads")


MAX_ROWS = 60  # rows of a long table a text table shows


def output_dir_for_tables(text: str, source: str) -> Path:
    """Return the folder ``--tables`` names; refuse one inside the event log the audit reads."""
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--tables {text}: exists and is not a folder")
    src = Path(source).resolve()
    log = src / "events" if (src / "events").is_dir() else src
    if folder.resolve() == log or log in folder.resolve().parents:
        raise InputError(f"--tables {text}: inside the event log this command reads; choose another folder")
    return folder


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
    p.add_argument("--level", metavar="NAME|DEPTH",
                   help="the level of the budget tree the owed hours report, by the name the budgets file gives it "
                        "or by depth (0 = the top); default: the team level the tree names, else the deepest")
    p.add_argument("--format", choices=("table", "json", "csv", "html"), default="table")
    p.add_argument("--window", default="7d", help="lookback window of the fairness series (default 7d)")
    p.add_argument("--out", metavar="FILE", help="write here instead of standard output (every format, html too)")
    p.add_argument("--tables", metavar="DIR",
                   help="also write the detail tables (hourly, daily, per workload) here as Parquet files; "
                        "the document names them")
    p.add_argument("--force", action="store_true", help="replace an existing --out file (never one the audit reads)")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._when import flag_time
    from ledger.core.knobs import parse_duration
    from ledger.events import to_us
    from ledger.queries.audit import collect, connect, prepare
    from ledger.queries.detail import TABLES, Details, attach, write_tables
    from ledger.queries.report import html as page_html
    from ledger.queries.report import render_html
    from ledger.queries.tables import as_csv, as_text, headline, tables, titles

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
    level: str | int | None = args.level
    if isinstance(level, str) and level.isdigit():
        level = int(level)
    report: str | None = args.report
    if args.format == "html" and report:
        raise InputError("--report: the HTML report is the whole audit; leave --report out for --format html")
    tables_dir = output_dir_for_tables(args.tables, args.source) if args.tables else None
    con = connect(source, decisions=False)
    prepare(con, since, until, window_s, within_log=True, level=level)
    data = collect(con, write_tables(con, tables_dir) if tables_dir is not None else None)
    details = Details.of(con)
    if args.format == "html":
        from ledger.queries.report import REPORT_TABLES

        data = attach(data, details, REPORT_TABLES)
        if out is None:
            sys.stdout.write(page_html(data, f"gpuledger audit: {args.source}"))
        else:
            render_html(data, out, title=f"gpuledger audit: {args.source}")
            print(f"wrote {out}", file=sys.stderr)
        return 0
    if args.format == "json":
        from ledger.queries.audit import dumps

        text = dumps({report: data[report]} if report else data).decode()
    else:
        # the tables list every workload and every team's hours (a text table its first rows only)
        shown = tuple(n for n in ("fairness_hourly", "workloads") if report in (None, TABLES[n].key[0]))
        cut = None if args.format == "csv" else MAX_ROWS + 1
        data = attach(data, details, shown, limit=cut)
        named = tables(data, report)
        if args.format == "csv":
            text = as_csv(named)
        else:
            totals = {"fairness": data["tables"]["fairness_hourly"]["rows"],
                      "workloads": data["tables"]["workloads"]["rows"]}
            text = as_text(named, MAX_ROWS, totals, titles(data))
            if not report:  # the whole audit: its headline first, then every table
                text = "\n".join(headline(data)) + "\n\n" + text
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
