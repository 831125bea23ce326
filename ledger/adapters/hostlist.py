"""Expand Slurm host lists and array-task ranges: ``cpn-f13-03-[01-02],k10n26s01`` -> host names."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["expand_hostlist", "expand_ranges"]

# a host name with an optional bracketed range list, then a separator or the end
_ITEM = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)(?:,|$)")


def expand_ranges(spec: str) -> list[str]:
    """Expand '1-3,5,07-08' into ['1', '2', '3', '5', '07', '08'] (zero padding kept); ValueError if malformed."""
    out: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"range {part!r} is not N or N-M")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a or b - a > 100_000:
            raise ValueError(f"range {part!r} runs backwards or is implausibly long")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


@lru_cache(maxsize=16_384)
def expand_hostlist(text: str) -> tuple[str, ...]:
    """Return the host names a Slurm node list names, in order; ValueError if malformed."""
    text = text.strip()
    if "[" not in text:
        return tuple(h for h in text.split(",") if h)
    hosts: list[str] = []
    pos = 0
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"node list {text!r} is malformed near {text[pos : pos + 20]!r}")
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            if prefix:
                hosts.append(prefix + suffix)
        else:
            hosts.extend(prefix + r + suffix for r in expand_ranges(ranges))
        pos = m.end()
    return tuple(hosts)
