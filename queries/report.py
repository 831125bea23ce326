"""Render an audit as one self-contained HTML page a manager reads in a minute: headline, charts, tables.

Inline SVG only (``queries.svg``): no script, no stylesheet or font fetched, so the file opens
anywhere, offline. ``compare_html`` puts several runs side by side, one column each, every row of
charts on one scale.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any, overload

import duckdb

from ledger.queries.svg import PALETTE, bar_chart, cdf_chart, cdf_range, line_chart, nice_max, ratio_bars
from ledger.queries.tables import (
    OWED_DEFINITION,
    SHORT,
    bound_phrase,
    causes_sentence,
    cell,
    header,
    leaf_noun,
    level_label,
    level_noun,
    levels_sentence,
    period_sentence,
    reported,
    short_teams,
    shortfall_sentence,
    tables,
    unnamed_levels_note,
)
from ledger.queries.timefmt import duration

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;color:#222;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:8px 0}
.sub{color:#555;margin:0 0 12px}.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.kpi{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:140px;flex:1}
.kpi b{display:block;font-size:20px}.kpi span{color:#555;font-size:12px}.kpi.bad b{color:#d62728}
.grid{display:grid;gap:8px;grid-template-columns:repeat(auto-fill,minmax(360px,1fr))}.grid>svg{width:100%;height:auto}
.cols{display:grid;gap:18px;grid-template-columns:repeat(var(--n),minmax(0,1fr))}
.cols>div{min-width:0}svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:6px 0 12px;font-size:12.5px}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}.cols th,.cols td{padding:3px 5px}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tr.short td{background:#fde8e8}
th{background:#f6f6f6}svg .t{font-size:12px;font-weight:600;fill:#333}svg .a{font-size:10px;fill:#444}
svg .g{stroke:#e4e4e4}.note{color:#555;font-size:12px}.def{background:#f6f8fc;border-left:3px solid #4269d0;
padding:6px 10px;margin:8px 0;font-size:13px}pre{background:#f6f6f6;padding:10px;overflow-x:auto;font-size:12px}
table.sweep{width:100%}table.sweep th{vertical-align:bottom;font-size:12px;font-weight:600}
td.setting{min-width:10em}td.best{font-weight:700;background:#e8f3ec}
.charts{display:grid;gap:16px;grid-template-columns:repeat(auto-fit,minmax(380px,1fr))}.charts>svg{width:100%;height:auto}
"""

WORST_CHARTS = 6  # teams drawn day by day: the worst of those under 95%
SHORT_BARS = 25  # teams drawn in the received / owed bars; a title says when more were short
TOP_DISCARD = 15  # bars in the discarded-work chart; the rest are summed into one
TABLE_ROWS = 200
# the detail tables (``ledger.queries.detail``) the report draws: attach them to the audit before rendering
REPORT_TABLES = ("teams_daily_owed", "cluster_hourly")


def _table(cols: list[str], rows: list[list[Any]], limit: int = TABLE_ROWS, short_col: str | None = None,
           total: int | None = None) -> str:
    """Return an HTML table, numbers right-aligned and readable; rows whose ``short_col`` is under 95% marked.

    ``total``: the table's full length where ``rows`` are its first rows only.
    """
    head = "".join(f"<th>{escape(header(c))}</th>" for c in cols)
    k = cols.index(short_col) if short_col in cols else None
    body = []
    for r in rows[:limit]:
        tds = "".join(
            f'<td class="n">{escape(cell(v, c))}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{escape(cell(v, c))}</td>"
            for v, c in zip(r, cols, strict=True)
        )
        short = k is not None and isinstance(r[k], float) and r[k] < SHORT
        body.append(f'<tr class="short">{tds}</tr>' if short else f"<tr>{tds}</tr>")
    total = max(len(rows), total or 0)
    more = (f'<p class="note">The first {limit:,} of {total:,} rows; all of them: <code>gpuledger audit SOURCE '
            "--format csv</code> (or json), and the run's audit/*.parquet.</p>" if total > limit else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _eviction(dw: dict[str, Any]) -> tuple[str, str]:
    """Return the eviction-ratio box; imported preemptions (sacct, Kueue) name no preemptor, so it has no ratio."""
    label = "eviction ratio (GPUs preempted per GPU started)"
    if dw["eviction_ratio"] is not None:
        return label, f"{dw['eviction_ratio']:.2f}"
    if dw["preemptions"]:
        return "eviction ratio (the records name no preemptor)", "not recorded"
    return label, "no preemptions"


BOUND_GAP = 0.10  # received / owed hour by hour is shown in red when this far below the hourly bound


def headline(data: dict[str, Any], most: int = 10, *, levels_note: bool = True) -> str:
    """Return the headline: received / owed hour by hour and per week with the hourly bound, each card labelled
    with its level and time scale; the definition; the other key figures; the nodes short of what they were owed.

    ``levels_note``: say here that the budget tree names no levels, if so (a page of several runs says it once).
    """
    owed, dw = data["owed_hours"], data["discarded_work"]
    debug = data["wait_by_size"].get("debug_allocated") or {}
    short = short_teams(data)
    ratio, bound = owed["overall_ratio"], (owed.get("hourly_bound") or {}).get("ratio")
    week = next((r["ratio"] for r in owed.get("received_by_period", []) if r["period"] == "week"), None)
    level, noun, nodes = level_label(owed.get("level")), level_noun(owed.get("level")), level_noun(
        owed.get("level"), many=True)
    lv = reported(data)
    short_week = None if lv is None else lv["nodes_owed"] - lv["nodes_at_95_week"]
    rows_of_cards = [
        [(f"received / owed GPU-hours hour by hour, per {level}", _pct(ratio),
          ratio is not None and bound is not None and ratio < bound - BOUND_GAP),
         (f"received / owed GPU-hours over each week, per {level}", _pct(week), week is not None and week < SHORT),
         (f"at most possible hour by hour this month (the hourly bound), per {noun}", _pct(bound), False)],
        [(f"{nodes} under {SHORT:.0%} of owed hour by hour", f"{len(short)} of {owed['teams_owed']}", False),
         (f"{nodes} under {SHORT:.0%} of owed over their weeks",
          "-" if short_week is None else f"{short_week} of {owed['teams_owed']}", bool(short_week))],
        [("debug runs: wait p90, the whole cluster over the period",
          "no debug runs" if debug.get("p90_s") is None else duration(debug["p90_s"]), False),
         ("discarded by preemption, the whole cluster over the period",
          f"{dw['discarded_gpu_hours']:,.0f} GPU-h ({_pct(dw['discarded_share'])})", False),
         (*_eviction(dw), False)],
    ]
    kpis = "".join(
        "<div class='kpis'>" + "".join(
            f"<div class='kpi{' bad' if bad else ''}'><b>{escape(v)}</b><span>{escape(k)}</span></div>"
            for k, v, bad in cards) + "</div>"
        for cards in rows_of_cards)
    phrase = bound_phrase(owed.get("hourly_bound"))
    judged = (f" Per {escape(level)}, hour by hour: {_pct(ratio)} received; {escape(phrase)}; red when more than "
              f"{BOUND_GAP * 100:.0f} points below it. Over each week, red under {SHORT:.0%}." if phrase else "")
    definition = (f"<p class='def'>{escape(OWED_DEFINITION)} GPU-hours a team ran beyond that, on idle GPUs, "
                  "count as delivered, not owed: a team can be delivered many times its owed hours and still be "
                  f"short in the hours it needed its share.{judged}</p>")
    note = unnamed_levels_note(data) if levels_note else ""
    for sentence in (note, shortfall_sentence(data), period_sentence(data), levels_sentence(data),
                     causes_sentence(data)):
        if sentence:
            definition += f"<p class='def'>{_code(sentence)}</p>"
    rows = [[t["budget"], t["ratio"], t.get("ratio_week"), t["owed_gpu_hours"], t["delivered_gpu_hours"],
             t.get("wait_p90_s"), t.get("discarded_gpu_hours")] for t in short]
    cols = [noun, "hour_ratio", "week_ratio", "owed_gpu_hours", "delivered_gpu_hours", "first_wait_p90_s",
            "discarded_gpu_hours"]
    table = (f"<h3>{escape(nodes[:1].upper() + nodes[1:])} under {SHORT:.0%} of what they were owed hour by hour, "
             f"per {escape(level)}, worst first</h3>"
             + _table(cols, rows, limit=most, short_col="week_ratio")
             + f"<p class='note'>Highlighted: under {SHORT:.0%} over its weeks too. Each row counts the work of all "
             f"the {escape(noun)}'s teams: the p90 of their workloads' first waits, the GPU-hours their preemptions "
             "discarded.</p>" if short
             else f"<p class='note'>Every {escape(noun)} received at least {SHORT:.0%} of what it was owed hour by "
             "hour.</p>")
    return f"{kpis}{definition}{table}"


def _daily(data: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, list[float]]]]:
    """Return the days and, per team, its owed / received / delivered GPU-hours day by day."""
    rows = data["owed_hours"].get("by_team_daily", [])
    days = sorted({r["day"] for r in rows})
    index = {d: i for i, d in enumerate(days)}
    out: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        team = out.setdefault(r["budget"], {k: [0.0] * len(days) for k in ("owed", "received", "delivered")})
        for k in ("owed", "received", "delivered"):
            team[k][index[r["day"]]] = r[f"{k}_gpu_hours"]
    return days, out


def worst_teams(runs: list[dict[str, Any]], most: int = WORST_CHARTS) -> list[str]:
    """Return the teams to draw day by day: the worst short teams of each run in turn, at most ``most``."""
    lists = [[t["budget"] for t in short_teams(r)] for r in runs]
    chosen: list[str] = []
    for rank in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if rank < len(x) and x[rank] not in chosen and len(chosen) < most:
                chosen.append(x[rank])
    return chosen


def team_scales(runs: list[dict[str, Any]], teams: list[str]) -> dict[str, float]:
    """Return one y maximum per team over every run, so a team's charts side by side share a scale.

    The scale is set by what the team was owed: delivered hours on borrowed GPUs can be ten times
    that and would flatten the shortfall the chart is for (they are clipped at the top).
    """
    top: dict[str, float] = dict.fromkeys(teams, 0.0)
    for r in runs:
        _, series = _daily(r)
        for t in teams:
            if t in series:
                top[t] = max(top[t], *series[t]["owed"], *series[t]["received"])
    return {t: nice_max(v * 1.1) for t, v in top.items()}


def owed_section(data: dict[str, Any], teams: list[str], scales: dict[str, float]) -> str:
    """Return the owed-against-delivered charts: every short team's ratio, then the worst day by day."""
    short = short_teams(data)
    nodes = level_noun(data["owed_hours"].get("level"), many=True)
    bars = ratio_bars(
        [(t["budget"], t["ratio"], f"of {t['owed_gpu_hours']:,.0f} GPU-h owed") for t in short[:SHORT_BARS]],
        title=(f"Received / owed hour by hour, {nodes} under {SHORT:.0%} (worst first)" if len(short) <= SHORT_BARS
               else f"Received / owed hour by hour: the worst {SHORT_BARS} of the {len(short)} {nodes} under "
               f"{SHORT:.0%} (all in the table)"),
    ) if short else ""
    days, series = _daily(data)
    charts = []
    for team in teams:
        s = series.get(team)
        if s is None or not days:
            continue
        ratio = next((t["ratio"] for t in data["owed_hours"]["teams"] if t["budget"] == team), None)
        charts.append(line_chart(
            [("owed", s["owed"], "#222", "dash"), ("received (within owed)", s["received"], PALETTE[0], "fill"),
             ("delivered (all it ran)", s["delivered"], PALETTE[1], "line")],
            days, title=f"{team}: {_pct(ratio)} of owed hour by hour", y_max=scales.get(team),
            y_label="GPU-hours a day",
            width=420, height=190,
        ))
    note = (f'<p class="note">Each chart: a {escape(level_noun(data["owed_hours"].get("level")))}\'s owed GPU-hours '
            "a day (dashed), what it received of them hour by hour, summed over the day (filled), and all it ran "
            "(orange line, clipped at the top of a scale set by what it was owed). A gap between dashed and filled "
            "is its shortfall.</p>")
    return bars + (note + '<div class="grid">' + "".join(charts) + "</div>" if charts else "")


def cluster_chart(data: dict[str, Any], y_max: float | None = None, width: int = 1000) -> str:
    """Return the cluster's use hour by hour against its capacity."""
    hourly = data["occupancy"]["hourly"]
    if not hourly:
        return '<p class="note">No hour in the period.</p>'
    capacity = [r["capacity_gpu_hours"] - r["down_gpu_hours"] for r in hourly]
    return line_chart(
        [
            ("allocated (charged to budgets)", [r["allocated_gpu_hours"] for r in hourly], PALETTE[0], "fill"),
            ("+ unallocated (free fill)", [r["allocated_gpu_hours"] + r["unallocated_gpu_hours"] for r in hourly],
             PALETTE[1], "line"),
            ("capacity up", capacity, "#222", "dash"),
        ],
        [r["hour"] for r in hourly], width=width, height=220, y_label="GPUs (GPU-hours per hour)",
        title="Cluster: GPUs in use each hour against the capacity up",
        y_max=y_max or max(r["capacity_gpu_hours"] for r in hourly),
    )


def _wait_curves(data: dict[str, Any]) -> dict[str, tuple[list[float], list[float]]]:
    cdf = data["wait_by_size"]["cdf"]
    curves = {
        f"{size} GPU{'s' if size != '1' else ''}": (cdf["quantiles"], vals)
        for size, vals in cdf["wait_s"].items()
        if not size.startswith("debug")
    }
    if "debug_allocated" in cdf["wait_s"]:
        curves["debug (protected)"] = (cdf["quantiles"], cdf["wait_s"]["debug_allocated"])
    return curves


def wait_chart(data: dict[str, Any], x_range: tuple[float, float] | None = None) -> str:
    """Return the cumulative first-wait chart by job size."""
    curves = _wait_curves(data)
    if not curves:
        return '<p class="note">No workload started in the period.</p>'
    return cdf_chart(curves, title="Share of workloads started within a wait, by size", x_range=x_range)


def _discard_bars(data: dict[str, Any], top: int = TOP_DISCARD) -> tuple[list[tuple[str, float, float]], str]:
    """Return the bars of the discard chart (the ``top`` teams, the rest summed) and its title."""
    teams = [t for t in data["discarded_work"]["by_team"] if t["discarded_gpu_hours"]]
    teams.sort(key=lambda t: (-t["discarded_gpu_hours"], t["budget"]))
    bars = [(t["budget"], t["lost_since_checkpoint_gpu_hours"], t["restart_gpu_hours"]) for t in teams[:top]]
    rest = teams[top:]
    title = f"Discarded GPU-hours by {leaf_noun(data)} over the period"
    if len(rest) > 1:
        bars.append((f"others ({len(rest)} {leaf_noun(data, many=True)})",
                     sum(t["lost_since_checkpoint_gpu_hours"] for t in rest),
                     sum(t["restart_gpu_hours"] for t in rest)))
        title += f" (the {top} largest; all in the table)"
    elif rest:
        bars += [(t["budget"], t["lost_since_checkpoint_gpu_hours"], t["restart_gpu_hours"]) for t in rest]
    return bars, title


def discard_chart(data: dict[str, Any], top: int = TOP_DISCARD, scale: float | None = None) -> str:
    """Return the discarded GPU-hours of the teams that lost most, the rest summed."""
    bars, title = _discard_bars(data, top)
    if not bars:
        return '<p class="note">No work was discarded in the period.</p>'
    return bar_chart(bars, title=title, labels=("since last checkpoint", "restart time"), top=scale)


def _discard_top(data: dict[str, Any]) -> float:
    return max((a + b for _, a, b in _discard_bars(data)[0]), default=0.0)


def html(data: dict[str, Any], title: str = "gpuledger audit", *, fragment: bool = False) -> str:
    """Return the report as an HTML document, or as a fragment (style + body) to embed in another page."""
    t = tables(data)
    period = data["period"]
    anomalies = data["anomalies"]
    teams = worst_teams([data])
    an_note = (
        f"{len(anomalies)} record(s) could not be taken at face value; each says whether the figures include it."
        if anomalies
        else "None: every record was consistent."
    )
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">Period {escape(period["start"] or "-")} to {escape(period["end"] or "-")} (UTC).</p>',
        headline(data),
        "<h2>Owed against delivered</h2>",
        owed_section(data, teams, team_scales([data], teams)),
        "<h2>Cluster occupancy</h2>",
        cluster_chart(data),
        _table(*t["occupancy"]),
        "<h2>Queue waits</h2>",
        wait_chart(data),
        f"<h3>First waits by {escape(leaf_noun(data))} over the period, longest p90 first</h3>",
        _table(*t["wait_by_team"], limit=40),
        "<h3>By size, the whole cluster over the period</h3>",
        _table(*t["wait_by_size"]),
        "<h2>Discarded work</h2>",
        discard_chart(data),
        f'<p class="note">Restart time: {escape(data["discarded_work"]["restart_time_source"])}.</p>',
        _table(*t["discarded_work"], limit=40),
        "<h2>Owed GPU-hours at every level of the budget tree</h2>",
        '<p class="note">A node\'s hours sum its teams\' shares, demand and delivered GPU-hours before owed and '
        "received are taken; * marks the team level. Day and week: owed and delivered summed over the UTC day or "
        "week before the smaller is taken. Hour bound: at most this received / owed hour by hour was possible "
        "for any schedule, given the gangs and protected windows (docs/audits.md, the hourly bound).</p>",
        _table(*t["owed_levels"], short_col="hour_ratio"),
        "<h3>Where each level's shortfall went, hour by hour (GPU-hours)</h3>",
        _table(*t["owed_shortfall_by_cause"]),
        f"<h2>Owed GPU-hours, every node per {escape(level_label(data['owed_hours'].get('level')))}, "
        "worst first</h2>",
        _table(*t["owed_hours"], short_col="hour_ratio"),
        "<h2>Anomalies</h2>",
        f'<p class="note">{escape(an_note)}</p>',
        _table(*t["anomalies"]) if anomalies else "",
        "<h2>Workloads</h2>",
        _table(*t["workloads"], limit=100, total=data.get("tables", {}).get("workloads", {}).get("rows")),
    ]
    if fragment:
        return f'<div class="gpuledger-audit"><style>{_CSS}</style>{"".join(sections)}</div>'
    return _page(title, "".join(sections))


def _code(text: str) -> str:
    """Return plain text as HTML, its `backquoted` words set as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")


def compare_html(labels: list[str], runs: list[dict[str, Any]], title: str = "gpuledger compare",
                 intro: str = "") -> str:
    """Return one self-contained page with every run side by side, one column per run, each row on one scale."""
    from ledger.queries.sidebyside import table

    audits = [r["audit"] for r in runs]
    teams = worst_teams(audits)
    scales = team_scales(audits, teams)
    cluster_top = max(max((h["capacity_gpu_hours"] for h in a["occupancy"]["hourly"]), default=0.0) for a in audits)
    ranges = [cdf_range(_wait_curves(a)) for a in audits if _wait_curves(a)]
    wait_range = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
    discard_top = nice_max(max(_discard_top(a) for a in audits)) if audits else None

    def row(heading: str, cells: list[str], note: str = "") -> str:
        tds = "".join(f"<div><h3>{escape(label)}</h3>{c}</div>" for label, c in zip(labels, cells, strict=True))
        return f"<h2>{escape(heading)}</h2>{note}<div class='cols' style='--n:{len(runs)}'>{tds}</div>"

    period = audits[0]["period"] if audits else {"start": None, "end": None}
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{len(runs)} runs of the same inputs, one column each; period {escape(period["start"] or "-")}'
        f' to {escape(period["end"] or "-")} (UTC). Charts in a row share their scale.</p>',
        "".join(f"<p>{_code(part)}</p>" for part in intro.split("\n\n") if part.strip()),
        "".join(f"<p class='def'>{_code(n)}</p>" for n in {unnamed_levels_note(a) for a in audits} if n),
        row("Headline", [headline(a, levels_note=False) for a in audits]),
        row("Owed against delivered", [owed_section(a, teams, scales) for a in audits]),
        row("Cluster occupancy", [cluster_chart(a, cluster_top, width=560 if len(audits) > 1 else 1000)
                                  for a in audits]),
        row("Queue waits", [wait_chart(a, wait_range) for a in audits]),
        row("Discarded work", [discard_chart(a, scale=discard_top) for a in audits]),
        "<h2>Every measure side by side</h2>",
        f"<pre>{escape(table(labels, runs, levels_note=False))}</pre>",
        '<p class="note">Every run\'s full tables are in its own audit.json and audit/*.parquet (and '
        "<code>gpuledger audit RUN_DIR --format html</code>).</p>",
    ]
    return _page(title, "".join(body))


def sweep_page(labels: list[str], runs: list[dict[str, Any]], title: str = "gpuledger compare",
               notes: list[str] | None = None, same_as: list[str | None] | None = None) -> str:
    """Return the sweep page (three settings or more): one row per setting, best values marked, trade-off charts."""
    from ledger.queries.sweep import sweep_html

    return sweep_html(labels, runs, title=title, page=_page, notes=notes or [], same_as=same_as)


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
    from ledger.queries.audit import collect, prepare
    from ledger.queries.detail import Details, attach

    if isinstance(source, duckdb.DuckDBPyConnection):
        has_params = source.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'params'").fetchone()
        if not has_params or not has_params[0]:
            prepare(source)
        data = attach(collect(source), Details.of(source), REPORT_TABLES)
    else:
        data = source
    if path is None:
        return html(data, title, fragment=True)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html(data, title), encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["REPORT_TABLES", "compare_html", "headline", "html", "render_html", "sweep_page"]
