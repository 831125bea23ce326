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
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._next_line = 0.0  # not a terminal: a plain line every few seconds instead of redrawing

    def __call__(self, first_us: int, now_us: int, last_input_us: int) -> None:
        """Redraw the bar for simulated time ``now_us`` between ``first_us`` and ``last_input_us``."""
        elapsed = time.perf_counter() - self._t0
        if elapsed < self.after_s or (not self._tty and elapsed < self._next_line):
            return
        total = max(last_input_us - first_us, 1)
        done = max(now_us - first_us, 0)
        frac = min(done / total, 1.0)
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        text = f"{self.label} [{bar}] day {done / _DAY_US:5.1f} of {total / _DAY_US:.1f}"
        if self._tty:
            self.stream.write("\r" + text)
            self._shown = True
        else:
            self.stream.write(text + "\n")
            self._next_line = elapsed + 5.0
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line if it was ever drawn."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


__all__ = ["ProgressBar"]
