"""Render an audit as one self-contained HTML file: inline SVG charts and the tables, nothing fetched."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, overload

import duckdb

from queries.svg import PALETTE, bar_chart, cdf_chart, line_chart
from queries.tables import cell, tables

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#222;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;margin:0 0 16px}.kpis{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.kpi{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:150px}.kpi b{display:block;font-size:20px}
.kpi span{color:#666;font-size:12px}.grid{display:flex;flex-wrap:wrap;gap:6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:12.5px}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f6f6f6}svg .t{font-size:12px;font-weight:600;fill:#333}svg .a{font-size:10px;fill:#555}
svg .g{stroke:#e4e4e4}.note{color:#666;font-size:12px}details{margin:6px 0}
"""


def _table(cols: list[str], rows: list[list[Any]], limit: int = 200) -> str:
    head = "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        tds = "".join(
            f'<td class="n">{escape(cell(v))}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{escape(cell(v))}</td>"
            for v in r
        )
        body.append(f"<tr>{tds}</tr>")
    more = f'<p class="note">{len(rows) - limit} more row(s) in audit.json</p>' if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _eviction(dw: dict[str, Any]) -> tuple[str, str]:
    """Return the eviction-ratio box; imported preemptions (sacct, Kueue) name no preemptor, so it has no ratio."""
    if dw["eviction_ratio"] is not None:
        return "eviction ratio", f"{dw['eviction_ratio']:.2f}"
    if dw["preemptions"]:
        return "eviction ratio (the records name no preemptor)", "not recorded"
    return "eviction ratio", "no preemptions"


def _kpis(data: dict[str, Any]) -> str:
    owed, dw, occ = data["owed_hours"], data["discarded_work"], data["occupancy"]
    worst = owed["worst_team"]
    items = [
        ("owed GPU-hours received", _pct(owed["overall_ratio"])),
        ("teams at 95% or more", f"{owed['teams_at_95']} of {owed['teams_owed']}"),
        ("worst team", f"{worst['budget']} {_pct(worst['ratio'])}" if worst else "-"),
        ("occupied share", _pct(occ["occupied_share"])),
        ("discarded GPU-hours", f"{dw['discarded_gpu_hours']:,.1f} ({_pct(dw['discarded_share'])})"),
        _eviction(dw),
    ]
    return (
        '<div class="kpis">'
        + "".join(f"<div class='kpi'><b>{escape(v)}</b><span>{escape(k)}</span></div>" for k, v in items)
        + "</div>"
    )


TOP_TEAMS = 12  # small multiples drawn one per team; the rest are summed into one "others" chart
MAX_POINTS = 120  # points per small-multiple series: whole hours averaged into bins beyond that


def _binned(values: list[float], size: int) -> list[float]:
    """Return the mean of each run of ``size`` values (the last run may be shorter)."""
    if size <= 1:
        return values
    return [sum(values[i : i + size]) / len(values[i : i + size]) for i in range(0, len(values), size)]


def _team_series(data: dict[str, Any]) -> tuple[list[str], dict[str, tuple[list[float], list[float]]]]:
    """Return the hours and, per team, (allocated GPU-hours run, allocation) aligned on those hours."""
    hours = sorted({r["hour"] for r in data["occupancy"]["by_team_hourly"]})
    index = {h: i for i, h in enumerate(hours)}
    series: dict[str, tuple[list[float], list[float]]] = {}
    for r in data["occupancy"]["by_team_hourly"]:
        used, allocation = series.setdefault(r["budget"], ([0.0] * len(hours), [0.0] * len(hours)))
        used[index[r["hour"]]] += r["allocated_gpu_hours"]
        allocation[index[r["hour"]]] += r["allocation_gpu_hours"]
    return hours, series


def _groups(teams: list[str], most: int) -> dict[str, list[str]]:
    """Return at most ``most`` chart groups: each team alone if they fit, else the deepest common tree level that fits.

    Budget paths are tree paths (``org/project/team``), so a level's prefix names a real budget node.
    """
    if len(teams) <= most:
        return {t: [t] for t in teams}
    depth = max(t.count("/") for t in teams)
    for level in range(depth, 0, -1):
        groups: dict[str, list[str]] = {}
        for t in teams:
            groups.setdefault("/".join(t.split("/")[:level]), []).append(t)
        if len(groups) <= most:
            return groups
    return {}


def _occupancy_charts(data: dict[str, Any], top: int = TOP_TEAMS) -> str:
    hours, series = _team_series(data)
    if not series:
        return '<p class="note">No team occupancy in the period.</p>'
    groups = _groups(sorted(series), top + 4)
    if groups:
        panels = [
            (name if members == [name] else f"{name} ({len(members)} teams)",
             [sum(series[t][0][i] for t in members) for i in range(len(hours))],
             [sum(series[t][1][i] for t in members) for i in range(len(hours))])
            for name, members in sorted(groups.items())
        ]
        rolled = len(groups) < len(series)
        note = (f" The {len(series)} teams are summed by budget node ({len(groups)} charts); every team is in the "
                "tables and in audit.json." if rolled else "")
    else:  # a flat tree with many teams: the largest allocations one by one, the rest together
        ranked = sorted(series, key=lambda t: (-sum(series[t][1]), -sum(series[t][0]), t))
        shown, rest = sorted(ranked[:top]), ranked[top:]
        panels = [(team, *series[team]) for team in shown]
        panels.append((f"others ({len(rest)} teams)",
                       [sum(series[t][0][i] for t in rest) for i in range(len(hours))],
                       [sum(series[t][1][i] for t in rest) for i in range(len(hours))]))
        note = (f" The {len(shown)} teams with the largest allocations are drawn one by one; the other {len(rest)} "
                "are summed in the last chart (every team is in the tables and in audit.json).")
    size = max(1, -(-len(hours) // MAX_POINTS))
    charts = []
    for k, (team, used, allocation) in enumerate(panels):
        colour = PALETTE[k % len(PALETTE)]
        charts.append(
            line_chart(
                [
                    (f"{team}: allocated GPU-hours run per hour", _binned(used, size), colour, True),
                    (f"{team}: allocation (GPU-hours per hour)", _binned(allocation, size), "#333", False),
                ],
                title=team,
                x_labels=(hours[0][:13] + "h", hours[-1][:13] + "h"),
                precision=0,
            )
        )
    binning = f" Each point is the mean of {size} hours." if size > 1 else ""
    legend = (
        '<p class="note">Filled: allocated GPU-hours the team ran each hour. Dashed: its allocation '
        f"(its share of the available GPU-hours).{binning}{note}</p>"
    )
    return legend + '<div class="grid">' + "".join(charts) + "</div>"


def _cluster_chart(data: dict[str, Any]) -> str:
    hourly = data["occupancy"]["hourly"]
    if not hourly:
        return ""
    return line_chart(
        [
            ("allocated", [r["allocated_gpu_hours"] for r in hourly], PALETTE[0], True),
            ("unallocated", [r["allocated_gpu_hours"] + r["unallocated_gpu_hours"] for r in hourly], PALETTE[1], False),
            ("capacity", [r["capacity_gpu_hours"] for r in hourly], "#333", False),
        ],
        width=1000,
        height=180,
        title="Cluster: allocated (filled), allocated + unallocated and capacity (dashed), GPU-hours per hour",
        x_labels=(hourly[0]["hour"][:13] + "h", hourly[-1]["hour"][:13] + "h"),
    )


def _wait_chart(data: dict[str, Any]) -> str:
    cdf = data["wait_by_size"]["cdf"]
    curves = {
        f"{size} GPU{'s' if size != '1' else ''}": (cdf["quantiles"], vals)
        for size, vals in cdf["wait_s"].items()
        if not size.startswith("debug")
    }
    for name in ("debug", "debug_allocated"):
        if name in cdf["wait_s"]:
            curves[name.replace("_", " ")] = (cdf["quantiles"], cdf["wait_s"][name])
    if not curves:
        return '<p class="note">No workload started in the period.</p>'
    return cdf_chart(curves, title="Share of workloads started within a wait, by size (first waits)")


TOP_DISCARD = 15  # bars in the discarded-work chart; the rest are summed into one


def _discard_chart(data: dict[str, Any], top: int = TOP_DISCARD) -> str:
    teams = [t for t in data["discarded_work"]["by_team"] if t["discarded_gpu_hours"]]
    if not teams:
        return '<p class="note">No work was discarded in the period.</p>'
    teams.sort(key=lambda t: (-t["discarded_gpu_hours"], t["budget"]))
    bars = [(t["budget"], t["lost_since_checkpoint_gpu_hours"], t["restart_gpu_hours"]) for t in teams[:top]]
    rest = teams[top:]
    title = "Discarded GPU-hours by team"
    if len(rest) > 1:
        bars.append((f"others ({len(rest)} teams)", sum(t["lost_since_checkpoint_gpu_hours"] for t in rest),
                     sum(t["restart_gpu_hours"] for t in rest)))
        title += f" (the {top} largest; all in the table)"
    elif rest:
        bars += [(t["budget"], t["lost_since_checkpoint_gpu_hours"], t["restart_gpu_hours"]) for t in rest]
    return bar_chart(bars, title=title, labels=("since last checkpoint", "restart time"))


def html(data: dict[str, Any], title: str = "gpuledger audit", *, fragment: bool = False) -> str:
    """Return the report as an HTML document, or as a fragment (style + body) to embed in another page."""
    t = tables(data)
    period = data["period"]
    anomalies = data["anomalies"]
    an_note = (
        f"{len(anomalies)} record(s) could not be taken at face value; each says whether the figures include it."
        if anomalies
        else "None: every record was consistent."
    )
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">Period {escape(period["start"] or "-")} to {escape(period["end"] or "-")} (UTC).</p>',
        _kpis(data),
        "<h2>Occupancy by team against its allocation</h2>",
        _cluster_chart(data),
        _occupancy_charts(data),
        _table(*t["occupancy"]),
        "<h2>Owed GPU-hours</h2>",
        '<p class="note">Owed each hour = min(share of available GPU-hours, demand); received = min(delivered, '
        "owed) hour by hour; ratio = received ÷ owed.</p>",
        _table(*t["owed_hours"]),
        "<h2>Queue wait by size</h2>",
        _wait_chart(data),
        _table(*t["wait_by_size"]),
        "<h2>Discarded work</h2>",
        _discard_chart(data),
        f'<p class="note">Restart time: {escape(data["discarded_work"]["restart_time_source"])}.</p>',
        _table(*t["discarded_work"]),
        "<h2>Anomalies</h2>",
        f'<p class="note">{escape(an_note)}</p>',
        _table(*t["anomalies"]) if anomalies else "",
        "<h2>Workloads</h2>",
        _table(*t["workloads"], limit=300),
    ]
    if fragment:
        return f'<div class="gpuledger-audit"><style>{_CSS}</style>{"".join(sections)}</div>'
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>\n"
    )


@overload
def render_html(source: dict[str, Any] | duckdb.DuckDBPyConnection, path: None = None, title: str = ...) -> str: ...


@overload
def render_html(source: dict[str, Any] | duckdb.DuckDBPyConnection, path: str | Path, title: str = ...) -> Path: ...


def render_html(
    source: dict[str, Any] | duckdb.DuckDBPyConnection, path: str | Path | None = None, title: str = "gpuledger audit"
) -> Path | str:
    """Write the audit (a dict, or a projected DuckDB connection) as a self-contained HTML file; return its path.

    Without a path, return an HTML fragment of the same report to embed in another page.
    """
    from queries.audit import collect, prepare

    if isinstance(source, duckdb.DuckDBPyConnection):
        has_params = source.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'params'").fetchone()
        if not has_params or not has_params[0]:
            prepare(source)
        data = collect(source)
    else:
        data = source
    if path is None:
        return html(data, title, fragment=True)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html(data, title), encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["html", "render_html"]
