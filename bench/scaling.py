"""Cost as the work grows: ``gpuledger replay`` and ``gpuledger audit`` against workloads and against the backlog.

Two series of scenario-family months (``ledger.replay.scenario_family``), each replayed as a user
types it (``bench.commands``: the core alone, the command end to end, ``gpuledger audit RUN``):

* workloads: 7 days at 2.5x demand on clusters sized for about 10k, 25k, 50k, 100k and 200k
  workloads (``BENCH_SCALING_SIZES``, default ``10,25,50,100,200``, thousands);
* backlog: the same 256-GPU week at 1.2x, 2.5x and 4x demand (``BENCH_SCALING_DEMANDS``), replayed
  until the work is done, so the queue of waiting workloads grows with the demand.

It prints seconds and microseconds per event (per event of the log: the work done), and draws
both series as ``docs/scaling.svg`` (``BENCH_SCALING_SVG`` to write it elsewhere) with the
project's chart palette. Flat lines: the cost per event does not grow with the size of the month
or with the number of workloads waiting.
"""

from __future__ import annotations

import json
import os
import tempfile
from html import escape
from pathlib import Path
from typing import Any

from bench.commands import measure
from ledger.budgets import Budgets
from ledger.events import WorkloadSubmitted
from ledger.queries.svg import PALETTE, nice_max

ROOT = Path(__file__).resolve().parents[1]
PER_GPU_WEEK = 79.2  # workloads the family month (2.5x, 7 days) submits per GPU: 81,106 on 1,024 GPUs


def generated(name: str) -> tuple[list[WorkloadSubmitted], Budgets, str]:
    """Return the scaling month ``name``: ``w<thousands>`` (2.5x, sized to the workloads), ``d<demand>`` (256 GPUs)."""
    from ledger.replay import scenario_family as sf

    if name.startswith("w"):
        gpus = max(64, round(int(name[1:]) * 1000 / PER_GPU_WEEK / 8) * 8)
        params = sf.Params(gpus=gpus, days=7, demand=2.5, close_budgets=True, exact_share=0.35, fill_share=0.15)
    elif name.startswith("d"):
        params = sf.Params(gpus=256, days=7, demand=float(name[1:]), close_budgets=True, exact_share=0.35,
                           fill_share=0.15)
    else:
        raise SystemExit(f"bench.scaling: unknown month {name!r}")
    subs, budgets = sf.month(params, 1)
    return subs, budgets, f"{params.gpus:,} GPUs, {params.demand:g}x for 7 days, {len(subs):,} workloads"


def per_event(m: dict[str, Any]) -> dict[str, float]:
    """Return the month's median microseconds (CPU) per log event: core, replay as typed, audit."""
    import statistics

    runs = m["runs"]
    key = "{}_cpu" if "core_cpu" in runs[0] else "{}"  # CPU seconds where measured: steadier on a shared machine
    return {k: statistics.median(float(r[key.format(k)]) for r in runs) / m["events"] * 1e6
            for k in ("core", "typed", "audit")}


def chart(title: str, xs: list[str], rows: list[dict[str, float]], x_label: str, width: int = 520,
          height: int = 240) -> str:
    """Return an SVG line chart of microseconds per event (core, replay as typed, audit) over ``xs``."""
    pad_l, pad_r, pad_t, pad_b = 52, 12, 24, 56
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    series = [("core-only replay", "core", PALETTE[0]), ("gpuledger replay", "typed", PALETTE[1]),
              ("gpuledger audit", "audit", PALETTE[2])]
    top = nice_max(max(r[k] for r in rows for _, k, _ in series)) or 1.0

    def px(i: int) -> float:
        return pad_l + w * i / max(len(xs) - 1, 1)

    def py(v: float) -> float:
        return pad_t + h - h * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">',
             f'<text x="{pad_l}" y="14" font-size="12" font-weight="600">{escape(title)}</text>']
    for frac in (0, 0.25, 0.5, 0.75, 1):
        y = py(top * frac)
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" text-anchor="end">{top * frac:g}</text>')
    parts.append(f'<text x="10" y="{pad_t + h / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 10 {pad_t + h / 2:.1f})">CPU µs per event</text>')
    for i, x in enumerate(xs):
        parts.append(f'<text x="{px(i):.1f}" y="{pad_t + h + 13}" text-anchor="middle">{escape(x)}</text>')
    parts.append(f'<text x="{pad_l + w / 2:.1f}" y="{pad_t + h + 27}" text-anchor="middle">{escape(x_label)}</text>')
    for j, (label, key, colour) in enumerate(series):
        points = " ".join(f"{px(i):.1f},{py(r[key]):.1f}" for i, r in enumerate(rows))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5">'
                     f"<title>{escape(label)}</title></polyline>")
        for i, r in enumerate(rows):
            parts.append(f'<circle cx="{px(i):.1f}" cy="{py(r[key]):.1f}" r="2.5" fill="{colour}"/>')
        lx = pad_l + j * 150
        parts.append(f'<line x1="{lx}" x2="{lx + 14}" y1="{height - 10}" y2="{height - 10}" stroke="{colour}" '
                     'stroke-width="2"/>')
        parts.append(f'<text x="{lx + 18}" y="{height - 7}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def draw(results: dict[str, list[dict[str, Any]]], demands: list[str], out: Path) -> None:
    """Write both series as one SVG (what is measured so far)."""
    charts = []
    if results["workloads"]:
        charts.append(chart("Cost per event as the month grows (2.5x demand, 7 days)",
                            [f"{m['events'] / 1e6:.2f} M" for m in results["workloads"]],
                            [m["per_event_us"] for m in results["workloads"]], "events in the log"))
    if results["backlog"]:
        charts.append(chart("Cost per event as the backlog grows (256 GPUs, 7 days)",
                            [f"{d}x" for d in demands[: len(results["backlog"])]],
                            [m["per_event_us"] for m in results["backlog"]], "demand: submitted GPU-hours ÷ capacity"))
    height = 240 * len(charts)
    body = "".join(f'<g transform="translate(0 {240 * i})">{c}</g>' for i, c in enumerate(charts))
    out.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="520" height="{height}" '
                   f'viewBox="0 0 520 {height}">{body}</svg>\n', encoding="utf-8")


def main() -> None:
    """Replay each scaling month once (``BENCH_REPEAT`` times), print the cost per event, draw the chart."""
    repeat = int(os.environ.get("BENCH_REPEAT", "1"))
    sizes = [s.strip() for s in os.environ.get("BENCH_SCALING_SIZES", "10,25,50,100,200").split(",") if s.strip()]
    demands = [d.strip() for d in os.environ.get("BENCH_SCALING_DEMANDS", "1.2,2.5,4").split(",") if d.strip()]
    out = Path(os.environ.get("BENCH_SCALING_SVG") or ROOT / "docs" / "scaling.svg")
    results: dict[str, list[dict[str, Any]]] = {"workloads": [], "backlog": []}
    with tempfile.TemporaryDirectory(prefix="bench-scaling-", dir=os.environ.get("BENCH_TMP")) as tmp:
        for series, names in (("backlog", [f"d{d}" for d in demands]), ("workloads", [f"w{s}" for s in sizes])):
            for name in names:
                m = measure(name, repeat, Path(tmp), split=False)
                m["per_event_us"] = per_event(m)
                results[series].append(m)
                us = m["per_event_us"]
                print(f"{series:<9} {m['label']}: {m['events']:,} events, {m['sim_days']:.1f} simulated days; "
                      f"µs/event core {us['core']:.1f}, replay as typed {us['typed']:.1f}, audit {us['audit']:.1f}; "
                      f"load {m['runs'][0]['load']:.1f}", flush=True)
                draw(results, demands, out)
    print(f"wrote {out}")
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
