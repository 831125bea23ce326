"""Tell why one workload waited or was preempted, from the log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.queries.explain import DebugPartition


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


def run_info(source: str) -> dict[str, object]:
    """Return a run's ``replay.json`` ({} for a log without one)."""
    where = Path(source)
    info = where / "replay.json" if where.name != "events" else where.parent / "replay.json"
    if not info.is_file():
        return {}
    data = json.loads(info.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def run_settings(source: str) -> dict[str, object]:
    """Return the settings a run was replayed under, from its ``replay.json`` ({} for a log without one)."""
    settings = run_info(source).get("settings")
    return settings if isinstance(settings, dict) else {}


def run_lookback(settings: dict[str, object]) -> tuple[int, int | None]:
    """Return the run's fair-share window (s) and half-life (s, or None) from its settings, else 7 days and None."""
    from ledger.core.knobs import Knobs

    window, half = settings.get("window_s"), settings.get("half_life_s")
    return (window if isinstance(window, int) and window > 0 else Knobs().window_s,
            half if isinstance(half, int) and half > 0 else None)


def run_headroom(settings: dict[str, object]) -> float:
    """Return the fill headroom a run kept: its own setting when its ``replay.json`` has it, else the default."""
    from ledger.core.knobs import FILL_HEADROOM

    if settings.get("policy", "fairshare") != "fairshare":
        return 0.0  # the headroom is a fair-share rule: the other policies never keep it
    return float(str(settings.get("fill_headroom", FILL_HEADROOM)))


def run_debug_partition(info: dict[str, object]) -> DebugPartition | None:
    """Return the run's debug partition over time, or None (none, or a run that does not record it)."""
    from ledger.core.knobs import DEBUG_RUNTIME_S
    from ledger.queries.explain import DebugPartition
    from ledger.queries.timefmt import parse_iso

    settings = info.get("settings")
    if not isinstance(settings, dict) or "debug_hosts" not in settings:
        return None
    hosts = settings["debug_hosts"]  # None: sized from the debug runs' demand, recorded as it changed
    per_node = settings.get("gpus_per_node", 8)
    per = per_node if isinstance(per_node, int) else 8
    if isinstance(hosts, int) and hosts > 0:
        return DebugPartition(hosts, (), DEBUG_RUNTIME_S, per)
    sizes = info.get("debug_partition")
    if hosts is not None or not isinstance(sizes, list) or not sizes:
        return None
    return DebugPartition(None, tuple((parse_iso(str(s["from"])), int(s["hosts"])) for s in sizes), DEBUG_RUNTIME_S,
                          per)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._knobs import share_arg
    from ledger.core.knobs import format_duration, parse_duration
    from ledger.queries.explain import as_text, explain

    info = run_info(args.source)
    settings = info.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    headroom = share_arg("--fill-headroom", args.fill_headroom)
    if headroom is None:
        headroom = run_headroom(settings)
    # the standings the run's decisions quote: over its own window, unless another is asked for
    window, half_life = run_lookback(settings)
    if args.window is not None:
        window, half_life = int(parse_duration(args.window)), None
    policy = str(settings.get("policy", "fairshare"))
    result = explain(args.source, args.workload_id, window_s=window, fill_headroom=headroom, policy=policy,
                     debug_partition=run_debug_partition(info))
    if half_life is not None and not result["recorded"]:  # a decided log quotes its own standings
        result["lookback_note"] = (
            f"The run ranked budgets by a {format_duration(half_life)} half-life: the standings below are over a "
            f"{format_duration(window)} window and may differ from the ratios its decisions quote."
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        sys.stdout.write(as_text(result))
    return 0
