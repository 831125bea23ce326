"""How the core's objects go into a snapshot: as a dict of their fields, in both builds.

Python pickles a class with ``__slots__`` as a ``(None, {slot: value})`` pair, and the
optional compiled build (mypyc, see ``setup.py``) as a plain dict; classes that define their
state with these two functions pickle the same way in both, so a snapshot written by one build
restores in the other.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

__all__ = ["field_state", "set_fields"]

_NAMES: dict[type, tuple[str, ...]] = {}  # dataclass -> its field names, in declaration order


def field_state(obj: Any, names: tuple[str, ...] = ()) -> dict[str, object]:
    """Return ``obj``'s fields (a dataclass's own when ``names`` is empty) as a dict, in a fixed order."""
    if not names:
        cls = type(obj)
        names = _NAMES.get(cls) or _NAMES.setdefault(cls, tuple(f.name for f in fields(obj)))
    return {name: getattr(obj, name) for name in names}


def set_fields(obj: object, state: object) -> None:
    """Set the fields held in ``state`` on ``obj`` (a dict, or the slots pair of an older snapshot)."""
    if isinstance(state, tuple):  # Python's default for __slots__ classes: (None, {slot: value})
        state = state[1]
    assert isinstance(state, dict)
    for name, value in state.items():
        setattr(obj, name, value)
