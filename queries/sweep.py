"""A what-if sweep as a person reads it: one row per setting, the measures side by side, the best of each marked.

Input is what ``compare`` gathers for each setting (``{"audit": ..., "replay": ...}``, as
``sidebyside`` reads them); the measures are ``sidebyside``'s, each with the way that is better.
Output is a page (a table and trade-off charts, one point per setting, the Pareto front drawn),
or the same rows as CSV or JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ledger.queries.sidebyside import Measure, human, largest_bucket, measures
from ledger.queries.svg import pareto_front, scatter_chart

# measure key -> True when lower is better; the sweep's columns, in this order
_BETTER_LOW = {
    "owed_ratio": False,
    "worst_team_ratio": False,
    "teams_below_95": True,
    "debug_p90_wait_s": True,
    "largest_p90_wait_s": True,
    "preemptions": True,
    "preemptions_per_workload_week": True,
    "discarded_gpu_hours": True,
    "discarded_share": True,
    "occupied_share": False,
}
_SHORT = {  # column heads short enough for eight settings at 1,400 px
    "owed_ratio": "received / owed hour by hour",
    "worst_team_ratio": "worst team's received / owed hour by hour",
    "teams_below_95": "teams under 95 % hour by hour",
    "debug_p90_wait_s": "debug wait p90",
    "preemptions": "preemptions",
    "preemptions_per_workload_week": "preemptions per workload-week",
    "discarded_gpu_hours": "GPU-hours thrown away",
    "discarded_share": "thrown away / delivered",
    "occupied_share": "occupancy",
}
# the trade-offs drawn: (x measure, y measure, title)
_CHARTS = (
    ("discarded_share", "owed_ratio", "Fairness against work thrown away"),
    ("preemptions_per_workload_week", "debug_p90_wait_s", "Debug waits against preemptions"),
    ("discarded_gpu_hours", "largest_p90_wait_s", "Largest jobs' waits against work thrown away"),
)


@dataclass(frozen=True)
class Column:
    """One measure of the sweep: how to read it, which way is better, its short head."""

    measure: Measure
    lower_is_better: bool
    head: str


def columns(runs: Sequence[dict[str, Any]]) -> list[Column]:
    """Return the sweep's measures that some run has a value for."""
    largest = next((b for b in (largest_bucket(r) for r in runs) if b), None)
    by_key = {m.key: m for m in measures(largest)}
    heads = {**_SHORT, "largest_p90_wait_s": f"largest jobs' wait p90 ({largest} GPUs)"}
    out = [Column(by_key[k], low, heads.get(k) or by_key[k].label.strip()) for k, low in _BETTER_LOW.items()
           if k in by_key]
    return [c for c in out if any(c.measure.get(r) is not None for r in runs)]


def best(column: Column, runs: Sequence[dict[str, Any]]) -> set[int]:
    """Return the indices of the runs with the best value of ``column`` (all of them on a tie)."""
    values = [(i, column.measure.get(r)) for i, r in enumerate(runs)]
    known = [(i, float(v)) for i, v in values if v is not None]
    if not known or len({v for _, v in known}) == 1:
        return set()  # all equal: nothing to mark
    top = (min if column.lower_is_better else max)(v for _, v in known)
    return {i for i, v in known if v == top}


def sweep_rows(labels: Sequence[str], runs: Sequence[dict[str, Any]],
               same_as: Sequence[str | None] | None = None) -> dict[str, Any]:
    """Return the sweep as data: the measures, then one row per setting with its values and best marks."""
    cols = columns(runs)
    marks = {c.measure.key: best(c, runs) for c in cols}
    same = list(same_as) if same_as is not None else [None] * len(runs)
    return {
        "view": "sweep",
        "measures": [{"measure": c.measure.key, "label": c.measure.label.strip(), "unit": c.measure.unit,
                      "better": "lower" if c.lower_is_better else "higher"} for c in cols],
        "settings": [
            {"setting": label, "same_decisions_as": same[i],
             "values": {c.measure.key: c.measure.get(r) for c in cols},
             "best": [c.measure.key for c in cols if i in marks[c.measure.key]]}
            for i, (label, r) in enumerate(zip(labels, runs, strict=True))
        ],
    }


def sweep_table(labels: Sequence[str], runs: Sequence[dict[str, Any]], fmt: str,
                same_as: Sequence[str | None] | None = None) -> str:
    """Return the sweep's rows as ``json`` or ``csv`` (one row per setting, one column per measure)."""
    data = sweep_rows(labels, runs, same_as)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    keys = [m["measure"] for m in data["measures"]]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["setting", "same_decisions_as", *keys, "best"])
    for s in data["settings"]:
        w.writerow([s["setting"], s["same_decisions_as"] or "",
                    *("" if s["values"][k] is None else s["values"][k] for k in keys), " ".join(s["best"])])
    return buf.getvalue()


def _table_html(labels: Sequence[str], runs: Sequence[dict[str, Any]], cols: list[Column],
                same_as: Sequence[str | None]) -> str:
    marks = {c.measure.key: best(c, runs) for c in cols}
    head = "".join(f'<th title="{escape(c.measure.label.strip())} ({"lower" if c.lower_is_better else "higher"} '
                   f'is better)">{escape(c.head)} {"↓" if c.lower_is_better else "↑"}</th>' for c in cols)
    body = []
    for i, (label, r) in enumerate(zip(labels, runs, strict=True)):
        cells = []
        for c in cols:
            text = escape(human(c.measure.get(r), c.measure.unit))
            best_here = i in marks[c.measure.key]
            cells.append(f'<td class="n best">★ {text}</td>' if best_here else f'<td class="n">{text}</td>')
        name = escape(label) + (f'<br><span class="note">same decisions as {escape(str(same_as[i]))}</span>'
                                if same_as[i] else "")
        body.append(f"<tr><td class='n'>{i + 1}</td><td class='setting'>{name}</td>{''.join(cells)}</tr>")
    return (f"<div class='wrap'><table class='sweep'><thead><tr><th>#</th><th>setting</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def sweep_html(labels: Sequence[str], runs: Sequence[dict[str, Any]], *, title: str, page: Any,
               notes: Sequence[str] = (), same_as: Sequence[str | None] | None = None) -> str:
    """Return the sweep page: the settings' table, best values marked, and the trade-off charts.

    ``page(title, body)`` wraps the body in the report's page (its styles); ``notes`` are said
    above the table (e.g. which settings could not change a policy's decisions and were replayed once).
    """
    same = list(same_as) if same_as is not None else [None] * len(runs)
    cols = columns(runs)
    by_key = {c.measure.key: c for c in cols}
    audits = [r["audit"] for r in runs]
    period = audits[0].get("period", {}) if audits else {}
    charts = []
    for xk, yk, chart_title in _CHARTS:
        if xk not in by_key or yk not in by_key:
            continue
        xc, yc = by_key[xk], by_key[yk]
        points = [(label, xc.measure.get(r), yc.measure.get(r)) for label, r in zip(labels, runs, strict=True)]
        known = [(label, float(x), float(y)) for label, x, y in points if x is not None and y is not None]
        if len(known) < 2:
            continue
        y_hours = yc.measure.unit == "seconds"
        if y_hours:
            known = [(label, x, y / 3600) for label, x, y in known]
        charts.append(scatter_chart(
            known, title=chart_title, x_label=xc.head, y_label=yc.head + (", hours" if y_hours else ""),
            x_low=xc.lower_is_better, y_low=yc.lower_is_better,
            x_share=xc.measure.unit in ("share", "ratio"), y_share=yc.measure.unit in ("share", "ratio")))
    front_note = ""
    if "discarded_share" in by_key and "owed_ratio" in by_key:
        pts = [(by_key["discarded_share"].measure.get(r), by_key["owed_ratio"].measure.get(r)) for r in runs]
        if all(x is not None and y is not None for x, y in pts):
            xy = [(float(x), float(y)) for x, y in pts if x is not None and y is not None]
            front = pareto_front(xy)
            groups: dict[tuple[float, float], list[int]] = {}
            for i in front:
                groups.setdefault(xy[i], []).append(i)
            front_note = ("On the front of fairness against work thrown away: "
                          + "; ".join(", ".join(str(i + 1) for i in g) + f" ({labels[g[0]]}"
                                      + (" and the same results" if len(g) > 1 else "") + ")"
                                      for g in groups.values()) + ".")
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{len(runs)} settings replayed on the same inputs, one row each; period '
        f'{escape(str(period.get("start") or "-"))} to {escape(str(period.get("end") or "-"))} (UTC). '
        "★ marks the best value of each measure (↑ higher is better, ↓ lower is better).</p>",
        "".join(f'<p class="def">{escape(n)}</p>' for n in notes),
        _table_html(labels, runs, cols, same),
        "<h2>Trade-offs</h2>",
        '<p class="sub">One point per setting, numbered as its row; the dashed line joins the settings no other '
        "beats on both measures (the Pareto front). " + escape(front_note) + "</p>",
        f"<div class='charts'>{''.join(charts)}</div>",
        '<p class="note">Each setting\'s full audit is in its run directory (<code>gpuledger audit RUN_DIR '
        "--format html</code>); <code>gpuledger compare ... --format csv</code> gives these rows.</p>",
    ]
    text: str = page(title, "".join(body))
    return text


__all__ = ["Column", "best", "columns", "sweep_html", "sweep_rows", "sweep_table"]
