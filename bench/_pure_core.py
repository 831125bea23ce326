"""Load the decision core, the replay driver and the log from their Python sources even where they are compiled.

``install()`` sets ``GPULEDGER_PURE=1`` before ``ledger.core``, ``ledger.replay`` and ``ledger.log`` are imported
(``ledger/buildcheck.py``), so one checkout can run both builds side by side (in two processes):
the compiled-build benchmark and tests compare their speed and their decisions that way.
"""

from __future__ import annotations

import os
import sys

__all__ = ["install"]


def install() -> None:
    """Make every later import of the compiled packages load their Python sources; call before importing them."""
    if any(name in sys.modules for name in ("ledger.core", "ledger.replay", "ledger.log")):
        raise RuntimeError("ledger.core, ledger.replay or ledger.log is already imported: install the finder first")
    os.environ["GPULEDGER_PURE"] = "1"
