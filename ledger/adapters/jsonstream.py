"""Read JSON records with their line numbers: a JSON array, JSON Lines, or concatenated objects.

``kubectl get -w -o json`` prints pretty-printed objects one after another; Philly job lists are
one big array; exports are often JSON Lines. All three come out as ``(line, value)`` pairs, where
``line`` is the line the value starts on. A value that does not parse comes out as
``(line, JsonSyntaxError)`` and reading resumes at the next line that opens an object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["JsonSyntaxError", "iter_json_values"]

_decoder = json.JSONDecoder()
_SPACE = re.compile(r"[\s,]*")
_NEXT_OBJECT = re.compile(r"\n[ \t]*\{")


class JsonSyntaxError(ValueError):
    """Text that is not JSON, at a known place."""


def iter_json_values(text: str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, value)`` for each top-level value (each element when the text is one array)."""
    pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    in_array = text.startswith("[", pos)
    if in_array:
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    line = 1 + text.count("\n", 0, pos)
    last = pos
    end = len(text)
    while pos < end:
        if in_array and text[pos] == "]":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            in_array = False
            continue
        line += text.count("\n", last, pos)
        last = pos
        try:
            value, nxt = _decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            yield line, JsonSyntaxError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
            m = _NEXT_OBJECT.search(text, pos)
            if m is None:
                return
            pos = m.start() + 1
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            continue
        yield line, value
        pos = _SPACE.match(text, nxt).end()  # type: ignore[union-attr]
