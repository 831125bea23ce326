"""The progress rules: how long a run is protected, which runs are spared, and the standing check.

* A run's protected window grows with every preemption of its workload, up to the cap, and
  covers its restart (``protection_s``).
* A resumable run that has written no checkpoint holds no saved progress: it is *spared* (not a
  victim for a waiter) until its first checkpoint, for at most the cap from its start; a workload
  preempted ``max_preemptions`` times is spared in each later run until that run checkpoints
  (``settled``). Once submissions stop, every workload therefore finishes (docs/rules.md states the
  bound).
* Standings drift with time alone, so while allocated work waits and something could be a
  victim a pass runs at least every ``standing_check_s`` (``queue_recheck``).

Functions of the core's state, like ``preemption``: the core calls them, they change nothing
but the core they are given.
"""

from __future__ import annotations

from ledger.core.contract import RUNNING, Workload
from ledger.core.fairshare import ALLOCATED, FairShareOrder
from ledger.core.state import CoreState
from ledger.core.wakeups import RECHECK, SPARED

__all__ = [
    "allocated_waiting",
    "checkpoint_written",
    "pool_unless_settled",
    "protection_ended",
    "protection_s",
    "queue_recheck",
    "recheck_due",
    "settled",
    "spare_ended",
]

_US = 1_000_000


def protection_s(core: CoreState, w: Workload) -> int:
    """Return the protected window (s) of ``w``'s next run: it grows with every preemption, and covers a restart.

    Allocated work: min(cap, minimum runtime × 2^p) for a workload preempted p times so far, plus
    its declared ``restart_s`` when the run is a restart (not its first). Free fill under fair
    share: min(``fill_protect_cap_s``, ``fill_protect_s`` × 2^p). Asked before the run begins
    (``w.attempt`` counts the runs so far), for a waiter's charge as for the window its start gets.
    """
    knobs = core.knobs
    p = min(w.preemptions, 30)
    if w.wants_allocation:
        base = w.min_runtime_s
        if knobs.policy == "fairshare":
            base = min(knobs.max_min_runtime_s, w.min_runtime_s << p)
        return base + (w.restart_s if w.attempt > 0 else 0)
    return min(knobs.fill_protect_cap_s, knobs.fill_protect_s << p)


def settled(core: CoreState, w: Workload) -> bool:
    """Return whether ``w``'s run may not be preempted for a waiter now (fair share, allocated work).

    * A resumable run holds no saved progress before its first checkpoint: it is *spared* until
      then, for at most the protection cap (``max_min_runtime_s``) from its start, so a job that
      never checkpoints cannot keep its GPUs for ever (off with ``Knobs.preempt_uncheckpointed``).
    * A workload preempted ``max_preemptions`` times is not preempted for a waiter again in a run
      until that run has written a checkpoint. Every such later preemption keeps saved progress,
      so runs are finite (at most work ÷ checkpoint interval more), and a run that never
      checkpoints keeps its GPUs until it ends.
    """
    knobs = core.knobs
    if not w.allocated or knobs.policy != "fairshare":
        return False
    if w.resumable and w.last_ckpt_us > w.start_us:
        return False
    return w.preemptions >= knobs.max_preemptions or _spared_until(core, w) > core.now


def _spared_until(core: CoreState, w: Workload) -> int:
    """Return until when (µs) a resumable run without a checkpoint is spared (0: it is not)."""
    if not w.resumable or core.knobs.preempt_uncheckpointed:
        return 0
    return w.start_us + core.knobs.max_min_runtime_s * _US


def protection_ended(core: CoreState, w: Workload) -> None:
    """End ``w``'s protected window: its GPUs count as exposed, and it is a victim unless settled."""
    fair = core.knobs.policy == "fairshare"
    if not w.allocated:
        if fair and not core.pool.has(w.wid):
            core.pool.add(w, core.hosts)  # free fill: its short protected window is over
        return
    chain = core.chain(w)
    if w.prepaid:
        core.occ.prepaid_changed(chain, -w.held, w.protected_until)
        w.prepaid = False
    if not w.exposed and core.knobs.policy != "priority":
        w.exposed = True
        core.occ.exposed_changed(chain, w.held)
        if fair:
            pool_unless_settled(core, w)


def pool_unless_settled(core: CoreState, w: Workload) -> None:
    """Make a past-protection run a victim now, or when its spared time ends if that alone holds it back."""
    if not settled(core, w):
        core.pool.add(w, core.hosts)
    elif w.preemptions < core.knobs.max_preemptions:
        core.wakeups.workload(_spared_until(core, w), SPARED, w)


def spare_ended(core: CoreState, w: Workload) -> bool:
    """Make a run spared this long without a checkpoint a victim like any other; return whether it became one."""
    if w.state == RUNNING and w.exposed and not core.pool.has(w.wid) and not settled(core, w):
        core.pool.add(w, core.hosts)
        return True
    return False


def checkpoint_written(core: CoreState, w: Workload, t: int) -> bool:
    """Record ``w``'s checkpoint at ``t``; return whether it made a settled run a victim (a pass is due)."""
    w.last_ckpt_us = t
    core.pool.checkpointed()  # a victim's cost changed
    if core.knobs.policy == "fairshare" and w.exposed and w.state == RUNNING and not core.pool.has(w.wid):
        core.pool.add(w, core.hosts)  # settled past its protection, now holding saved progress
        return True
    return False


def queue_recheck(core: CoreState, t: int) -> None:
    """Queue a standing check a period after ``t`` while allocated work waits and something could be a victim."""
    # Standings drift with time alone: a swap the rules refused at this pass may be allowed a
    # minute later with no event in between (a quiet cluster whose runs only checkpoint). A pass
    # for any other reason in the meantime puts the check off.
    check = core.knobs.standing_check_s * _US
    if check and not core.wakeups.is_queued(RECHECK) and core.pool.any() and allocated_waiting(core):
        core.wakeups.once(t + check, RECHECK)


def recheck_due(core: CoreState, t: int) -> bool:
    """Return whether a standing check due at ``t`` needs a pass (none ran in the last check period)."""
    last = core.passes.last
    if last + core.knobs.standing_check_s * _US > t:
        queue_recheck(core, last)  # a pass ran since this was queued: check a period after it
        return False
    return core.pool.any() and allocated_waiting(core)


def allocated_waiting(core: CoreState) -> bool:
    """Return whether allocated work waits (fair share; O(roots): a root's count covers its subtree)."""
    order = core.order
    if not isinstance(order, FairShareOrder):
        return False  # priority standings do not drift, and fifo never preempts
    waiting = order.totals[ALLOCATED]
    return any(waiting.get(r) for r in order.tree.roots)
