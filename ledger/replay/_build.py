"""Build events the replay itself made, from values it already knows are valid, without re-validating.

Pydantic's ``model_construct`` is slower than validation for these small models; a replay of a
month makes about a million events, so this saves seconds. Only code in ``ledger.replay`` whose
values come from validated inputs (or from its own arithmetic on them) may use it; tests
re-validate every event of a replay with ``ledger.events.validated``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ledger.events import Event

E = TypeVar("E", bound=Event)


def trusted(cls: type[E], fields: dict[str, Any]) -> E:
    """Return an instance of ``cls`` holding ``fields`` (every field, defaults included) as they are."""
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    object.__setattr__(obj, "__pydantic_fields_set__", set(fields))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


__all__ = ["trusted"]
