"""The rules read alone: each is a function of a ``CoreState`` built by hand, with no scheduler and no events.

A lab of four 8-GPU hosts and two teams with equal shares. Team b has run one host for two hours;
team a has run nothing. The state is set up through its components' own methods, as the scheduler
would leave it, and a rule is asked about it directly.
"""

from __future__ import annotations

from ledger.core.contract import Workload
from ledger.core.fairshare import FairShareOrder
from ledger.core.fill import fill_room
from ledger.core.knobs import Knobs
from ledger.core.preemption import final_share, outranks
from ledger.core.progress import protection_s
from ledger.core.state import CoreState

_US = 1_000_000
T0 = 1_800_000_000 * _US  # the lab's morning
HOUR = 3600 * _US


def _lab(knobs: Knobs | None = None) -> CoreState:
    """Return the lab at 10:00: b's 8-GPU run started at 08:00 and still runs, a has used nothing."""
    core = CoreState(knobs or Knobs(), "lab")
    core.hosts.resize(32, 8)
    for path, parent in (("lab", None), ("lab/a", "lab"), ("lab/b", "lab")):
        core.tree.define(path, parent, 1.0, (), T0, f"def-{path}")
        core.occ.add_node(path)
    assert isinstance(core.order, FairShareOrder)
    core.order.capacity = core.hosts.capacity
    core.order.retarget(T0)
    core.occ.run_changed(core.tree.ancestors("lab/b"), T0, 8, True)
    core.hosts.place("b1", [0], 8, "lab/b")
    core.now = T0 + 2 * HOUR
    return core


def _workload(wid: str, node: str, gpus: int, min_runtime_s: int, preemptions: int = 0) -> Workload:
    return Workload(
        wid=wid, budget=node, node=node, user="u", gpus=gpus, min_runtime_s=min_runtime_s, resumable=True,
        priority=0, kind="batch", submit_us=T0, size=gpus, preemptions=preemptions,
    )


def test_the_team_that_has_used_nothing_outranks_the_one_that_ran() -> None:
    core = _lab(Knobs(preemption_strategy="instant"))
    waiter, victim = _workload("a1", "lab/a", 8, 3600), _workload("b1", "lab/b", 8, 3600)
    t = core.now
    assert outranks(core, waiter, victim, t)
    assert not outranks(core, victim, waiter, t)


def test_a_swap_that_would_swap_back_is_refused() -> None:
    core = _lab()
    t = core.now
    # b has used 16 GPU-hours of its 16 GPUs x 7 days; a's branch charged a waiter's protected runtime:
    # one host for an hour still leaves a behind b, four hosts for eight hours put it far ahead
    small, large = _workload("a1", "lab/a", 8, 3600), _workload("a2", "lab/a", 32, 8 * 3600)
    victim = _workload("b1", "lab/b", 8, 3600)
    after = final_share(core, "lab/a", "lab/b", 8 * 3600, t)
    assert after is not None and after[0] < after[1]
    assert outranks(core, small, victim, t, margin=True, charge=small.size * protection_s(core, small))
    assert not outranks(core, large, victim, t, margin=True, charge=large.size * protection_s(core, large))


def test_protection_doubles_with_each_preemption_up_to_the_cap_and_covers_a_restart() -> None:
    core = _lab()
    w = _workload("a1", "lab/a", 8, 3600)
    assert protection_s(core, w) == 3600
    w.preemptions, w.attempt, w.restart_s = 2, 3, 300
    assert protection_s(core, w) == 4 * 3600 + 300
    w.preemptions = 5
    assert protection_s(core, w) == 8 * 3600 + 300  # the 8 h cap, and the restart on top


def test_free_fill_leaves_the_headroom_while_allocated_work_runs() -> None:
    core = _lab()
    free = core.hosts.free_gpus()
    assert free == 24
    assert fill_room(core, free) == 24 - 1  # 3 % of 32 GPUs, rounded up to a whole GPU
    core.occ.run_changed(core.tree.ancestors("lab/b"), core.now, -8, True)  # b's run ends: nothing allocated
    assert fill_room(core, free) == free
