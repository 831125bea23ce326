"""Small inline SVG charts for the HTML report (no scripts, no network).

Every chart has a legend and labelled axes; time axes take ISO 8601 times and mark days with
dates. Charts drawn side by side take the same scale from their caller (``y_max``, ``x_range``,
``top``), so two runs can be compared by eye. Charts scale to their column (``viewBox``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e",
           "#9498a0")
SHORT_COLOUR = "#d62728"  # a shortfall: a team under 95% of what it was owed
OK_COLOUR = "#4c956c"


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def nice_max(x: float) -> float:
    """Return a round axis maximum at or just above ``x`` (1,024 -> 1,200, not 2,000; quarters stay round)."""
    if x <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 1.2, 1.6, 2.0, 2.4, 3.0, 4.0, 6.0, 8.0, 10.0):  # each splits into round quarters
        if m * step >= x * (1 - 1e-9):
            return m * step
    return 10.0 * step


def _open(width: int, height: int, title: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{escape(title)}">',
            f'<text x="8" y="14" class="t">{escape(title)}</text>']


def _legend(items: Sequence[tuple[str, str, str]], x: float, y: float, step: float = 0) -> list[str]:
    """Return legend entries (label, colour, style: 'fill' | 'line' | 'dash') in a row from (x, y)."""
    parts = []
    for label, colour, style in items:
        if style == "fill":
            parts.append(f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="14" height="10" fill="{colour}" '
                         'fill-opacity="0.5"/>')
        else:
            dash = ' stroke-dasharray="4 2"' if style == "dash" else ""
            parts.append(f'<line x1="{x:.1f}" x2="{x + 14:.1f}" y1="{y - 3:.1f}" y2="{y - 3:.1f}" '
                         f'stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 18:.1f}" y="{y + 1:.1f}" class="a">{escape(label)}</text>')
        x += step or (30 + 6 * len(label))
    return parts


def _day_ticks(times: Sequence[str]) -> list[tuple[int, str]]:
    """Return (index, 'Mar 02') for the days in ``times`` (ISO strings), thinned to at most 8 labels."""
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    days = [(i, t) for i, t in enumerate(times) if i == 0 or t[:10] != times[i - 1][:10]]
    every = max(1, math.ceil(len(days) / 8))
    return [(i, f"{months[int(t[5:7]) - 1]} {t[8:10]}") for i, t in days[::every]]


def line_chart(
    series: Sequence[tuple[str, Sequence[float], str, str]],
    times: Sequence[str],
    *,
    width: int = 520,
    height: int = 200,
    title: str = "",
    y_max: float | None = None,
    y_label: str = "",
    precision: int = 1,
) -> str:
    """Return an SVG time chart; each series is (label, values, colour, style 'fill' | 'line' | 'dash').

    ``times`` are the ISO 8601 times of the points (days are marked with dates); ``y_max`` fixes the
    scale (give every chart of a comparison the same one).
    """
    pad_l, pad_r, pad_t, pad_b = 52, 12, 24, 44
    n = len(times)
    top = y_max if y_max is not None else nice_max(max((max(v, default=0) for _, v, _, _ in series), default=0))
    top = top or 1.0
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(i: int) -> float:
        return pad_l + w * i / max(n - 1, 1)

    def pt(i: int, y: float) -> str:
        return f"{px(i):.{precision}f},{pad_t + h - h * min(max(y, 0.0), top) / top:.{precision}f}"

    parts = _open(width, height, title)
    for frac in (0, 0.25, 0.5, 0.75, 1):
        y = pad_t + h - h * frac
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" class="a" text-anchor="end">{_fmt(top * frac)}</text>')
    if y_label:
        parts.append(f'<text x="10" y="{pad_t + h / 2:.1f}" class="a" text-anchor="middle" '
                     f'transform="rotate(-90 10 {pad_t + h / 2:.1f})">{escape(y_label)}</text>')
    for i, label in _day_ticks(times):
        parts.append(f'<line x1="{px(i):.1f}" x2="{px(i):.1f}" y1="{pad_t}" y2="{pad_t + h}" class="g"/>')
        # a date at the right edge ends there rather than being cut in half by the chart's border
        anchor = "end" if px(i) > width - pad_r - 16 else "middle"
        parts.append(f'<text x="{px(i):.1f}" y="{pad_t + h + 13}" class="a" text-anchor="{anchor}">{label}</text>')
    for label, values, colour, style in series:
        if not values:
            continue
        points = " ".join(pt(i, v) for i, v in enumerate(values))
        if style == "fill":
            base = f"{px(len(values) - 1):.1f},{pad_t + h} {pad_l},{pad_t + h}"
            parts.append(f'<polygon points="{points} {base}" fill="{colour}" fill-opacity="0.35" stroke="none">'
                         f"<title>{escape(label)}</title></polygon>")
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1"/>')
        else:
            dash = ' stroke-dasharray="4 2"' if style == "dash" else ""
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}>'
                         f"<title>{escape(label)}</title></polyline>")
    parts += _legend([(label, colour, style) for label, _, colour, style in series], pad_l, height - 8)
    parts.append("</svg>")
    return "".join(parts)


def cdf_range(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> tuple[float, float]:
    """Return the wait range (seconds) a cumulative chart of ``curves`` spans (share it across charts)."""
    values = [v for _, vs in curves.values() for v in vs if v > 0]
    lo = max(min(values, default=1.0), 1.0)
    return lo, max(max(values, default=10.0), lo * 10)


def cdf_chart(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], width: int = 520, height: int = 260,
              title: str = "", x_range: tuple[float, float] | None = None) -> str:
    """Return an SVG chart of cumulative distributions: label -> (quantiles, values), log-scaled x."""
    pad_l, pad_r, pad_t, pad_b = 42, 120, 24, 34
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    lo, hi = x_range or cdf_range(curves)
    llo, lhi = math.log10(lo), math.log10(hi)

    def x(v: float) -> float:
        return pad_l + w * (math.log10(min(max(v, lo), hi)) - llo) / (lhi - llo)

    parts = _open(width, height, title)
    for frac in (0, 0.5, 0.9, 1):
        y = pad_t + h - h * frac
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" class="a" text-anchor="end">{frac:.0%}</text>')
    for secs, label in ((1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"), (6 * 3600, "6 h"),
                        (86400, "1 d"), (7 * 86400, "7 d"), (30 * 86400, "30 d")):
        if lo <= secs <= hi:
            parts.append(f'<line x1="{x(secs):.1f}" x2="{x(secs):.1f}" y1="{pad_t}" y2="{pad_t + h}" class="g"/>')
            parts.append(f'<text x="{x(secs):.1f}" y="{pad_t + h + 14}" class="a" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{pad_l + w / 2}" y="{height - 4}" class="a" text-anchor="middle">queue wait (log scale)'
                 "</text>")
    for k, (label, (qs, vs)) in enumerate(curves.items()):
        colour = PALETTE[k % len(PALETTE)]
        pts = " ".join(f"{x(v):.1f},{pad_t + h - h * q:.1f}" for q, v in zip(qs, vs, strict=True))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2">'
                     f"<title>{escape(label)}</title></polyline>")
        parts += _legend([(label, colour, "line")], pad_l + w + 12, pad_t + 12 + 16 * k)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(bars: Sequence[tuple[str, float, float]], width: int = 520, title: str = "",
              labels: tuple[str, str] = ("", ""), top: float | None = None) -> str:
    """Return an SVG horizontal bar chart of (label, main value, second value) pairs, the second stacked."""
    row = 20
    # Room on the left for the longest label (about 6 px a character at the axis font size).
    pad_l, pad_r, pad_t = max(150, min(300, 12 + 6 * max((len(b[0]) for b in bars), default=0))), 60, 24
    width = max(width, pad_l + 370)
    height = pad_t + row * max(len(bars), 1) + 26
    scale = top or nice_max(max((a + b for _, a, b in bars), default=0))
    w = width - pad_l - pad_r
    parts = _open(width, height, title)
    for i, (label, a, b) in enumerate(bars):
        y = pad_t + i * row
        wa, wb = w * a / scale, w * b / scale
        parts.append(f'<text x="{pad_l - 6}" y="{y + 13}" class="a" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{pad_l}" y="{y + 3}" width="{wa:.1f}" height="{row - 6}" fill="{PALETTE[2]}">'
                     f"<title>{escape(labels[0])}: {a:.2f}</title></rect>")
        parts.append(f'<rect x="{pad_l + wa:.1f}" y="{y + 3}" width="{wb:.1f}" height="{row - 6}" '
                     f'fill="{PALETTE[1]}"><title>{escape(labels[1])}: {b:.2f}</title></rect>')
        parts.append(f'<text x="{pad_l + wa + wb + 4:.1f}" y="{y + 13}" class="a">{a + b:,.1f}</text>')
    ly = pad_t + row * max(len(bars), 1) + 16
    parts += _legend([(labels[0], PALETTE[2], "fill"), (labels[1], PALETTE[1], "fill")], pad_l, ly, 170)
    parts.append("</svg>")
    return "".join(parts)


def ratio_bars(bars: Sequence[tuple[str, float, str]], width: int = 520, title: str = "",
               threshold: float = 0.95) -> str:
    """Return horizontal bars of ratios (label, ratio, note) on a 0-100% scale; those under ``threshold`` in red."""
    row = 20
    pad_l, pad_r, pad_t = max(150, min(300, 12 + 6 * max((len(b[0]) for b in bars), default=0))), 150, 24
    width = max(width, pad_l + 470)
    height = pad_t + row * max(len(bars), 1) + 40
    w = width - pad_l - pad_r
    parts = _open(width, height, title)
    bottom = pad_t + row * max(len(bars), 1)
    for frac in (0, 0.25, 0.5, 0.75, 1):
        x = pad_l + w * frac
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{pad_t}" y2="{bottom}" class="g"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 12}" class="a" text-anchor="middle">{frac:.0%}</text>')
    for i, (label, ratio, note) in enumerate(bars):
        y = pad_t + i * row
        colour = SHORT_COLOUR if ratio < threshold else OK_COLOUR
        parts.append(f'<text x="{pad_l - 6}" y="{y + 13}" class="a" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{pad_l}" y="{y + 3}" width="{w * min(ratio, 1.0):.1f}" height="{row - 6}" '
                     f'fill="{colour}"><title>{escape(label)}: {ratio:.1%} {escape(note)}</title></rect>')
        parts.append(f'<text x="{pad_l + w + 6:.1f}" y="{y + 13}" class="a">{ratio:.1%} {escape(note)}</text>')
    x95 = pad_l + w * threshold
    parts.append(f'<line x1="{x95:.1f}" x2="{x95:.1f}" y1="{pad_t - 2}" y2="{bottom}" stroke="#333" '
                 'stroke-dasharray="3 2"/>')
    parts += _legend([(f"under {threshold:.0%} of owed", SHORT_COLOUR, "fill"),
                      (f"{threshold:.0%} or more", OK_COLOUR, "fill"), (f"{threshold:.0%} mark", "#333", "dash")],
                     pad_l, height - 8, 150)
    parts.append("</svg>")
    return "".join(parts)


def pareto_front(points: Sequence[tuple[float, float]], x_low: bool = True, y_low: bool = False) -> list[int]:
    """Return the indices of the points no other point beats on both axes, in order along x."""
    def better(a: tuple[float, float], b: tuple[float, float]) -> bool:  # a at least as good as b, better on one
        ax, ay = (a[0] if x_low else -a[0]), (a[1] if y_low else -a[1])
        bx, by = (b[0] if x_low else -b[0]), (b[1] if y_low else -b[1])
        return ax <= bx and ay <= by and (ax < bx or ay < by)

    front = [i for i, p in enumerate(points) if not any(better(q, p) for q in points)]
    return sorted(front, key=lambda i: (points[i][0], points[i][1]))


def scatter_chart(points: Sequence[tuple[str, float, float]], *, title: str, x_label: str, y_label: str,
                  x_low: bool = True, y_low: bool = False, x_share: bool = False, y_share: bool = False,
                  width: int = 460, height: int = 340) -> str:
    """Return an SVG scatter of (label, x, y) points, one per setting, with the Pareto front drawn through.

    ``x_low`` / ``y_low`` say which way is better on each axis; the front joins the points that no
    other point beats on both. Each point is numbered as its row in the table beside the chart.
    """
    pad_l, pad_r, pad_t, pad_b = 58, 16, 24, 58
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    xs, ys = [p[1] for p in points], [p[2] for p in points]
    x_hi, y_hi = nice_max(max(xs, default=0.0)), nice_max(max(ys, default=0.0))

    def px(x: float) -> float:
        return pad_l + w * x / x_hi

    def py(y: float) -> float:
        return pad_t + h - h * y / y_hi

    def tick(v: float, share: bool) -> str:
        if not share or v == 0:
            return _fmt(v)
        return f"{v:.0%}" if v >= 0.1 else f"{v:.1%}"

    parts = _open(width, height, title)
    for frac in (0, 0.25, 0.5, 0.75, 1):
        x, y = pad_l + w * frac, pad_t + h - h * frac
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{pad_t}" y2="{pad_t + h}" class="g"/>')
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        anchor = "end" if frac == 1 else "middle"  # the last label ends at the axis, inside the chart
        parts.append(f'<text x="{x:.1f}" y="{pad_t + h + 13}" class="a" text-anchor="{anchor}">'
                     f"{tick(x_hi * frac, x_share)}</text>")
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" class="a" text-anchor="end">'
                     f"{tick(y_hi * frac, y_share)}</text>")
    parts.append(f'<text x="{pad_l + w / 2:.1f}" y="{pad_t + h + 30}" class="a" text-anchor="middle">'
                 f"{escape(x_label)} ({'↓' if x_low else '↑'} better)</text>")
    parts.append(f'<text x="12" y="{pad_t + h / 2:.1f}" class="a" text-anchor="middle" '
                 f'transform="rotate(-90 12 {pad_t + h / 2:.1f})">{escape(y_label)} '
                 f"({'↓' if y_low else '↑'} better)</text>")
    front = pareto_front([(x, y) for _, x, y in points], x_low, y_low)
    if len(front) > 1:
        line = " ".join(f"{px(xs[i]):.1f},{py(ys[i]):.1f}" for i in front)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" '
                     'stroke-dasharray="5 3"><title>Pareto front</title></polyline>')
    at: dict[tuple[float, float], list[int]] = {}
    for i, (_, x, y) in enumerate(points):  # settings with equal results share one point, numbered together
        at.setdefault((x, y), []).append(i)
    for (x, y), same in at.items():
        colour = PALETTE[0] if same[0] in front else "#9498a0"
        names = "; ".join(f"{i + 1}. {points[i][0]}" for i in same)
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="5" fill="{colour}">'
                     f"<title>{escape(names)}: {tick(x, x_share)}, {tick(y, y_share)}</title></circle>")
        parts.append(f'<text x="{px(x) + 7:.1f}" y="{py(y) - 5:.1f}" class="a">'
                     f"{', '.join(str(i + 1) for i in same)}</text>")
    parts += _legend([("on the Pareto front", PALETTE[0], "line"), ("beaten on both axes", "#9498a0", "fill")],
                     pad_l, height - 8, 170)
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["OK_COLOUR", "PALETTE", "SHORT_COLOUR", "bar_chart", "cdf_chart", "cdf_range", "line_chart", "nice_max",
           "pareto_front", "ratio_bars", "scatter_chart"]
