"""Just enough PromQL reading to find the metric names and labels a dashboard query uses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


@dataclass
class Query:
    """Metric selectors (name -> label names matched) and grouping labels of one PromQL expression."""

    selectors: dict[str, set[str]] = field(default_factory=dict)
    grouping: set[str] = field(default_factory=set)
    label_values: dict[str, set[str]] = field(default_factory=dict)


def parse(expr: str) -> Query:
    """Return the selectors and grouping labels of a PromQL expression."""
    q = Query()
    text = re.sub(r"\[[^\]]*\]", " ", expr)  # range vectors
    for labels in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", text):
        q.grouping |= {x.strip() for x in labels.split(",") if x.strip()}
    text = re.sub(r"\b(?:by|without)\s*\([^)]*\)", " ", text)
    pos = 0
    for m in _IDENT.finditer(text):
        if m.start() < pos:
            continue
        name, rest = m.group(), text[m.end() :]
        if rest.lstrip().startswith("(") or name in KEYWORDS:
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue
        labels: set[str] = set()
        if rest.startswith("{"):
            body = rest[1 : rest.index("}")]
            pos = m.end() + len(body) + 2
            for lm in re.finditer(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"', body):
                labels.add(lm.group(1))
                q.label_values.setdefault(lm.group(1), set()).add(lm.group(3))
        q.selectors.setdefault(name, set()).update(labels)
    return q
