"""Tell why one workload waited or was preempted, from the log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("source", metavar="SOURCE", help="run directory (from replay) or embedded event log directory")
    p.add_argument("workload_id", metavar="WORKLOAD_ID")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--window", default=None,
        help="lookback window of the fair-share standing (default: the run's own window from its replay.json, "
        "else 7d)",
    )
    p.add_argument(
        "--fill-headroom", default=None,
        help="share of the capacity the run kept free of new free fill, e.g. 3%% or 0 (default: the run's own "
        "setting from its replay.json, else 3%%)",
    )


def _run_settings(source: str) -> dict[str, object] | None:
    """Return the knobs a run was replayed under, from its ``replay.json``; None when it has none."""
    where = Path(source)
    info = where / "replay.json" if where.name != "events" else where.parent / "replay.json"
    if not info.is_file():
        return None
    settings = json.loads(info.read_text(encoding="utf-8")).get("settings")
    return settings if isinstance(settings, dict) else None


def run_lookback(source: str) -> tuple[int, int | None]:
    """Return the run's fair-share window (s) and half-life (s, or None) from its settings, else 7 days and None."""
    from ledger.core.knobs import Knobs

    settings = _run_settings(source) or {}
    window, half = settings.get("window_s"), settings.get("half_life_s")
    return (window if isinstance(window, int) and window > 0 else Knobs().window_s,
            half if isinstance(half, int) and half > 0 else None)


def run_headroom(source: str) -> float:
    """Return the fill headroom a run kept: from its ``replay.json`` settings when it has them, else the default."""
    from ledger.core.knobs import FILL_HEADROOM

    settings = _run_settings(source)
    if settings is None:
        return FILL_HEADROOM
    if settings.get("policy", "fairshare") != "fairshare":
        return 0.0  # the headroom is a fair-share rule: the other policies never keep it
    return float(settings.get("fill_headroom", FILL_HEADROOM))  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._knobs import share_arg
    from ledger.core.knobs import format_duration, parse_duration
    from queries.explain import as_text, explain

    headroom = share_arg("--fill-headroom", args.fill_headroom)
    if headroom is None:
        headroom = run_headroom(args.source)
    # the standings the run's decisions quote: over its own window, unless another is asked for
    window, half_life = run_lookback(args.source)
    if args.window is not None:
        window, half_life = int(parse_duration(args.window)), None
    result = explain(args.source, args.workload_id, window_s=window, fill_headroom=headroom)
    if half_life is not None:
        result["lookback_note"] = (
            f"The run ranked budgets by a {format_duration(half_life)} half-life: the standings below are over a "
            f"{format_duration(window)} window and may differ from the ratios its decisions quote."
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        sys.stdout.write(as_text(result))
    return 0
