"""Where the contract check and the real traces live outside the project: GPULEDGER_SHARED, else beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("GPULEDGER_SHARED") or ROOT.parent / "shared")
CONTRACT = SHARED / "contract"
