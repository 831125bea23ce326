"""How the core's objects go into a snapshot, the same way in the pure and the compiled build.

Python pickles a class with ``__slots__`` as a ``(None, {slot: value})`` pair and the optional
compiled build (mypyc, see ``setup.py``) as a plain dict, and a compiled class can only be
unpickled through its ``__init__``. So the core's dataclasses pickle as a call of the class
with every field (``rebuilt_from_fields``), and its other classes, whose ``__init__`` takes no
required argument, as a dict of named fields (``field_state``/``set_fields``): a snapshot
written by either build restores in the other.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

__all__ = ["field_state", "rebuilt_from_fields", "set_fields"]

_NAMES: dict[type, tuple[str, ...]] = {}  # dataclass -> its field names, in declaration order


def rebuilt_from_fields(obj: Any) -> tuple[type, tuple[object, ...]]:
    """Return ``__reduce__``'s answer for a dataclass: call the class again with every field's value."""
    cls = type(obj)
    names = _NAMES.get(cls) or _NAMES.setdefault(cls, tuple(f.name for f in fields(obj)))
    return cls, tuple(getattr(obj, name) for name in names)


def field_state(obj: object, names: tuple[str, ...]) -> dict[str, object]:
    """Return the named fields of ``obj`` as a dict, in the given order (the order of the bytes)."""
    return {name: getattr(obj, name) for name in names}


def set_fields(obj: object, state: object) -> None:
    """Set the fields held in ``state`` (a dict of named fields) on ``obj``."""
    assert isinstance(state, dict)
    for name, value in state.items():
        setattr(obj, name, value)
