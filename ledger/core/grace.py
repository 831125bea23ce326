"""A grace period (``Knobs.grace_s``): a victim keeps running until it ends, and its waiter starts after it.

A victim placed next to its waiter holds only what the waiter does not take; a waiter whose
victims have all left before the grace ran out starts at once. Functions of the core's state,
like ``preemption``.
"""

from __future__ import annotations

from ledger.core.contract import EXITING, STARTING, Workload
from ledger.core.state import CoreState
from ledger.core.wakeups import START

__all__ = ["keep_exiting", "leave_hosts", "unreserve", "victim_left"]


def keep_exiting(core: CoreState, w: Workload) -> None:
    """Let a victim running out its grace hold what its waiter, placed at once, did not take.

    It still runs there until it exits: those GPUs are free only then, not at the decision.
    """
    if w.state == EXITING:
        core.hosts.keep(w.wid, w.hosts, w.held, w.node)


def victim_left(core: CoreState, w: Workload, t: int) -> None:
    """Start the waiter of a victim that left before its grace ran out, if none of its other victims remains."""
    waiter = core.workloads.get(w.exit_by) if t < w.exit_us else None
    if waiter is None or waiter.state != STARTING or core.workloads.exiting_for(waiter.wid):
        return
    waiter.epoch += 1  # the wake-up at the end of the grace is void
    core.wakeups.workload(t, START, waiter)


def unreserve(core: CoreState, w: Workload) -> None:
    """Drop a delayed start's hosts; victims still running out their grace there hold those GPUs again."""
    core.hosts.release(w.wid, w.hosts, w.node)
    for v in core.workloads.exiting_on(w.hosts):
        keep_exiting(core, v)


def leave_hosts(core: CoreState, w: Workload) -> None:
    """Free what an exiting victim still held through its grace period."""
    if core.hosts.holds(w.wid, w.hosts):
        core.hosts.release(w.wid, w.hosts, w.node)
