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
    name = level["name"] or f"depth {level['depth']}"
    if level["team_level"]:
        return f"{name} (the team level)" if level["name"] else f"{name} (the deepest level; no team level named)"
    return f"{name} (depth {level['depth']})" if level["name"] else name


def levels_sentence(audit: dict[str, Any]) -> str:
    """Return received / owed at every level of the tree, per hour and per week, in one sentence ('' if one level)."""
    every = [lv for lv in audit["owed_hours"].get("levels", []) if lv["ratio"] is not None]
    if len(every) < 2:
        return ""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    parts = [f"{lv['name'] or 'depth ' + str(lv['depth'])}{' (team)' if lv['team_level'] else ''} {pct(lv['ratio'])} "
             f"per hour, {pct(lv['ratio_week'])} per week, {lv['nodes_at_95']} of {lv['nodes_owed']} nodes at 95%"
             for lv in every]
    return "At every level of the budget tree (a node's hours summed over its teams): " + "; ".join(parts) + "."


def causes_sentence(audit: dict[str, Any]) -> str:
    """Return where the reported level's shortfall went, by cause, in one sentence ('' when nothing fell short)."""
    owed = audit["owed_hours"]
    causes = [c for c in owed.get("shortfall_by_cause", []) if c["short_gpu_hours"] > 0]
    if owed["overall_ratio"] is None or not causes:
        return ""
    parts = "; ".join(f"{CAUSE_LABELS[c['cause']]} {c['share_of_owed'] or 0.0:.1%}" for c in causes)
    return ("Where the GPU time the short nodes were owed went, hour by hour, as a share of all owed: "
            f"{parts} (docs/audits.md defines each).")


def _ratio_key(t: dict[str, Any]) -> tuple[float, str]:
    """Sort key: the worst ratio first, teams with nothing owed last."""
    return (t["ratio"] if t["ratio"] is not None else 2.0, t["budget"])


def short_teams(audit: dict[str, Any], threshold: float = SHORT) -> list[dict[str, Any]]:
    """Return the teams that received less than ``threshold`` of what they were owed, worst first.

    Each carries its first-wait p90 (``wait_p90_s``) and its discarded GPU-hours.
    """
    waits = {w["budget"]: w for w in audit.get("wait_by_team", [])}
    discarded = {t["budget"]: t for t in audit["discarded_work"]["by_team"]}
    out = []
    for t in sorted(audit["owed_hours"]["teams"], key=_ratio_key):
        if t["ratio"] is None or t["ratio"] >= threshold or not t["owed_gpu_hours"]:
            continue
        out.append(t | {
            "wait_p90_s": waits.get(t["budget"], {}).get("p90_s"),
            "discarded_gpu_hours": (discarded.get(t["budget"]) or {}).get("discarded_gpu_hours") or 0.0,
        })
    return out


def shortfall_sentence(audit: dict[str, Any]) -> str:
    """Return where the owed shortfall fell by the teams' standing, in one sentence ('' when nothing was owed)."""
    owed = audit["owed_hours"]
    standing = {r["standing"]: r["share_of_owed"] for r in owed.get("shortfall_by_standing", [])}
    if owed["overall_ratio"] is None or not standing:
        return ""
    parts = "; ".join(f"{STANDING_LABELS[k]} {standing[k] or 0.0:.1%}" for k in STANDING_LABELS if standing.get(k))
    return ("Where the shortfall fell, as a share of all owed, by what the team had run in the window before "
            f"the hour against its share: {parts or 'nowhere'}. Above 100%: it had borrowed idle GPUs and "
            "waited while the others caught up; below 80%: under-served and still short.")


def period_sentence(audit: dict[str, Any]) -> str:
    """Return received / owed over each day and week, an hour over-served set against one short ('' if none)."""
    owed = audit["owed_hours"]
    by = {r["period"]: r["ratio"] for r in owed.get("received_by_period", [])}
    if owed["overall_ratio"] is None or by.get("day") is None or by.get("week") is None:
        return ""
    return (f"Letting a team's hours over what it was owed make up for its hours under it within the same UTC "
            f"day gives {by['day']:.1%} received / owed; within the same week (from Monday), {by['week']:.1%}.")


def headline(audit: dict[str, Any], most: int = 10) -> list[str]:
    """Return the audit's headline as lines a manager reads first: owed, short teams, debug wait, preemption."""
    from ledger.queries.timefmt import duration

    owed, dw = audit["owed_hours"], audit["discarded_work"]
    debug = audit["wait_by_size"].get("debug_allocated") or {}
    ratio = owed["overall_ratio"]
    import textwrap

    figures = (f"{owed['received_gpu_hours']:,.0f} of {owed['owed_gpu_hours']:,.0f} owed; "
               f"{owed['delivered_gpu_hours']:,.0f} delivered in all" if ratio is not None else
               "nothing was owed: the log holds no budget shares, or no allocated demand in the period")
    lines = [
        "GPU-hours received / owed: " + ("-" if ratio is None else f"{ratio:.1%}") + f" ({figures})",
        *textwrap.wrap(OWED_DEFINITION, 100, initial_indent="  ", subsequent_indent="  "),
        f"  These figures are per {level_label(owed.get('level'))} of the budget tree.",
    ]
    for sentence in (shortfall_sentence(audit), period_sentence(audit), levels_sentence(audit),
                     causes_sentence(audit)):
        if sentence:
            lines += textwrap.wrap(sentence, 100, initial_indent="  ", subsequent_indent="  ")
    short = short_teams(audit)
    example = next((t for t in short if t["delivered_gpu_hours"] > 1.5 * t["owed_gpu_hours"]), None)
    if example is not None:
        times = example["delivered_gpu_hours"] / example["owed_gpu_hours"]
        lines += textwrap.wrap(
            f"Hours run beyond what was owed (idle GPUs borrowed) are delivered, not owed: {example['budget']} "
            f"was delivered {times:.1f}x its owed GPU-hours yet received {example['ratio']:.1%} of them, "
            "short in the hours it needed its share.", 100, initial_indent="  ", subsequent_indent="  ")
    lines.append(f"Teams under {SHORT:.0%} of what they were owed: {len(short)} of {owed['teams_owed']}"
                 + (" (worst first)" if short else ""))
    for t in short[:most]:
        wait = "-" if t["wait_p90_s"] is None else duration(t["wait_p90_s"])
        lines.append(f"  {t['budget']}: {t['ratio']:.1%} of {t['owed_gpu_hours']:,.0f} owed GPU-hours, "
                     f"wait p90 {wait}, {t['discarded_gpu_hours']:,.1f} GPU-hours discarded")
    if len(short) > most:
        lines.append(f"  ... and {len(short) - most} more (the owed hours table lists them all, worst first)")
    p90 = debug.get("p90_s")
    lines.append(f"Debug runs (protected, minimum runtime <= 15 min): wait p90 "
                 f"{'-' if p90 is None else duration(p90)} over {debug.get('jobs') or 0:,} runs")
    share = dw["discarded_share"]
    lines.append(f"Discarded by preemption: {dw['discarded_gpu_hours']:,.1f} GPU-hours"
                 + ("" if share is None else f" ({share:.1%} of delivered)")
                 + f" in {dw['preemptions']:,} preemptions")
    ev = dw["eviction_ratio"]
    lines.append("Eviction ratio: " + ("-" if ev is None else f"{ev:.2f}")
                 + " GPUs preempted per GPU that started in their place")
    lines.append(occupancy_sentence(audit["occupancy"]))
    over = [a for a in audit.get("anomalies", ()) if a["kind"] == "over_capacity"]
    if over:
        ran = "; ".join(a["reason"].split(" (")[0] for a in over)  # "the records ran up to N GPUs ..."
        lines += textwrap.wrap(
            ran[:1].upper() + ran[1:]
            + " (over_capacity in the anomalies): the log states fewer GPUs than the cluster ran, so occupancy "
            "goes above 100% and teams are owed shares of too few GPUs.", 100, initial_indent="  ",
            subsequent_indent="  ")
    return lines


def occupancy_sentence(occ: dict[str, Any]) -> str:
    """Return the cluster's use in one line, or say that the log gives no capacity to measure it against."""
    if not occ["capacity_gpu_hours"]:
        return (f"Occupancy: {occ['occupied_gpu_hours']:,.1f} GPU-hours run, but the log states no capacity to "
                "measure them against (an import takes the cluster's GPUs and budget tree from --budgets FILE)")
    return (f"Occupancy: {occ['occupied_share']:.1%} of {occ['capacity_gpu_hours']:,.0f} capacity GPU-hours "
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
        ["budget", "owed_gpu_hours", "delivered_gpu_hours", "received_gpu_hours", "ratio", "day_ratio", "week_ratio"],
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
        ["level", "depth", "nodes_owed", "owed_gpu_hours", "received_gpu_hours", "ratio", "day_ratio", "week_ratio",
         "nodes_at_95", "worst_node", "worst_ratio", "worst_week_node", "worst_week_ratio"],
        [[(lv["name"] or "-") + (" *" if lv["team_level"] else ""), lv["depth"], lv["nodes_owed"],
          lv["owed_gpu_hours"], lv["received_gpu_hours"], lv["ratio"], lv["ratio_day"], lv["ratio_week"],
          lv["nodes_at_95"], (lv["worst_node"] or {}).get("budget"), (lv["worst_node"] or {}).get("ratio"),
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


def as_text(named: dict[str, Table], max_rows: int = 60, totals: dict[str, int] | None = None) -> str:
    """Return tables as aligned plain text, long ones cut to ``max_rows`` with a note.

    ``totals``: a table's full length where only its first rows were handed over.
    """
    parts = []
    for name, (raw_cols, rows) in named.items():
        shown = rows[:max_rows]
        texts = [[cell(v, c) for v, c in zip(r, raw_cols, strict=True)] for r in shown]
        cols = [header(c) for c in raw_cols]
        widths = [max([len(c), *(len(r[i]) for r in texts)]) for i, c in enumerate(cols)]
        lines = [name.replace("_", " "), "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
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
           "causes_sentence", "cell", "header", "headline", "level_label", "levels_sentence", "occupancy_sentence",
           "period_sentence", "short_teams", "shortfall_sentence", "tables"]
