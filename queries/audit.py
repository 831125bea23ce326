"""Run the audit SQL over a projected log and assemble the ``audit.json`` dictionary."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import orjson

from ledger.errors import InputError
from ledger.queries import snapshot
from ledger.queries.detail import FOLDER, Details, attach, counts, write_tables
from ledger.queries.projection import build_intervals, project, register, sql_text
from ledger.queries.source import open_records
from ledger.queries.timefmt import iso

AUDITS = ("owed_hours", "owed_levels", "discarded_work", "wait_by_size", "occupancy", "fairness", "hour_bound",
          "level_costs")
WEEK_S = 7 * 86_400
_TIME_TABLES = (
    "ev_submitted",
    "ev_started",
    "ev_checkpoint",
    "ev_preempted",
    "ev_requeued",
    "ev_completed",
    "ev_node",
    "ev_allocation",
    "ev_refused",
    "ev_health",
    "ev_capacity",
    "ev_decision",
)

Source = str | Path | Iterable[Any] | duckdb.DuckDBPyConnection


def connect(source: Source, *, decisions: bool = True) -> duckdb.DuckDBPyConnection:
    """Return a DuckDB connection holding the projected log of ``source`` (reused if already one).

    ``decisions=False`` keeps only the times of SchedulingDecision events (the audits need no more).
    """
    if isinstance(source, duckdb.DuckDBPyConnection):
        return source
    if isinstance(source, str | Path) and not decisions and (Path(source) / "events").is_dir():
        kept = snapshot.load(Path(source), decisions=decisions)  # the run's projection, if it is still the log's
        if kept is not None:
            return register(kept)
    return project(open_records(source), decisions=decisions)


def rows(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Return the result of ``query`` (its ``$name`` parameters bound from ``params``) as a list of dicts."""
    cur = con.execute(query, params) if params else con.execute(query)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def prepare(
    con: duckdb.DuckDBPyConnection, since_us: int | None = None, until_us: int | None = None, window_s: int = WEEK_S,
    *, within_log: bool = False, level: str | int | None = None,
) -> None:
    """Set the audit period and build the shared facts and every audit table in ``con``.

    ``within_log`` refuses a period that starts after the log's last event or ends before its first
    (what a person asking for one almost always mistyped; the audits themselves are defined there too).
    ``level``: the level of the budget tree the owed-hours audit reports, by name or depth (0 = the top);
    None: the team level the log's tree names, else the deepest.
    """
    # One thread: DuckDB sums floating-point shares in whatever order its threads finish, so on
    # several threads the last bit of a team's hourly share could differ between two audits of
    # one log, and a figure rounded at a tie could print differently. One thread sums in table
    # order, the same every time, and is no slower here (the work is a few short scans).
    con.execute("SET threads TO 1")
    union = " UNION ALL ".join(f'SELECT min("time") AS lo, max("time") AS hi FROM {t}' for t in _TIME_TABLES)
    lo, hi = con.execute(f"SELECT min(lo), max(hi) FROM ({union})").fetchone() or (None, None)
    # A period outside the log would print an audit of zeros as if nothing had been owed: refuse it.
    if within_log and since_us is not None and hi is not None and since_us > hi:
        raise InputError(f"--since {iso(since_us)} is after the log's last event ({iso(hi)})")
    if within_log and until_us is not None and lo is not None and until_us <= lo:
        raise InputError(f"--until {iso(until_us)} is not after the log's first event ({iso(lo)})")
    t0 = since_us if since_us is not None else (lo if lo is not None else 0)
    t1 = until_us if until_us is not None else (hi if hi is not None else t0)
    t1 = max(t1, t0)
    # When the period ends at the log's last event, that event belongs inside it.
    pt1 = t1 if until_us is not None else t1 + 1
    con.execute(
        "CREATE OR REPLACE TEMP TABLE params AS SELECT ?::BIGINT AS t0, ?::BIGINT AS t1, ?::BIGINT AS pt1, "
        "?::BIGINT AS window_us",
        [t0, t1, pt1, window_s * 1_000_000],
    )
    built = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'run_iv'").fetchone()
    if not built or not built[0]:
        build_intervals(con)  # ev_* tables registered by hand rather than by project()
    con.execute(sql_text("derive"))
    con.execute("CREATE OR REPLACE TEMP TABLE level_pick AS SELECT ?::VARCHAR AS pick",
                [None if level is None else str(level)])
    for name in AUDITS:
        con.execute(sql_text(name))
    if level is not None:
        _check_level(con, level)


def _check_level(con: duckdb.DuckDBPyConnection, level: str | int) -> None:
    """Refuse a level the log's budget tree does not have, naming the levels it has."""
    got = con.execute("SELECT depth FROM level_chosen").fetchone()
    if got is not None and got[0] is not None:
        return
    known = [_level_label(r["depth"], r["name"]) for r in rows(con, "SELECT * FROM tree_levels ORDER BY depth")]
    has = ", ".join(known) if known else "none: the log defines no budget tree"
    raise InputError(f"--level {level}: the budget tree has no such level (levels by depth: {has})")


def _level_label(depth: int, name: str | None) -> str:
    return f"{depth} ({name})" if name else str(depth)


def _team(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: row[k]
        for k in (
            "budget",
            "owed_gpu_hours",
            "delivered_gpu_hours",
            "received_gpu_hours",
            "ratio",
            "demand_gpu_hours",
            "share_gpu_hours",
            "ratio_day",
            "ratio_week",
        )
    }


CAUSES = ("wide_runs", "idle_gpus", "free_fill", "above_share", "unexplained")


def levels(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Return received / owed at every level of the budget tree, top first (needs ``prepare``).

    Per level: its name and depth, whether it is the team level and whether the audit reports it, its
    nodes, the sums and ratios over hours, days and weeks, the hourly bound (the most of its owed hours
    any schedule could give it hour by hour: hour_bound.sql), the worst node by hour and by week, how
    many nodes reach 95 %, and the shortfall split by cause (owed_levels.sql says how).
    """
    summary = rows(con, """
        SELECT l.depth, l.name, l.team, l.depth IS NOT DISTINCT FROM (SELECT depth FROM level_chosen) AS reported,
               count(n.budget) AS nodes, count(n.ratio) AS nodes_owed,
               coalesce(sum(n.owed_gpu_hours), 0) AS owed, coalesce(sum(n.delivered_gpu_hours), 0) AS delivered,
               coalesce(sum(n.received_gpu_hours), 0) AS received,
               coalesce(sum(n.received_day_gpu_hours), 0) AS received_day,
               coalesce(sum(n.received_week_gpu_hours), 0) AS received_week,
               count(*) FILTER (WHERE n.ratio >= 0.95) AS at_95,
               count(*) FILTER (WHERE n.ratio_week >= 0.95) AS at_95_week,
               -- rounded so that two nodes on one ratio (float sums) tie on the name, not on an ulp
               arg_min(n.budget, (round(n.ratio, 9), n.budget)) AS worst, min(round(n.ratio, 9)) AS worst_key,
               arg_min(n.budget, (round(n.ratio_week, 9), n.budget)) AS worst_week,
               any_value(c.wide_runs_gpu_hours) AS wide_runs, any_value(c.idle_gpus_gpu_hours) AS idle_gpus,
               any_value(c.free_fill_gpu_hours) AS free_fill, any_value(c.above_share_gpu_hours) AS above_share,
               any_value(c.unexplained_gpu_hours) AS unexplained
        FROM tree_levels l LEFT JOIN level_nodes n USING (depth) LEFT JOIN level_causes c USING (depth)
        GROUP BY l.depth, l.name, l.team ORDER BY l.depth
    """)
    ratios = {(r["depth"], r["budget"]): r for r in rows(
        con, "SELECT depth, budget, ratio, ratio_week FROM level_nodes WHERE ratio IS NOT NULL")}
    bounds = {r.pop("depth"): r for r in rows(con, "SELECT * EXCLUDE (owed_gpu_hours) FROM level_bound")}
    out = []
    for r in summary:
        owed = r["owed"]
        worst = ratios.get((r["depth"], r["worst"]))
        worst_week = ratios.get((r["depth"], r["worst_week"]))
        bound = bounds.get(r["depth"])
        out.append({
            "depth": r["depth"],
            "name": r["name"],
            "team_level": r["team"],
            "reported": r["reported"],
            "nodes": r["nodes"],
            "nodes_owed": r["nodes_owed"],
            "owed_gpu_hours": owed,
            "delivered_gpu_hours": r["delivered"],
            "received_gpu_hours": r["received"],
            "ratio": r["received"] / owed if owed > 0 else None,
            "ratio_day": r["received_day"] / owed if owed > 0 else None,
            "ratio_week": r["received_week"] / owed if owed > 0 else None,
            "hourly_bound": None if bound is None or bound["ratio"] is None else bound,
            "nodes_at_95": r["at_95"],
            "nodes_at_95_week": r["at_95_week"],
            "worst_node": None if worst is None else {"budget": worst["budget"], "ratio": worst["ratio"]},
            "worst_node_week": None if worst_week is None else {"budget": worst_week["budget"],
                                                                "ratio_week": worst_week["ratio_week"]},
            "shortfall_by_cause": [
                {"cause": c, "short_gpu_hours": r[c] or 0.0,
                 "share_of_owed": (r[c] or 0.0) / owed if owed > 0 else None} for c in CAUSES
            ],
        })
    return out


def owed_hours(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Return the owed-hours audit (needs ``prepare``).

    Each node of the reported level (``teams``) also carries what its work paid, recounted at that level
    (level_costs.sql): the p90 of its first waits, its preemptions and the GPU-hours they discarded.
    """
    costs = {r.pop("budget"): r for r in rows(
        con, "SELECT budget, wait_p90_s, preemptions, discarded_gpu_hours FROM level_costs")}
    teams = [_team(r) | costs.get(r["budget"], {"wait_p90_s": None, "preemptions": 0, "discarded_gpu_hours": 0.0})
             for r in rows(con, "SELECT * FROM owed_teams ORDER BY budget")]
    every = levels(con)
    reported = next((lv for lv in every if lv["reported"]), None)
    owed = sum(t["owed_gpu_hours"] for t in teams)
    received = sum(t["received_gpu_hours"] for t in teams)
    rated = [t for t in teams if t["ratio"] is not None]
    # Rounded so that two teams on one ratio (computed by float sums) tie on the name, not on an ulp.
    worst = min(rated, key=lambda t: (round(t["ratio"], 9), t["budget"]), default=None)
    return {
        "overall_ratio": received / owed if owed > 0 else None,
        "owed_gpu_hours": owed,
        "delivered_gpu_hours": sum(t["delivered_gpu_hours"] for t in teams),
        "received_gpu_hours": received,
        "teams_at_95": sum(1 for t in rated if t["ratio"] >= 0.95),
        "teams_owed": len(rated),
        "worst_team": None if worst is None else {"budget": worst["budget"], "ratio": worst["ratio"]},
        "level": None if reported is None else {k: reported[k] for k in ("depth", "name", "team_level")},
        "hourly_bound": None if reported is None else reported["hourly_bound"],
        "levels": every,
        "shortfall_by_cause": [] if reported is None else reported["shortfall_by_cause"],
        "teams": teams,
        "shortfall_by_standing": _shortfall_by_standing(con, owed),
        "received_by_period": _received_by_period(con, owed),
    }


# Longer periods over which an hour over-served makes up for another of the same team: UTC days, and
# weeks from Monday 00:00 UTC (the epoch fell on a Thursday, three days after a Monday).
PERIODS: dict[str, str] = {
    "hour": "hour_us",
    "day": "hour_us // 86400000000",
    "week": "(hour_us + 259200000000) // 604800000000",
}


def _received_by_period(con: duckdb.DuckDBPyConnection, owed: float) -> list[dict[str, Any]]:
    """Return received / owed when each team's owed and delivered GPU-hours are summed over an hour, a day, a week.

    Received over a period is min(owed, delivered) of the period's sums: a day whose hours each fell
    short or ran over by turns receives more than the sum of its hours. The hour row is the audit's
    own figure; the longer ones say how much of its shortfall is unevenness within a day or week.
    """
    out = []
    for period, bucket in PERIODS.items():
        got = con.execute(
            f"SELECT sum(least(o, d)) / 3.6e9 FROM (SELECT budget, {bucket} AS b, sum(owed_gpu_us) AS o, "
            "sum(delivered_gpu_us) AS d FROM owed_team_hours GROUP BY ALL)"
        ).fetchone()
        received = float(got[0]) if got and got[0] is not None else 0.0
        out.append({"period": period, "received_gpu_hours": received, "ratio": received / owed if owed > 0 else None})
    return out


STANDINGS = ("below_80", "80_to_100", "100_to_150", "above_150", "no_history")


def _shortfall_by_standing(con: duckdb.DuckDBPyConnection, owed: float) -> list[dict[str, Any]]:
    """Return the owed shortfall by the team's standing over the window before each hour (every standing listed)."""
    got = {r["standing"]: r for r in rows(con, "SELECT * FROM owed_standing")}
    out = []
    for name in STANDINGS:
        r = got.get(name, {})
        short = r.get("short_gpu_hours") or 0.0
        out.append({
            "standing": name,
            "team_hours": r.get("team_hours") or 0,
            "owed_gpu_hours": r.get("owed_gpu_hours") or 0.0,
            "short_gpu_hours": short,
            "share_of_owed": short / owed if owed > 0 else None,
        })
    return out


_DISCARD_KEYS = (
    "preemptions",
    "discarded_gpu_hours",
    "discarded_share",
    "median_restart_s",
    "preemptions_per_workload_week",
    "delivered_gpu_hours",
    "lost_since_checkpoint_gpu_hours",
    "restart_gpu_hours",
    "workload_weeks",
)


def discarded_work(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Return the discarded-work audit (needs ``prepare``)."""
    summary = rows(con, "SELECT * FROM discarded_summary")
    by = {(r["grp"], r["key"]): {k: r[k] for k in _DISCARD_KEYS} for r in summary}
    empty = dict.fromkeys(_DISCARD_KEYS, None) | {"preemptions": 0, "discarded_gpu_hours": 0.0}
    ev = rows(con, "SELECT * FROM eviction")[0]
    out = dict(by.get(("all", "all"), empty))
    out["restart_time_source"] = "the restart time each workload declared when submitted (the log records no resume)"
    out["eviction_ratio"] = ev["gpus_preempted"] / ev["gpus_started"] if ev["gpus_started"] else None
    out["gpus_preempted"] = int(ev["gpus_preempted"])
    out["gpus_started_by_preemption"] = int(ev["gpus_started"])
    out["by_tier"] = {tier: by.get(("tier", tier), empty) for tier in ("allocated", "unallocated")}
    out["by_team"] = [{"budget": key} | vals for (grp, key), vals in sorted(by.items()) if grp == "team"]
    return out


_WAIT_KEYS = ("size", "jobs", "mean_s", "p50_s", "p90_s", "p99_s", "max_s")
_DEBUG_BLOCKS = ("debug", "debug_allocated")


def wait_by_size(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Return the wait-by-size audit (needs ``prepare``)."""
    stats = rows(con, "SELECT * FROM wait_stats ORDER BY wait_kind, ord")

    def block(kind: str) -> dict[str, Any]:
        everything = [r for r in stats if r["wait_kind"] == kind and r["tier"] == "all"]
        mine = [{k: r[k] for k in _WAIT_KEYS} for r in everything]
        special = {r["size"]: r for r in mine if r["size"] in _DEBUG_BLOCKS}
        allocated = [
            {k: r[k] for k in _WAIT_KEYS} for r in stats if r["wait_kind"] == kind and r["tier"] == "allocated"
        ]
        return {"buckets": [r for r in mine if r["size"] not in _DEBUG_BLOCKS], **special,
                "buckets_allocated": allocated}

    first = block("first")
    cdf = {r["size"]: r["cdf_s"] for r in stats if r["wait_kind"] == "first" and r["tier"] == "all" and r["jobs"]}
    return {**first, "requeue": block("requeue"), "cdf": {"quantiles": [i / 40 for i in range(41)], "wait_s": cdf}}


def occupancy(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Return the occupancy audit: the period's totals and each team's (needs ``prepare``).

    The hour-by-hour rows are detail tables (``cluster_hourly``, ``teams_hourly``; ``ledger.queries.detail``).
    """
    out = rows(con, "SELECT * FROM occupancy_totals")[0]
    out["by_team"] = rows(
        con,
        "SELECT budget, sum(allocated_gpu_hours) AS allocated_gpu_hours, "
        "sum(unallocated_gpu_hours) AS unallocated_gpu_hours, sum(allocation_gpu_hours) AS allocation_gpu_hours "
        "FROM occupancy_team_hourly GROUP BY budget ORDER BY budget",
    )
    return out


def fairness(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Return each team's usage / allocation over the period and over the window hour by hour (needs ``prepare``).

    ``window_ratio_*``: the lowest, median and last of its window ratios (hours with an allocation);
    ``hours_below_80``: the hours it stood under 80% of its share over the window. The hour-by-hour
    rows are the detail table ``fairness_hourly``.
    """
    window_us = con.execute("SELECT window_us FROM params").fetchone()
    return {
        "window_s": (window_us[0] if window_us else 0) // 1_000_000,
        "by_team": rows(
            con,
            "SELECT budget, sum(usage_gpu_hours) AS usage_gpu_hours, "
            "sum(allocation_gpu_hours) AS allocation_gpu_hours, CASE WHEN sum(allocation_gpu_hours) > 0 "
            "THEN sum(usage_gpu_hours) / sum(allocation_gpu_hours) END AS ratio, "
            "min(window_ratio) AS window_ratio_min, median(window_ratio) AS window_ratio_median, "
            "arg_max(window_ratio, hour_us) FILTER (WHERE window_ratio IS NOT NULL) AS window_ratio_last, "
            "count(*) FILTER (WHERE window_ratio < 0.8) AS hours_below_80 "
            "FROM fairness_hourly GROUP BY budget ORDER BY budget",
        ),
    }


def anomalies(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Return every anomaly with its reason and whether the figures include it (needs ``prepare``)."""
    return [
        {
            "kind": r["kind"],
            "event_id": r["event_id"],
            "workload_id": r["workload_id"],
            "time": iso(r["time_us"]),
            "reason": r["reason"],
            "included": r["included"],
            "effect": r["effect"],
        }
        for r in rows(con, "SELECT * FROM anomalies ORDER BY seq, kind")
    ]


WORKLOADS_LISTED = 100  # workloads audit.json lists (as many as the HTML report shows); all: detail table ``workloads``


def workloads(con: duckdb.DuckDBPyConnection, limit: int | None = WORKLOADS_LISTED) -> list[dict[str, Any]]:
    """Return the first ``limit`` submitted workloads (None: all): first start, end, preemptions (needs ``prepare``)."""
    return Details.of(con).rows("workloads", limit=limit)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Return the ``q`` quantile by linear interpolation (DuckDB's quantile_cont)."""
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def wait_by_team(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Return each team's first waits (submission to first start) in the period, worst p90 first (needs ``prepare``).

    As in ``wait_by_size``, a wait counts when the start that ends it falls in the period (``started``).
    ``waiting``: submitted before the period's end and neither started nor ended by then (its wait so far is
    not in the figures, which would otherwise depend on where the period was cut). ``cancelled``: ended in
    the period without ever starting (it left the queue). ``workloads`` is the sum of the three.
    """
    per = rows(
        con,
        """
        WITH w AS (
            SELECT b.path AS budget, f.submit_us, f.first_start_us, f.end_us, p.t0, p.pt1
            FROM workload_iv f JOIN budgets b USING (bid), params p
        )
        SELECT budget,
               count(*) FILTER (WHERE first_start_us >= t0 AND first_start_us < pt1) AS started,
               count(*) FILTER (WHERE submit_us < pt1 AND (first_start_us IS NULL OR first_start_us >= pt1)
                                AND (end_us IS NULL OR end_us >= pt1)) AS waiting,
               count(*) FILTER (WHERE first_start_us IS NULL AND end_us >= t0 AND end_us < pt1) AS cancelled,
               list((first_start_us - submit_us) / 1e6 ORDER BY first_start_us - submit_us)
                   FILTER (WHERE first_start_us >= t0 AND first_start_us < pt1) AS waits
        FROM w GROUP BY budget
        """,
    )
    out = []
    for r in per:
        if not (r["started"] or r["waiting"] or r["cancelled"]):
            continue
        waits = r["waits"] or []
        row: dict[str, Any] = {"budget": r["budget"], "workloads": r["started"] + r["waiting"] + r["cancelled"],
                               "started": r["started"], "waiting": r["waiting"], "cancelled": r["cancelled"]}
        if waits:
            row |= {"mean_s": sum(waits) / len(waits), "p50_s": _quantile(waits, 0.5),
                    "p90_s": _quantile(waits, 0.9), "max_s": waits[-1]}
        else:
            row |= dict.fromkeys(("mean_s", "p50_s", "p90_s", "max_s"))
        out.append(row)
    out.sort(key=lambda r: (-(r["p90_s"] if r["p90_s"] is not None else -1), r["budget"]))
    return out


def _settled(value: Any) -> Any:
    """Return ``value`` with every float rounded to 12 significant digits, recursively.

    Sums of floating-point shares carry noise in their last bits (0.30000000000000004); 12
    digits keep every figure far beyond what a GPU-hour means without printing that noise.
    (That the same log gives the same bytes comes from ``prepare`` summing on one thread.)
    """
    if isinstance(value, float):
        return float(f"{value:.12g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _settled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_settled(v) for v in value]
    return value


def collect(con: duckdb.DuckDBPyConnection, tables: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Return the audit dictionary (what ``audit.json`` holds) from a prepared connection.

    ``tables``: the detail tables as written (``detail.write_tables``); by default their row counts only.
    """
    period = con.execute("SELECT t0, t1, window_us FROM params").fetchone()
    assert period is not None
    tables = tables if tables is not None else counts(con)
    work = workloads(con)
    tables["workloads"]["listed"] = len(work)
    settled: dict[str, Any] = _settled({
        "period": {"start": iso(period[0]), "end": iso(period[1])},
        "owed_hours": owed_hours(con),
        "discarded_work": discarded_work(con),
        "wait_by_size": wait_by_size(con),
        "occupancy": occupancy(con),
        "fairness": fairness(con),
        "anomalies": anomalies(con),
        "wait_by_team": wait_by_team(con),
        "workloads": work,
        "tables": tables,
    })
    return settled


def audit(
    source: Source, since: int | str | None = None, until: int | str | None = None, window_s: int = WEEK_S,
    *, within_log: bool = False, level: str | int | None = None, details: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Audit a run directory, log directory, records, events or projected connection; return the audit dict.

    ``within_log``: refuse a period wholly after or before the log (as ``gpuledger audit`` does).
    ``level``: the budget tree's level the owed hours report (name or depth; default the team level).
    ``details``: detail tables (``detail.TABLES``) whose rows to add under the keys they fill (all rows).
    """
    from ledger.queries.timefmt import parse_iso

    since_us = parse_iso(since) if isinstance(since, str) else since
    until_us = parse_iso(until) if isinstance(until, str) else until
    if window_s <= 0 or window_s % 3600:
        raise InputError(f"window {window_s} s: the fairness window must be a positive whole number of hours")
    con = connect(source, decisions=False)
    prepare(con, since_us, until_us, window_s, within_log=within_log, level=level)
    data = collect(con)
    return attach(data, Details.of(con), details) if details else data


def write_json(data: dict[str, Any], path: str | Path) -> None:
    """Write ``data`` as indented JSON atomically (a temporary file renamed into place)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as the run's other files (mkstemp's own mode is 0600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(dumps(data))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(data: Any) -> bytes:
    """Return ``data`` as indented JSON bytes with a final newline (orjson: C, not the standard library's Python)."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def audit_run(run_dir: str | Path, tables: str | Path | None = None) -> dict[str, Any]:
    """Audit ``run_dir/events/``; write ``run_dir/audit.json`` and the detail tables; return the audit dict.

    The detail tables go to ``run_dir/audit/`` (or ``tables``) as Parquet files, named in ``tables``.
    """
    run_dir = Path(run_dir)
    return write_run_audit(run_dir, connect(run_dir / "events", decisions=False), tables)


def write_run_audit(
    run_dir: str | Path, con: duckdb.DuckDBPyConnection, tables: str | Path | None = None
) -> dict[str, Any]:
    """Audit the run's log projected in ``con``; write ``run_dir/audit.json`` and the detail tables; return it."""
    run_dir = Path(run_dir)
    prepare(con)
    folder = Path(tables) if tables is not None else run_dir / FOLDER
    data = collect(con, write_tables(con, folder, relative_to=run_dir))
    write_json(data, run_dir / "audit.json")
    return data


__all__ = [
    "AUDITS",
    "anomalies",
    "audit",
    "audit_run",
    "collect",
    "connect",
    "discarded_work",
    "dumps",
    "fairness",
    "levels",
    "occupancy",
    "owed_hours",
    "prepare",
    "rows",
    "wait_by_size",
    "wait_by_team",
    "workloads",
    "write_json",
    "write_run_audit",
]
