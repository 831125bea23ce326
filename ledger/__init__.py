"""gpuledger: an event-sourced ledger for shared GPU clusters run on budgets instead of priorities.

``from ledger import Ledger`` gives the SDK a scheduler calls (``ledger.sdk.Ledger``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.sdk import Ledger

__all__ = ["Ledger"]


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import ledger.events` (and the CLI start-up) stay light.
    if name == "Ledger":
        from ledger.sdk import Ledger

        return Ledger
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


class _BuildCheck:
    """A meta path finder that finds nothing: it runs the build check as a compiled package first loads.

    Where a source of ``ledger.core``, ``ledger.replay`` or ``ledger.log`` no longer matches what was
    compiled, that package runs its Python sources (``ledger.buildcheck.use_sources_where_stale``).
    The check is made here, by the import system, so that the packages themselves (the decision core
    has no IO) neither read files nor install hooks when they load.
    """

    def __init__(self) -> None:
        self.pending = {"ledger.core", "ledger.replay", "ledger.log"}  # ledger.buildcheck.COMPILED_PACKAGES

    def find_spec(self, name: str, path: Sequence[str] | None, target: object = None) -> None:
        if name in self.pending and path:
            self.pending.discard(name)
            from ledger.buildcheck import use_sources_where_stale

            use_sources_where_stale(name, os.path.join(path[0], name.rpartition(".")[2]))


if not any(isinstance(finder, _BuildCheck) for finder in sys.meta_path):
    sys.meta_path.insert(0, _BuildCheck())
