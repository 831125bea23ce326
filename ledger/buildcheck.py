"""Refuse the optional compiled build (``make fast``) where it is older than the sources it was built from."""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES

__all__ = ["refuse_stale_compiled"]


def refuse_stale_compiled(here: str) -> None:
    """Raise ImportError if a compiled module in directory ``here`` is older than its source.

    The compiled modules sit next to their sources (an editable install) and shadow them: a stale
    one would run the code as it was, not as it reads.
    """
    for name in os.listdir(here):
        for suffix in EXTENSION_SUFFIXES:
            if not name.endswith(suffix):
                continue
            built, source = os.path.join(here, name), os.path.join(here, name[: -len(suffix)] + ".py")
            if os.path.exists(source) and os.path.getmtime(source) > os.path.getmtime(built):
                raise ImportError(
                    f"{built} is older than {source}: rebuild the compiled modules with `make fast`, "
                    "or go back to pure Python with `make pure`"
                )
