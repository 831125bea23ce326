"""A one-line progress bar on stderr: simulated days done of the days the inputs span."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_DAY_US = 86_400 * 1_000_000


class ProgressBar:
    """Show ``label [#####.....] day 12.3 of 30.0`` once a run has taken ``after_s`` of wall time."""

    def __init__(self, label: str, *, stream: TextIO | None = None, after_s: float = 1.0, width: int = 30):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.after_s = after_s
        self.width = width
        self._t0 = time.perf_counter()
        self._shown = False

    def __call__(self, first_us: int, now_us: int, last_input_us: int) -> None:
        """Redraw the bar for simulated time ``now_us`` between ``first_us`` and ``last_input_us``."""
        if time.perf_counter() - self._t0 < self.after_s:
            return
        total = max(last_input_us - first_us, 1)
        done = max(now_us - first_us, 0)
        frac = min(done / total, 1.0)
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] day {done / _DAY_US:5.1f} of {total / _DAY_US:.1f}")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the bar's line if it was ever drawn."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


__all__ = ["ProgressBar"]
