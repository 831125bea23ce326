"""Small inline SVG charts for the HTML report (no scripts, no network)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e",
           "#9498a0")


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _nice_max(x: float) -> float:
    if x <= 0:
        return 1.0
    step = 10 ** (len(str(int(x))) - 1) if x >= 1 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= x:
            return m * step
    return 10 * step


def line_chart(
    series: Sequence[tuple[str, Sequence[float], str, bool]],
    width: int = 320, height: int = 140, title: str = "", x_labels: tuple[str, str] = ("", ""),
    y_max: float | None = None, precision: int = 1,
) -> str:
    """Return an SVG line chart; each series is (label, values, colour, filled); coordinates to ``precision`` places."""
    pad_l, pad_r, pad_t, pad_b = 42, 8, 18, 22
    n = max((len(v) for _, v, _, _ in series), default=0)
    top = _nice_max(y_max if y_max is not None else max((max(v, default=0) for _, v, _, _ in series), default=0))
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def pt(i: int, y: float) -> str:
        x = pad_l + (w * i / max(n - 1, 1))
        return f"{x:.{precision}f},{pad_t + h - h * min(y, top) / top:.{precision}f}"

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<text x="{pad_l}" y="12" class="t">{escape(title)}</text>']
    for frac in (0, 0.5, 1):
        y = pad_t + h - h * frac
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" class="a" text-anchor="end">{_fmt(top * frac)}</text>')
    parts.append(f'<text x="{pad_l}" y="{height - 6}" class="a">{escape(x_labels[0])}</text>')
    parts.append(f'<text x="{pad_l + w}" y="{height - 6}" class="a" text-anchor="end">{escape(x_labels[1])}</text>')
    for label, values, colour, filled in series:
        if not values:
            continue
        points = " ".join(pt(i, v) for i, v in enumerate(values))
        if filled:
            base = f"{pad_l + w * (len(values) - 1) / max(n - 1, 1):.1f},{pad_t + h} {pad_l},{pad_t + h}"
            parts.append(f'<polygon points="{points} {base}" fill="{colour}" fill-opacity="0.35" stroke="none">'
                         f"<title>{escape(label)}</title></polygon>")
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1"/>')
        else:
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5" '
                         f'stroke-dasharray="4 2"><title>{escape(label)}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def cdf_chart(curves: dict[str, tuple[Sequence[float], Sequence[float]]], width: int = 520, height: int = 260,
              title: str = "") -> str:
    """Return an SVG chart of cumulative distributions: label -> (quantiles, values), log-scaled x."""
    import math

    pad_l, pad_r, pad_t, pad_b = 42, 110, 20, 34
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    all_v = [v for _, vs in curves.values() for v in vs if v > 0]
    lo = max(min(all_v, default=1.0), 1.0)
    hi = max(max(all_v, default=10.0), lo * 10)
    llo, lhi = math.log10(lo), math.log10(hi)

    def x(v: float) -> float:
        return pad_l + w * (math.log10(max(v, lo)) - llo) / (lhi - llo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">', f'<text x="{pad_l}" y="13" class="t">{escape(title)}</text>']
    for frac in (0, 0.5, 0.9, 1):
        y = pad_t + h - h * frac
        parts.append(f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>')
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" class="a" text-anchor="end">{frac:.0%}</text>')
    for secs, label in ((60, "1 min"), (600, "10 min"), (3600, "1 h"), (6 * 3600, "6 h"), (86400, "1 d"),
                        (7 * 86400, "7 d")):
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
        ly = pad_t + 12 + 16 * k
        parts.append(f'<rect x="{pad_l + w + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{pad_l + w + 26}" y="{ly + 1}" class="a">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(bars: Sequence[tuple[str, float, float]], width: int = 520, title: str = "",
              labels: tuple[str, str] = ("", "")) -> str:
    """Return an SVG horizontal bar chart of (label, main value, second value) pairs, the second stacked."""
    row = 20
    # Room on the left for the longest label (about 6 px a character at the axis font size).
    pad_l, pad_r, pad_t = max(150, min(300, 12 + 6 * max((len(b[0]) for b in bars), default=0))), 60, 22
    width = max(width, pad_l + 370)
    height = pad_t + row * max(len(bars), 1) + 24
    top = _nice_max(max((a + b for _, a, b in bars), default=0))
    w = width - pad_l - pad_r
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">', f'<text x="8" y="13" class="t">{escape(title)}</text>']
    for i, (label, a, b) in enumerate(bars):
        y = pad_t + i * row
        wa, wb = w * a / top, w * b / top
        parts.append(f'<text x="{pad_l - 6}" y="{y + 13}" class="a" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{pad_l}" y="{y + 3}" width="{wa:.1f}" height="{row - 6}" fill="{PALETTE[2]}">'
                     f"<title>{escape(labels[0])}: {a:.2f}</title></rect>")
        parts.append(f'<rect x="{pad_l + wa:.1f}" y="{y + 3}" width="{wb:.1f}" height="{row - 6}" '
                     f'fill="{PALETTE[1]}"><title>{escape(labels[1])}: {b:.2f}</title></rect>')
        parts.append(f'<text x="{pad_l + wa + wb + 4:.1f}" y="{y + 13}" class="a">{a + b:,.1f}</text>')
    ly = pad_t + row * max(len(bars), 1) + 14
    for k, text in enumerate(labels):
        parts.append(f'<rect x="{pad_l + 170 * k}" y="{ly - 8}" width="10" height="10" fill="{PALETTE[2 - k]}"/>')
        parts.append(f'<text x="{pad_l + 170 * k + 14}" y="{ly + 1}" class="a">{escape(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["PALETTE", "bar_chart", "cdf_chart", "line_chart"]
