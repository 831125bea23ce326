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


def test_rankings_kept_across_instants_match_a_fresh_ranking_at_every_step() -> None:
    """A kept ranking (valid until neighbours could swap) must equal ranking the children afresh."""
    import heapq

    from bench.core import CLUSTER, budget_tree, setup_events, workloads
    from ledger import events as ev
    from ledger.core import DecisionCore, Knobs
    from ledger.core.fairshare import FairShareOrder

    leaves = [p for p, _, _ in budget_tree() if p.count("/") == 3]
    subs = workloads(leaves, 400, 0.4)
    for knobs in (Knobs(), Knobs(charge="accrued", window_s=3600)):
        core = DecisionCore(knobs, CLUSTER)
        for e in setup_events():
            core.handle(e)
        inputs: list[tuple[int, int, ev.Event]] = [(t, i, s) for i, (t, s) in enumerate(subs)]
        heapq.heapify(inputs)
        seq, checked = len(inputs), 0
        while inputs:
            nxt = core.next_wakeup()
            if nxt is not None and nxt <= inputs[0][0]:
                outs = core.advance(nxt)
            else:
                outs = core.handle(heapq.heappop(inputs)[2])
            for o in outs:
                if isinstance(o, ev.WorkloadStarted):
                    seq += 1
                    done = ev.to_us(o.time) + 45 * 60 * 1_000_000
                    heapq.heappush(
                        inputs,
                        (done, seq, ev.WorkloadCompleted(
                            event_id=f"c{seq}", cluster=CLUSTER, time=ev.from_us(done),
                            workload_id=o.workload_id, outcome="succeeded",
                        )),
                    )
            order = core.order
            assert isinstance(order, FairShareOrder)
            t = core.now
            fresh = FairShareOrder(core.tree, core.occ)
            fresh.capacity = order.capacity
            fresh.retarget(t)  # shares never change here: entitled as the core's order is
            for parent in [None, *core.tree.nodes]:
                kept = order.ranked_children(parent, t)
                assert kept == fresh.ranked(core.tree.children_of(parent), t), (parent, t)
                checked += 1
        assert checked > 1000
