"""Occupancy meters: exact window sums without rescans, and the half-life alternative."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core import CLUSTER, budget_tree, setup_events, workloads
from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from ledger.core.fairshare import FairShareOrder
from ledger.core.occupancy import Meter
from ledger.core.walk import own_exposed

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


def _steps(knobs: Knobs, n: int = 400, days: float = 0.4) -> Iterator[DecisionCore]:
    """Drive seeded submissions through a fair-share core (runs last 45 min); yield it after every step."""
    leaves = [p for p, _, _ in budget_tree() if p.count("/") == 3]
    subs = workloads(leaves, n, days)
    core = DecisionCore(knobs, CLUSTER)
    for e in setup_events():
        core.handle(e)
    inputs: list[tuple[int, int, ev.Event]] = [(t, i, s) for i, (t, s) in enumerate(subs)]
    heapq.heapify(inputs)
    seq = len(inputs)
    while inputs:
        nxt = core.next_wakeup()
        due = nxt is not None and nxt <= inputs[0][0]
        outs = core.advance(nxt) if due and nxt is not None else core.handle(heapq.heappop(inputs)[2])
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
        yield core


def test_rankings_kept_across_instants_match_a_fresh_ranking_at_every_step() -> None:
    """A kept ranking (valid until neighbours could swap) must equal ranking the children afresh."""
    for knobs in (Knobs(), Knobs(charge="accrued", window_s=3600), Knobs(half_life_s=6 * 3600)):
        checked = 0
        for core in _steps(knobs):
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


def test_own_exposed_counters_match_the_subtree_counts_and_come_back_after_a_restore() -> None:
    """A node's own exposed GPUs, kept as a counter, equal its subtree's less its children's; restores rebuild them."""
    checked = 0
    for step, core in enumerate(_steps(Knobs(), 300, 0.3)):
        order = core.order
        assert isinstance(order, FairShareOrder)
        nodes = core.occ.nodes
        want = {
            p: nodes[p].exposed - sum(nodes[c].exposed for c in node.children) for p, node in core.tree.nodes.items()
        }
        kept = own_exposed(order)
        assert {p: kept.get(p, 0) for p in want} == want
        checked += sum(1 for v in want.values() if v)
        if step % 50 == 0:
            restored = DecisionCore.restore(core.snapshot()).order
            assert isinstance(restored, FairShareOrder)
            assert {p: own_exposed(restored).get(p, 0) for p in want} == want
    assert checked > 100  # exposed work was actually counted


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=0, max_value=2e3, allow_nan=False),
        st.floats(allow_nan=False),
        # a decimal half at the 9th place, exactly representable (j / 2^10, j odd) or one step either side
        st.integers(0, 2**21).map(lambda j: (2 * j + 1) / 1024),
        st.tuples(st.integers(0, 10**12), st.sampled_from([-1, 0, 1])).map(
            lambda kd: math.nextafter((kd[0] + 0.5) / 1e9, math.inf * kd[1]) if kd[1] else (kd[0] + 0.5) / 1e9
        ),
    )
)
def test_ratios_are_rounded_to_9_decimals_exactly_as_round_does(r: float) -> None:
    """``round9`` is ``round(r, 9)`` bit for bit (the sibling order's keys and the final-share test depend on it)."""
    from ledger.core.fairshare import round9

    assert math.copysign(1, round9(r)) == math.copysign(1, round(r, 9))
    assert round9(r) == round(r, 9)
