"""Load the decision core and the replay driver from their Python sources even where they are compiled.

``install()`` sets ``GPULEDGER_PURE=1`` before ``ledger.core`` and ``ledger.replay`` are imported
(``ledger/buildcheck.py``), so one checkout can run both builds side by side (in two processes):
the compiled-build benchmark and tests compare their speed and their decisions that way.
"""

from __future__ import annotations

import os
import sys

__all__ = ["install"]


def install() -> None:
    """Make every later import of ``ledger.core`` and ``ledger.replay`` load the Python sources; call first."""
    if "ledger.core" in sys.modules or "ledger.replay" in sys.modules:
        raise RuntimeError("ledger.core or ledger.replay is already imported: install the pure-core finder first")
    os.environ["GPULEDGER_PURE"] = "1"
