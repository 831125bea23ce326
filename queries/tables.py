"""Flatten an audit dictionary into named tables (columns + rows) for text, CSV and HTML output."""

from __future__ import annotations

import csv
import io
from typing import Any

Table = tuple[list[str], list[list[Any]]]
REPORTS = ("owed_hours", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies", "workloads")


def _discard_row(label: str, d: dict[str, Any]) -> list[Any]:
    return [
        label,
        d["preemptions"],
        d["discarded_gpu_hours"],
        d["discarded_share"],
        d["median_restart_s"],
        d["preemptions_per_workload_week"],
        d["delivered_gpu_hours"],
    ]


def tables(audit: dict[str, Any], report: str | None = None) -> dict[str, Table]:
    """Return the audit's tables by report name (only ``report`` when given)."""
    out: dict[str, Table] = {}
    owed = audit["owed_hours"]
    out["owed_hours"] = (
        ["budget", "owed_gpu_hours", "delivered_gpu_hours", "received_gpu_hours", "ratio"],
        [
            [t["budget"], t["owed_gpu_hours"], t["delivered_gpu_hours"], t["received_gpu_hours"], t["ratio"]]
            for t in owed["teams"]
        ]
        + [
            [
                "(overall)",
                owed["owed_gpu_hours"],
                owed["delivered_gpu_hours"],
                owed["received_gpu_hours"],
                owed["overall_ratio"],
            ]
        ],
    )
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
        ],
        [_discard_row("(all)", dw)]
        + [_discard_row(tier, dw["by_tier"][tier]) for tier in ("allocated", "unallocated")]
        + [_discard_row(t["budget"], t) for t in dw["by_team"]],
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
    out["fairness"] = (fair_cols, [[r[c] for c in fair_cols] for r in audit["fairness"]["hourly"]])
    an_cols = ["kind", "event_id", "workload_id", "time", "included", "reason"]
    out["anomalies"] = (an_cols, [[a[c] for c in an_cols] for a in audit["anomalies"]])
    wl_cols = ["workload_id", "budget", "gpus", "kind", "submit_time", "first_start_time", "end_time", "preemptions"]
    out["workloads"] = (wl_cols, [[w[c] for c in wl_cols] for w in audit["workloads"]])
    if report is not None:
        return {report: out[report]}
    return out


def cell(value: Any) -> str:
    """Return a value as table text: floats to 3 decimals, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}"
    return str(value)


def as_text(named: dict[str, Table], max_rows: int = 60) -> str:
    """Return tables as aligned plain text, long ones cut to ``max_rows`` with a note."""
    parts = []
    for name, (cols, rows) in named.items():
        shown = rows[:max_rows]
        texts = [[cell(v) for v in r] for r in shown]
        widths = [max([len(c), *(len(r[i]) for r in texts)]) for i, c in enumerate(cols)]
        lines = [name.replace("_", " "), "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        for r in texts:
            lines.append("  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(r, widths, strict=True)))
        if len(rows) > max_rows:
            lines.append(f"... {len(rows) - max_rows} more row(s); use --format csv or json for all")
        if not rows:
            lines.append("(none)")
        parts.append("\n".join(line.rstrip() for line in lines))
    return "\n\n".join(parts) + "\n"


def _numeric(text: str) -> bool:
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


__all__ = ["REPORTS", "Table", "as_csv", "as_text", "cell", "tables"]
