"""Put the audits of several replays side by side: one row per measure, one column per setting.

Input is what a run directory holds: ``audit.json`` (the audits' keys, docs/formats.md)
and ``replay.json`` (the driver's own counts). Output is a table as text, JSON or CSV.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.queries.timefmt import duration

SIZES = ("1", "2-8", "9-64", "65-256", "257+")


@dataclass(frozen=True)
class Measure:
    """One row of the table: a key for machines, a label for people, how to read and show the value."""

    key: str
    label: str
    get: Callable[[dict[str, Any]], float | int | None]
    unit: str  # "ratio" | "share" | "seconds" | "count" | "gpu_hours" | "rate"


def _dig(*path: str) -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        value: Any = run
        for p in path:
            if not isinstance(value, dict) or p not in value:
                return None
            value = value[p]
        return value

    return get


def _bucket(size: str, stat: str, key: str = "buckets") -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        for b in (run.get("audit", {}).get("wait_by_size", {}) or {}).get(key, []) or []:
            if b.get("size") == size and b.get("jobs"):
                return b.get(stat)
        return None

    return get


def largest_bucket(run: dict[str, Any]) -> str | None:
    """Return the largest size bucket that has jobs in this run."""
    buckets = (run.get("audit", {}).get("wait_by_size", {}) or {}).get("buckets", []) or []
    have = {b.get("size") for b in buckets if b.get("jobs")}
    return next((s for s in reversed(SIZES) if s in have), None)


def _teams_below(threshold: float, key: str = "ratio") -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        teams = (run.get("audit", {}).get("owed_hours", {}) or {}).get("teams") or []
        rated = [t for t in teams if t.get(key) is not None and (t.get("owed_gpu_hours") or 0) > 0]
        return sum(1 for t in rated if t[key] < threshold) if rated else None

    return get


def _owed_over(period: str) -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        rows = (run.get("audit", {}).get("owed_hours", {}) or {}).get("received_by_period") or []
        return next((r.get("ratio") for r in rows if r.get("period") == period), None)

    return get


def _worst_team(key: str) -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        teams = (run.get("audit", {}).get("owed_hours", {}) or {}).get("teams") or []
        rated = [t[key] for t in teams if t.get(key) is not None and (t.get("owed_gpu_hours") or 0) > 0]
        return min(rated) if rated else None

    return get


def _level_figure(depth: int, key: str) -> Callable[[dict[str, Any]], Any]:
    def get(run: dict[str, Any]) -> Any:
        every = (run.get("audit", {}).get("owed_hours", {}) or {}).get("levels") or []
        return next((lv.get(key) for lv in every if lv.get("depth") == depth), None)

    return get


def reported_level(runs: Sequence[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Return the label of the level the runs' owed hours report ('project (the team level)') and every level."""
    from ledger.queries.tables import level_label

    level = _reported_owed(runs)
    if level is None:
        return "every team", []
    return level_label(level["level"]), list(level.get("levels") or [])


def _reported_owed(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the owed hours of the first run that reports a level of a budget tree."""
    for run in runs:
        owed = run.get("audit", {}).get("owed_hours", {}) or {}
        if owed.get("level") is not None:
            return owed
    return None


def measures(largest: str | None = None, level: str = "every team",
             levels: Sequence[dict[str, Any]] = (), noun: str = "node") -> list[Measure]:
    """Return the rows of the side-by-side table (the largest-jobs rows use bucket ``largest``).

    ``level`` names the level of the budget tree the owed hours are at, ``noun`` one of its nodes
    ('project'); ``levels`` (the tree's levels) add a row per other level, per hour and per week.
    """
    from ledger.queries.tables import plural

    a = ("audit",)
    nodes = plural(noun)
    rows = [
        Measure(
            "owed_ratio", f"GPU-hours received / owed per {level}, hour by hour",
            _dig(*a, "owed_hours", "overall_ratio"), "ratio"
        ),
        Measure("owed_bound", "  at most possible hour by hour (the hourly bound)",
                _dig(*a, "owed_hours", "hourly_bound", "ratio"), "ratio"),
        Measure("owed_ratio_day", f"  each {noun}'s hours evened out over its day", _owed_over("day"), "ratio"),
        Measure("owed_ratio_week", f"  each {noun}'s hours evened out over its week", _owed_over("week"), "ratio"),
        Measure("worst_team_ratio", f"  worst {noun}, hour by hour", _worst_team("ratio"), "ratio"),
        Measure("worst_team_ratio_week", f"  worst {noun}, over its weeks", _worst_team("ratio_week"), "ratio"),
        Measure("teams_below_95", f"  {nodes} under 95% of owed, hour by hour", _teams_below(0.95), "count"),
        Measure("teams_below_95_week", f"  {nodes} under 95% of owed, over their weeks",
                _teams_below(0.95, "ratio_week"), "count"),
    ]
    for lv in levels:
        if lv.get("reported"):
            continue
        name = lv.get("name") or f"depth {lv['depth']}"
        rows += [
            Measure(f"owed_ratio_level_{lv['depth']}", f"  per {name}: received / owed per hour",
                    _level_figure(lv["depth"], "ratio"), "ratio"),
            Measure(f"owed_ratio_week_level_{lv['depth']}", f"  per {name}: per week",
                    _level_figure(lv["depth"], "ratio_week"), "ratio"),
        ]
    rows += [
        Measure(
            "debug_p50_wait_s",
            "debug runs (protected, 1 s-15 min): wait p50",
            _dig(*a, "wait_by_size", "debug_allocated", "p50_s"),
            "seconds",
        ),
        Measure(
            "debug_p90_wait_s",
            "debug runs (protected): wait p90",
            _dig(*a, "wait_by_size", "debug_allocated", "p90_s"),
            "seconds",
        ),
        Measure(
            "debug_all_p90_wait_s",
            "min runtime <= 15 min incl. free fill: wait p90",
            _dig(*a, "wait_by_size", "debug", "p90_s"),
            "seconds",
        ),
    ]
    for size in SIZES:
        rows.append(Measure(f"wait_p50_{size}", f"wait p50, {size} GPU jobs", _bucket(size, "p50_s"), "seconds"))
        rows.append(Measure(f"wait_p90_{size}", f"wait p90, {size} GPU jobs", _bucket(size, "p90_s"), "seconds"))
        rows.append(Measure(f"wait_p90_{size}_allocated", "  of them allocated (protected) work: wait p90",
                            _bucket(size, "p90_s", "buckets_allocated"), "seconds"))
    if largest:
        rows.append(
            Measure(
                "largest_mean_wait_s",
                f"largest jobs ({largest} GPUs): mean wait",
                _bucket(largest, "mean_s"),
                "seconds",
            )
        )
        rows.append(
            Measure(
                "largest_p90_wait_s", f"largest jobs ({largest} GPUs): p90 wait", _bucket(largest, "p90_s"), "seconds"
            )
        )
    d = (*a, "discarded_work")
    rows += [
        Measure("preemptions", "preemptions", _dig(*d, "preemptions"), "count"),
        Measure(
            "preemptions_per_workload_week", "  per workload-week", _dig(*d, "preemptions_per_workload_week"), "rate"
        ),
        Measure(
            "discarded_gpu_hours",
            "GPU-hours of work thrown away by preemption",
            _dig(*d, "discarded_gpu_hours"),
            "gpu_hours",
        ),
        Measure("discarded_share", "  as a share of delivered GPU-hours", _dig(*d, "discarded_share"), "share"),
        Measure(
            "discarded_unallocated_gpu_hours",
            "  of it from unallocated work",
            _dig(*d, "by_tier", "unallocated", "discarded_gpu_hours"),
            "gpu_hours",
        ),
        Measure("median_restart_s", "  median restart time", _dig(*d, "median_restart_s"), "seconds"),
        Measure("eviction_ratio", "GPUs evicted per GPU they let start", _dig(*d, "eviction_ratio"), "rate"),
        Measure(
            "occupied_share", "occupancy: GPU-hours used / capacity", _dig(*a, "occupancy", "occupied_share"), "share"
        ),
        Measure(
            "allocated_share", "  charged to a budget (allocated)", _dig(*a, "occupancy", "allocated_share"), "share"
        ),
        Measure(
            "unallocated_share",
            "  free, preemptible (unallocated)",
            _dig(*a, "occupancy", "unallocated_share"),
            "share",
        ),
        Measure(
            "demand_ratio", "demand: GPUs waiting or running / capacity (mean)", _dig("replay", "demand_ratio"), "rate"
        ),
    ]
    return rows


def human(value: float | int | None, unit: str) -> str:
    """Return a value as a person reads it: 98.0%, 30 s, 2.8 h, 1,234."""
    if value is None:
        return "-"
    if unit in ("ratio", "share"):
        return f"{value * 100:.1f}%"
    if unit == "seconds":
        return duration(float(value))
    if unit == "gpu_hours":
        return f"{value:,.0f}"
    if unit == "count":
        return f"{int(value):,}"
    return f"{value:.2f}"


def table(columns: Sequence[str], runs: Sequence[dict[str, Any]], fmt: str = "table", *,
          levels_note: bool = True) -> str:
    """Return the side-by-side audits of ``runs`` (each {"audit": ..., "replay": ...}) as table, json or csv.

    ``levels_note``: end the table with the note that the budget tree names no levels, if so.
    """
    from ledger.queries.tables import level_noun, unnamed_levels_note

    largest = next((b for b in (largest_bucket(r) for r in runs) if b), None)
    level, levels = reported_level(runs)
    owed = _reported_owed(runs)
    noun = level_noun(owed["level"]) if owed is not None else "team"
    rows = [m for m in measures(largest, level, levels, noun) if any(m.get(r) is not None for r in runs)]
    if fmt == "json":
        return json.dumps(
            {
                "columns": list(columns),
                "rows": [
                    {"measure": m.key, "label": m.label.strip(), "unit": m.unit, "values": [m.get(r) for r in runs]}
                    for m in rows
                ],
            },
            indent=2,
        )
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["measure", "unit", *columns])
        for m in rows:
            w.writerow([m.key, m.unit, *("" if m.get(r) is None else m.get(r) for r in runs)])
        return buf.getvalue()
    cells = [[m.label, *(human(m.get(r), m.unit) for r in runs)] for m in rows]
    head = ["", *columns]
    widths = [max(len(str(row[i])) for row in [head, *cells]) for i in range(len(head))]
    lines = ["  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head))]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
    note = unnamed_levels_note({"owed_hours": owed}) if owed is not None and levels_note else ""
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(textwrap.wrap(note, 100)) + "\n" if note else "")


__all__ = ["SIZES", "Measure", "human", "largest_bucket", "measures", "reported_level", "table"]
