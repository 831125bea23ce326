"""Occupancy meters: exact window sums without rescans, and the half-life alternative."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.occupancy import Meter

WINDOW = 1_000


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(1, 8), st.integers(1, 600)), max_size=40),
    st.integers(0, 3000),
)
def test_window_usage_equals_a_brute_force_recount(runs: list[tuple[int, int, int]], extra: int) -> None:
    """Random runs (gap, GPUs, length) laid end to end and overlapping; the meter must match a rescan."""
    changes: list[tuple[int, int]] = []
    t = 0
    for gap, gpus, length in runs:
        t += gap
        changes += [(t, gpus), (t + length, -gpus)]
    changes.sort()
    meter = Meter()
    applied: list[tuple[int, int]] = []
    for when, delta in changes:
        meter.change(when, delta, WINDOW, None)
        applied.append((when, delta))
        # query at the change and a little later, as a scheduling pass would; the rescan integrates
        # the step function of the changes applied so far over [q - window, q]
        for q in (when, when + extra % 50):
            lo = q - WINDOW
            expected = sum(d * max(0, q - max(w, lo)) for w, d in applied)
            assert meter.in_window(q, WINDOW) == expected
    assert len(meter.ts) <= 65 or meter.ts[0] <= changes[-1][0] - WINDOW  # old breakpoints are dropped


def test_half_life_decay_halves_past_usage_after_one_half_life() -> None:
    h = 1_000_000
    meter = Meter()
    meter.change(0, 8, WINDOW, h)
    meter.change(h, -8, WINDOW, h)  # 8 GPUs for one half-life, then nothing
    held = meter.decayed_at(h, h)
    assert math.isclose(held, 8 * h / math.log(2) * 0.5, rel_tol=1e-12)
    assert math.isclose(meter.decayed_at(2 * h, h), held / 2, rel_tol=1e-12)
