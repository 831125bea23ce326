"""The project root, for tests that run the examples under ``examples/``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
