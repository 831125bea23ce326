"""Plain-words reasons for start decisions: enough for ``explain`` to tell a researcher why."""

from __future__ import annotations

import math

from ledger.core.contract import Workload
from ledger.core.fairshare import ORPHAN, UNALLOCATED, FairShareOrder, Pick, percent
from ledger.core.knobs import DEBUG_RUNTIME_S, format_duration
from ledger.core.progress import protection_s
from ledger.core.state import CoreState

__all__ = ["debug_hosts_rule", "start_reason"]


def start_reason(
    core: CoreState, w: Workload, pick: Pick, hosts: list[int], t: int, lane: bool = False, debug: bool = False
) -> str:
    """Return the plain-words reason of a start decision (what `explain` shows a researcher).

    ``lane``: it starts on the debug partition (``lanes``), where only debug runs (and free fill) start;
    ``debug``: a debug run started elsewhere before other work (``lanes.start_debug``).
    """
    where = _where(core, w, hosts)
    if lane:
        where += f"; {debug_hosts_rule(core)}"
    if core.knobs.policy == "fifo":
        return f"first come, first served: earliest submitted work that fits; {where}"
    if core.knobs.policy == "priority":
        kind = (
            "non-preemptible"
            if core.within_team_limit(w)
            else ("preemptible (team at its non-preemptible GPU limit)" if w.wants_allocation else "preemptible")
        )
        return f"priority {w.priority}: highest-priority work that fits; runs {kind}; {where}"
    if pick.tier == ORPHAN:
        return f"budget path {w.budget} is not defined: runs unallocated (charged to nobody, preemptible); {where}"
    assert w.node is not None and isinstance(core.order, FairShareOrder)
    ratio = core.order.ratio(w.node, t)
    if pick.tier == UNALLOCATED:
        return (
            f"unallocated (minimum runtime 0): charged to nobody, preemptible by any allocated request; "
            f"free room and no allocated work that fits waits; {where}"
        )
    if math.isinf(ratio):  # no allocation: ``percent`` would say "used no allocation of its allocation"
        standing = _no_allocation(core, w.node)
    else:
        standing = f"{w.node} has used {percent(ratio)} of its allocation over the {core.lookback}"
    if lane:
        first = "first debug run in the fair-share order that fits the debug partition"
    elif debug:
        first = "a debug run: debug runs start before other work, and it is the first of them in the fair-share order"
    else:
        first = "first in the fair-share order among work that fits"
    return f"{standing}; {first}; protected for {format_duration(protection_s(core, w))}; {where}"


def debug_hosts_rule(core: CoreState) -> str:
    """Say the debug partition's rule, e.g. 'the 2 debug hosts take only runs protected <= 15m on one host'."""
    n = len(core.hosts.lane_hosts)  # the live hosts of the partition (retired ones leave it)
    hosts = "the debug host takes" if n == 1 else f"the {n} debug hosts take"
    return (
        f"{hosts} only allocated runs protected <= {format_duration(DEBUG_RUNTIME_S)} on one host, "
        f"and free fill"
    )


def _no_allocation(core: CoreState, node: str) -> str:
    """Say why a budget has no allocation: a share of 0, its own or that of a branch above it."""
    nodes = core.tree.nodes
    zero = None
    p: str | None = node
    while p is not None:  # the highest node whose share is 0 is the one that takes the allocation away
        if nodes[p].share <= 0:
            zero = p
        p = nodes[p].parent
    if zero is None:  # a share raised from 0 this instant: the window holds none of it yet
        return f"{node} has had no allocation over the {core.lookback}"
    last = "ranks after the budgets beside it that have a share"
    if zero == node:
        return f"{node} has a share of 0: it has no allocation, so it {last}"
    return f"{node} is under {zero}, which has a share of 0: it has no allocation, and {zero} {last}"


def _where(core: CoreState, w: Workload, hosts: list[int]) -> str:
    names = ", ".join(core.hosts.names(hosts))
    if w.size > core.hosts.per_node:
        return f"takes {len(hosts)} whole hosts ({names})"
    return f"placed on {names}"
