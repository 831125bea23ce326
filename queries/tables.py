"""Flatten an audit dictionary into named tables (columns + rows) for text, CSV and HTML output."""

from __future__ import annotations

import csv
import io
from typing import Any

Table = tuple[list[str], list[list[Any]]]
REPORTS = (
    "owed_hours", "owed_levels", "wait_by_team", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies",
    "workloads",
)

# A team's standing over the fairness window before an hour: what it ran there ÷ its share of it.
STANDING_LABELS = {"below_80": "below 80%", "80_to_100": "80-100%", "100_to_150": "100-150%",
                   "above_150": "above 150%", "no_history": "no history"}

SHORT = 0.95  # a team that received less than this share of what it was owed is shown as short

OWED_DEFINITION = (
    "Owed: each hour, a team is owed its budget share of the GPU-hours available, capped at what it asked "
    "for that hour; received counts the GPU-hours it ran within that, hour by hour."
)


CAUSE_LABELS = {"wide_runs": "runs wider than their node's share", "idle_gpus": "idle GPUs",
                "free_fill": "free fill", "above_share": "nodes above their share", "unexplained": "unexplained"}


def level_label(level: dict[str, Any] | None) -> str:
    """Return which level of the budget tree a figure is at, as a person reads it: 'project (the team level)'."""
    if level is None:
        return "no budget tree"
    if level["name"] is None:
        return f"{level_noun(level)} (the deepest level)" if level["team_level"] else level_noun(level)
    return f"{level['name']} (the team level)" if level["team_level"] else f"{level['name']} (depth {level['depth']})"


def level_noun(level: dict[str, Any] | None, many: bool = False) -> str:
    """Return what one node of a level is called ('project'), or several ('projects'), from the level's name."""
    if level is None:
        return "teams" if many else "team"
    if level["name"] is None:
        return f"budget{'s' if many else ''} at depth {level['depth']}"
    return plural(level["name"]) if many else str(level["name"])


def plural(noun: str) -> str:
    """Return a noun's plural as level names read: 'project' -> 'projects', 'budget at X' -> 'budgets at X'."""
    head, sep, rest = noun.partition(" ")
    if sep:  # a noun with words after it: the first word takes the plural
        return f"{plural(head)} {rest}"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies"
    return noun + "s"


def leaf_noun(audit: dict[str, Any], many: bool = False) -> str:
    """Return what the leaves of the budget tree (the budgets workloads are charged to) are called."""
    every = audit.get("owed_hours", {}).get("levels") or []
    name = every[-1]["name"] if every else None
    if name is None:
        return "leaf budgets" if many else "leaf budget"
    return plural(name) if many else str(name)


def reported(audit: dict[str, Any]) -> dict[str, Any] | None:
    """Return the entry of ``owed_hours.levels`` the audit reports (None without a budget tree)."""
    return next((lv for lv in audit["owed_hours"].get("levels", []) if lv.get("reported")), None)


def unnamed_levels_note(audit: dict[str, Any]) -> str:
    """Return the one note a report gives when the budget tree names none of its levels ('' when it does)."""
    owed = audit["owed_hours"]
    every = owed.get("levels") or []
    if not every or any(lv["name"] for lv in every) or owed.get("level") is None:
        return ""
    depth = owed["level"]["depth"]
    return (f"The budget tree names no levels, so these figures are per budget at depth {depth}, "
            f"{'its deepest level, each leaf budget taken for a team' if owed['level']['team_level'] else 'as asked'}. "
            "To report per team allocation (as the published figure does), name the levels in the budgets file, "
            "root first, and the team level, e.g. `levels: [org, program, team, user]` and `team_level: team` "
            "(docs/formats.md).")


def bound_phrase(bound: dict[str, Any] | None) -> str:
    """Return what the hourly bound says ('at most 88.2% was possible this month, ...'; '' without one)."""
    if bound is None or bound.get("ratio") is None:
        return ""
    if bound["ratio"] >= 1.0:
        return ("at most 100.0% was possible this month: the gangs and protected windows force no hourly shortfall "
                "at this level (the hourly bound)")
    return (f"at most {bound['ratio']:.1%} was possible this month, given the gangs and protected windows "
            "(the hourly bound)")


def levels_sentence(audit: dict[str, Any]) -> str:
    """Return received / owed at every level of the tree, per hour and per week, in one sentence ('' if one level)."""
    every = [lv for lv in audit["owed_hours"].get("levels", []) if lv["ratio"] is not None]
    if len(every) < 2:
        return ""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    parts = []
    for lv in every:
        bound = (lv.get("hourly_bound") or {}).get("ratio")
        parts.append(
            f"{lv['name'] or 'depth ' + str(lv['depth'])}{' (team)' if lv['team_level'] else ''} "
            f"{pct(lv['ratio'])} per hour (at most {pct(bound)} possible), {pct(lv['ratio_week'])} per week, "
            f"{lv['nodes_at_95']} of {lv['nodes_owed']} nodes at 95% per hour, {lv['nodes_at_95_week']} per week")
    return "At every level of the budget tree (a node's hours summed over its teams): " + "; ".join(parts) + "."


def causes_sentence(audit: dict[str, Any]) -> str:
    """Return where the reported level's shortfall went, by cause, in one sentence ('' when nothing fell short)."""
    owed = audit["owed_hours"]
    causes = [c for c in owed.get("shortfall_by_cause", []) if c["short_gpu_hours"] > 0]
    if owed["overall_ratio"] is None or not causes:
        return ""
    parts = "; ".join(f"{CAUSE_LABELS[c['cause']]} {c['share_of_owed'] or 0.0:.1%}" for c in causes)
    return (f"Where the GPU time the short {level_noun(owed.get('level'), many=True)} were owed went, hour by hour, "
            f"as a share of all owed: {parts} (docs/audits.md defines each).")


def _ratio_key(t: dict[str, Any]) -> tuple[float, str]:
    """Sort key: the worst ratio first, teams with nothing owed last."""
    return (t["ratio"] if t["ratio"] is not None else 2.0, t["budget"])


def short_teams(audit: dict[str, Any], threshold: float = SHORT) -> list[dict[str, Any]]:
    """Return the nodes of the reported level that received less than ``threshold`` of what they were owed hour by
    hour, worst first.

    Each node's row carries what its work paid, counted at its level (``owed_hours.teams``: the p90 of its
    workloads' first waits, its preemptions and discarded GPU-hours).
    """
    return [t for t in sorted(audit["owed_hours"]["teams"], key=_ratio_key)
            if t["ratio"] is not None and t["ratio"] < threshold and t["owed_gpu_hours"]]


def shortfall_sentence(audit: dict[str, Any]) -> str:
    """Return where the owed shortfall fell by the teams' standing, in one sentence ('' when nothing was owed)."""
    owed = audit["owed_hours"]
    standing = {r["standing"]: r["share_of_owed"] for r in owed.get("shortfall_by_standing", [])}
    if owed["overall_ratio"] is None or not standing:
        return ""
    noun = level_noun(owed.get("level"))
    parts = "; ".join(f"{STANDING_LABELS[k]} {standing[k] or 0.0:.1%}" for k in STANDING_LABELS if standing.get(k))
    return (f"Where the hourly shortfall fell, as a share of all owed, by what the {noun} had run in the window "
            f"before the hour against its share: {parts or 'nowhere'}. Above 100%: it had borrowed idle GPUs and "
            "waited while the others caught up; below 80%: under-served and still short.")


def period_sentence(audit: dict[str, Any]) -> str:
    """Return received / owed over each day and week, an hour over-served set against one short ('' if none)."""
    owed = audit["owed_hours"]
    by = {r["period"]: r["ratio"] for r in owed.get("received_by_period", [])}
    if owed["overall_ratio"] is None or by.get("day") is None or by.get("week") is None:
        return ""
    return (f"Letting a {level_noun(owed.get('level'))}'s hours over what it was owed make up for its hours under it "
            f"within the same UTC day gives {by['day']:.1%} received / owed; within the same week (from Monday), "
            f"{by['week']:.1%}.")


def headline(audit: dict[str, Any], most: int = 10) -> list[str]:
    """Return the audit's headline as lines a manager reads first: owed, short teams, debug wait, preemption.

    Every line says the level of the budget tree and the time scale its figures are at.
    """
    import textwrap

    from ledger.queries.timefmt import duration

    owed, dw = audit["owed_hours"], audit["discarded_work"]
    debug = audit["wait_by_size"].get("debug_allocated") or {}
    ratio = owed["overall_ratio"]
    level = owed.get("level")
    by = {r["period"]: r["ratio"] for r in owed.get("received_by_period", [])}

    def wrap(text: str) -> list[str]:
        return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="  ")

    def line(text: str) -> list[str]:  # a line of the headline's own, its rest indented under it
        return textwrap.wrap(text, 100, subsequent_indent="  ", break_on_hyphens=False)

    if ratio is None:
        lines = ["GPU-hours received / owed: - (nothing was owed: the log holds no budget shares, or no allocated "
                 "demand in the period)"]
    else:
        week = by.get("week")
        lines = [f"GPU-hours received / owed per {level_label(level)}: {ratio:.1%} hour by hour"
                 + ("" if week is None else f", {week:.1%} over each week")]
        bound = bound_phrase(owed.get("hourly_bound"))
        lines += wrap(f"Hour by hour: {owed['received_gpu_hours']:,.0f} of {owed['owed_gpu_hours']:,.0f} owed "
                      f"GPU-hours received ({owed['delivered_gpu_hours']:,.0f} delivered in all)"
                      + (f"; {bound}." if bound else "."))
    lines += wrap(OWED_DEFINITION)
    note = unnamed_levels_note(audit)
    if note:
        lines += wrap(note)
    for sentence in (shortfall_sentence(audit), period_sentence(audit), levels_sentence(audit),
                     causes_sentence(audit)):
        if sentence:
            lines += wrap(sentence)
    short = short_teams(audit)
    example = next((t for t in short if t["delivered_gpu_hours"] > 1.5 * t["owed_gpu_hours"]), None)
    if example is not None:
        times = example["delivered_gpu_hours"] / example["owed_gpu_hours"]
        lines += wrap(
            f"Hours run beyond what was owed (idle GPUs borrowed) are delivered, not owed: {example['budget']} "
            f"was delivered {times:.1f}x its owed GPU-hours yet received {example['ratio']:.1%} of them hour by "
            "hour, short in the hours it needed its share.")
    lv = reported(audit)
    week_short = ("" if lv is None else
                  f", {lv['nodes_owed'] - lv['nodes_at_95_week']} of {lv['nodes_owed']} over their weeks")
    lines += line(f"Under {SHORT:.0%} of what they were owed, per {level_label(level)}: {len(short)} of "
                  f"{owed['teams_owed']} hour by hour{week_short}" + (" (worst first, by the hour)" if short else ""))
    for t in short[:most]:
        wait = "-" if t.get("wait_p90_s") is None else duration(t["wait_p90_s"])
        week_ratio = "" if t.get("ratio_week") is None else f", {t['ratio_week']:.1%} over its weeks"
        lines += textwrap.wrap(
            f"{t['budget']}: {t['ratio']:.1%} hour by hour{week_ratio}, of {t['owed_gpu_hours']:,.0f} owed "
            f"GPU-hours; first-wait p90 {wait}; {t.get('discarded_gpu_hours') or 0.0:,.1f} GPU-hours discarded",
            100, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False)
    if len(short) > most:
        lines.append(f"  ... and {len(short) - most} more (the owed hours table lists them all, worst first)")
    p90 = debug.get("p90_s")
    lines += line(f"Debug runs (protected, minimum runtime <= 15 min), the whole cluster over the period: wait p90 "
                  f"{'-' if p90 is None else duration(p90)} over {debug.get('jobs') or 0:,} runs")
    share = dw["discarded_share"]
    lines += line("Discarded by preemption, the whole cluster over the period: "
                  f"{dw['discarded_gpu_hours']:,.1f} GPU-hours"
                  + ("" if share is None else f" ({share:.1%} of delivered)")
                  + f" in {dw['preemptions']:,} preemptions")
    ev = dw["eviction_ratio"]
    lines += line("Eviction ratio, the whole cluster over the period: " + ("-" if ev is None else f"{ev:.2f}")
                  + " GPUs preempted per GPU that started in their place")
    lines += line(occupancy_sentence(audit["occupancy"]))
    over = [a for a in audit.get("anomalies", ()) if a["kind"] == "over_capacity"]
    if over:
        ran = "; ".join(a["reason"].split(" (")[0] for a in over)  # "the records ran up to N GPUs ..."
        lines += wrap(
            ran[:1].upper() + ran[1:]
            + " (over_capacity in the anomalies): the log states fewer GPUs than the cluster ran, so occupancy "
            "goes above 100% and teams are owed shares of too few GPUs.")
    return lines


def occupancy_sentence(occ: dict[str, Any]) -> str:
    """Return the cluster's use in one line, or say that the log gives no capacity to measure it against."""
    if not occ["capacity_gpu_hours"]:
        return (f"Occupancy, the whole cluster over the period: {occ['occupied_gpu_hours']:,.1f} GPU-hours run, but "
                "the log states no capacity to measure them against (an import takes the cluster's GPUs and budget "
                "tree from --budgets FILE)")
    return (f"Occupancy, the whole cluster over the period: {occ['occupied_share']:.1%} of "
            f"{occ['capacity_gpu_hours']:,.0f} capacity GPU-hours "
            f"({occ['allocated_share']:.1%} allocated, {occ['unallocated_share']:.1%} free fill)")


def _discard_row(label: str, d: dict[str, Any]) -> list[Any]:
    # GPUs preempted per GPU started in their place is counted over the whole cluster only (a victim's
    # tier or team and its waiter's differ), so the split rows leave it empty
    return [
        label,
        d["preemptions"],
        d["discarded_gpu_hours"],
        d["discarded_share"],
        d["median_restart_s"],
        d["preemptions_per_workload_week"],
        d["delivered_gpu_hours"],
        d.get("eviction_ratio"),
    ]


def tables(audit: dict[str, Any], report: str | None = None) -> dict[str, Table]:
    """Return the audit's tables by report name (only ``report`` when given)."""
    out: dict[str, Table] = {}
    owed = audit["owed_hours"]
    # (overall) first so no cut can hide it, then the teams worst first
    by = {r["period"]: r["ratio"] for r in owed.get("received_by_period", [])}
    out["owed_hours"] = (
        ["budget", "owed_gpu_hours", "delivered_gpu_hours", "received_gpu_hours", "hour_ratio", "day_ratio",
         "week_ratio"],
        [["(overall)", owed["owed_gpu_hours"], owed["delivered_gpu_hours"], owed["received_gpu_hours"],
          owed["overall_ratio"], by.get("day"), by.get("week")]]
        + [
            [t["budget"], t["owed_gpu_hours"], t["delivered_gpu_hours"], t["received_gpu_hours"], t["ratio"],
             t.get("ratio_day"), t.get("ratio_week")]
            for t in sorted(owed["teams"], key=_ratio_key)
        ],
    )
    standing_cols = ["standing_over_window", "team_hours", "owed_gpu_hours", "short_gpu_hours", "short_share"]
    out["owed_shortfall"] = (standing_cols, [
        [STANDING_LABELS[r["standing"]], r["team_hours"], r["owed_gpu_hours"], r["short_gpu_hours"], r["share_of_owed"]]
        for r in owed.get("shortfall_by_standing", [])
    ])
    out["owed_by_period"] = (["period", "owed_gpu_hours", "received_gpu_hours", "ratio"], [
        [r["period"], owed["owed_gpu_hours"], r["received_gpu_hours"], r["ratio"]]
        for r in owed.get("received_by_period", [])
    ])
    every = owed.get("levels", [])
    out["owed_levels"] = (
        ["level", "depth", "nodes_owed", "owed_gpu_hours", "received_gpu_hours", "hour_ratio", "hour_bound_ratio",
         "day_ratio", "week_ratio", "nodes_at_95_hour", "nodes_at_95_week", "worst_hour_node", "worst_hour_ratio",
         "worst_week_node", "worst_week_ratio"],
        [[(lv["name"] or "-") + (" *" if lv["team_level"] else ""), lv["depth"], lv["nodes_owed"],
          lv["owed_gpu_hours"], lv["received_gpu_hours"], lv["ratio"], (lv.get("hourly_bound") or {}).get("ratio"),
          lv["ratio_day"], lv["ratio_week"], lv["nodes_at_95"], lv["nodes_at_95_week"],
          (lv["worst_node"] or {}).get("budget"), (lv["worst_node"] or {}).get("ratio"),
          (lv["worst_node_week"] or {}).get("budget"), (lv["worst_node_week"] or {}).get("ratio_week")]
         for lv in every],
    )
    out["owed_shortfall_by_cause"] = (
        ["level", "short_gpu_hours", *(f"{c}_gpu_hours" for c in CAUSE_LABELS)],
        [[(lv["name"] or f"depth {lv['depth']}"), lv["owed_gpu_hours"] - lv["received_gpu_hours"],
          *({c["cause"]: c["short_gpu_hours"] for c in lv["shortfall_by_cause"]}.get(k) for k in CAUSE_LABELS)]
         for lv in every],
    )
    wt_cols = ["budget", "workloads", "started", "waiting", "cancelled", "mean_s", "p50_s", "p90_s", "max_s"]
    out["wait_by_team"] = (wt_cols, [[w[c] for c in wt_cols] for w in audit.get("wait_by_team", [])])
    dw = audit["discarded_work"]
    out["discarded_work"] = (
        [
            "split",
            "preemptions",
            "discarded_gpu_hours",
            "discarded_share",
            "median_restart_s",
            "preemptions_per_workload_week",
            "delivered_gpu_hours",
            "eviction_ratio",
        ],
        [_discard_row("(all)", dw)]
        + [_discard_row(tier, dw["by_tier"][tier]) for tier in ("allocated", "unallocated")]
        + [_discard_row(t["budget"], t)
           for t in sorted(dw["by_team"], key=lambda t: (-(t["discarded_gpu_hours"] or 0.0), t["budget"]))],
    )
    wait_rows = []
    for kind, block in (("first", audit["wait_by_size"]), ("requeue", audit["wait_by_size"]["requeue"])):
        for b in [*block["buckets"], block["debug"], block["debug_allocated"]]:
            wait_rows.append([kind, b["size"], b["jobs"], b["mean_s"], b["p50_s"], b["p90_s"], b["p99_s"]])
    out["wait_by_size"] = (["wait", "size", "jobs", "mean_s", "p50_s", "p90_s", "p99_s"], wait_rows)
    occ = audit["occupancy"]
    occ_cols = [
        "capacity_gpu_hours",
        "down_gpu_hours",
        "occupied_gpu_hours",
        "occupied_on_down_gpu_hours",
        "occupied_share",
        "allocated_share",
        "unallocated_share",
    ]
    out["occupancy"] = (occ_cols, [[occ[c] for c in occ_cols]])
    fair_cols = ["budget", "hour", "usage_gpu_hours", "allocation_gpu_hours", "hour_ratio", "window_ratio"]
    # the hour-by-hour rows are a detail table: here when attached (``detail.attach``), else none
    out["fairness"] = (fair_cols, [[r[c] for c in fair_cols] for r in audit["fairness"].get("hourly", [])])
    an_cols = ["kind", "event_id", "workload_id", "time", "included", "reason"]
    out["anomalies"] = (an_cols, [[a[c] for c in an_cols] for a in audit["anomalies"]])
    wl_cols = ["workload_id", "budget", "gpus", "kind", "submit_time", "first_start_time", "end_time", "preemptions"]
    out["workloads"] = (wl_cols, [[w[c] for c in wl_cols] for w in audit["workloads"]])
    if report is not None:
        return {report: out[report]}
    return out


def cell(value: Any, column: str = "") -> str:
    """Return a value as a person reads it in a table: durations (``*_s``) as 3.4 h, ratios and shares as %.

    Machine formats (JSON, CSV) keep the raw numbers; only tables for people go through here.
    """
    from ledger.queries.timefmt import duration

    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and column.endswith("_s"):
        return duration(float(value))
    if isinstance(value, float) and column == "eviction_ratio":
        return f"{value:.2f}"  # GPUs per GPU, not a share
    if isinstance(value, float) and (column == "ratio" or column.endswith(("_share", "_ratio"))):
        return f"{value:.1%}"
    if isinstance(value, float) and column.endswith("gpu_hours"):
        return f"{value:,.1f}"
    if isinstance(value, float):
        return f"{value:,.3f}"
    return str(value)


def header(column: str) -> str:
    """Return a column name as a table header: ``p90_s`` as ``p90``, underscores as spaces."""
    return (column[:-2] if column.endswith("_s") else column).replace("_", " ")


def titles(audit: dict[str, Any]) -> dict[str, str]:
    """Return each table's title as a person reads it: what its rows are (their level) and the time scale."""
    owed = audit["owed_hours"]
    level, noun = level_label(owed.get("level")), level_noun(owed.get("level"))
    leaf = leaf_noun(audit)
    return {
        "owed_hours": f"owed hours per {level}: hour by hour, over each UTC day, over each week",
        "owed_shortfall": f"owed shortfall per {noun} hour by hour, by its standing over the fairness window",
        "owed_by_period": f"owed by period: per {noun}, its hours evened out over each hour, UTC day, week",
        "owed_levels": "owed levels: every level of the budget tree (* the team level)",
        "owed_shortfall_by_cause": "owed shortfall by cause: hour by hour, at every level of the budget tree",
        "wait_by_team": f"wait by team: first waits per {leaf} over the period",
        "discarded_work": f"discarded work over the period: the whole cluster, per tier, per {leaf}",
        "wait_by_size": "wait by size: the whole cluster over the period",
        "occupancy": "occupancy: the whole cluster over the period",
        "fairness": f"fairness per {leaf}, hour by hour",
    }


def as_text(named: dict[str, Table], max_rows: int = 60, totals: dict[str, int] | None = None,
            title: dict[str, str] | None = None) -> str:
    """Return tables as aligned plain text, long ones cut to ``max_rows`` with a note.

    ``totals``: a table's full length where only its first rows were handed over; ``title``: a table's title
    (``titles``), else its name.
    """
    parts = []
    for name, (raw_cols, rows) in named.items():
        shown = rows[:max_rows]
        texts = [[cell(v, c) for v, c in zip(r, raw_cols, strict=True)] for r in shown]
        cols = [header(c) for c in raw_cols]
        widths = [max([len(c), *(len(r[i]) for r in texts)]) for i, c in enumerate(cols)]
        heading = (title or {}).get(name) or name.replace("_", " ")
        lines = [heading, "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        for r in texts:
            lines.append("  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(r, widths, strict=True)))
        total = max(len(rows), (totals or {}).get(name, 0))
        if total > max_rows:
            lines.append(f"... {total - max_rows:,} more row(s); use --format csv for all")
        if not rows:
            lines.append("(none)")
        parts.append("\n".join(line.rstrip() for line in lines))
    return "\n\n".join(parts) + "\n"


def _numeric(text: str) -> bool:
    for unit in (" s", " min", " h", " d", "%"):
        if text.endswith(unit):
            text = text[: -len(unit)]
            break
    return text.replace(",", "").replace(".", "", 1).lstrip("-").isdigit()


def as_csv(named: dict[str, Table]) -> str:
    """Return tables as CSV; several tables are separated by a blank line and a ``# name`` line."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for i, (name, (cols, rows)) in enumerate(named.items()):
        if len(named) > 1:
            if i:
                buf.write("\n")
            buf.write(f"# {name}\n")
        writer.writerow(cols)
        writer.writerows(["" if v is None else v for v in r] for r in rows)
    return buf.getvalue()


__all__ = ["CAUSE_LABELS", "OWED_DEFINITION", "REPORTS", "SHORT", "STANDING_LABELS", "Table", "as_csv", "as_text",
           "bound_phrase", "causes_sentence", "cell", "header", "headline", "leaf_noun", "level_label", "level_noun",
           "levels_sentence", "occupancy_sentence", "period_sentence", "plural", "reported", "short_teams",
           "shortfall_sentence", "tables", "titles", "unnamed_levels_note"]
