"""Load the decision core and the replay driver from their Python sources even where they are compiled.

``install()`` puts a finder first on ``sys.meta_path`` that resolves ``ledger.core.*`` modules and
the compiled ones of ``ledger.replay`` to their ``.py`` files only, so one checkout can run both
builds side by side (in two processes): the compiled-core benchmark and test compare their speed
and their decisions that way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader
from types import ModuleType

__all__ = ["install"]

_COMPILED_REPLAY = {"ledger.replay.driver", "ledger.replay.logwriter"}  # setup.py's REPLAY


class _PureCore(MetaPathFinder):
    """A meta path finder: ``ledger.core`` submodules and the replay's compiled ones from source, the rest as usual."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not (name.startswith("ledger.core.") or name in _COMPILED_REPLAY) or not path:
            return None
        return FileFinder(path[0], (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(name, target)


def install() -> None:
    """Make every later import of ``ledger.core.*`` (and the replay driver) load the Python sources; call first."""
    if "ledger.core" in sys.modules or "ledger.replay" in sys.modules:
        raise RuntimeError("ledger.core or ledger.replay is already imported: install the pure-core finder first")
    sys.meta_path.insert(0, _PureCore())
