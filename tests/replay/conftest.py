"""Where the shared contract files are: ``../shared`` beside the project root (GPULEDGER_SHARED overrides)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("GPULEDGER_SHARED") or ROOT.parent / "shared")
CONTRACT = SHARED / "contract"
