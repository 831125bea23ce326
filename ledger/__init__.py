"""gpuledger: an event-sourced ledger for shared GPU clusters run on budgets instead of priorities.

``from ledger import Ledger`` gives the SDK a scheduler calls (``ledger.sdk.Ledger``).
"""

from __future__ import annotations

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
