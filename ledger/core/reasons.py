"""Plain-words reasons for start decisions: enough for ``explain`` to tell a researcher why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.core.contract import Workload
from ledger.core.fairshare import ORPHAN, UNALLOCATED, FairShareOrder, Pick, percent
from ledger.core.knobs import format_duration

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["start_reason"]


def start_reason(core: DecisionCore, w: Workload, pick: Pick, hosts: list[int], t: int) -> str:
    """Return the plain-words reason of a start decision (what `explain` shows a researcher)."""
    where = _where(core, w, hosts)
    if core.knobs.policy == "fifo":
        return f"first come, first served: earliest submitted work that fits; {where}"
    if core.knobs.policy == "priority":
        kind = (
            "non-preemptible"
            if core._within_team_limit(w)
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
    return (
        f"{w.node} has used {percent(ratio)} of its allocation over the {core.lookback}; first in the fair-share "
        f"order among work that fits; protected for {format_duration(w.min_runtime_s)}; {where}"
    )

def _where(core: DecisionCore, w: Workload, hosts: list[int]) -> str:
    names = ", ".join(core.hosts.names(hosts))
    if w.size > core.hosts.per_node:
        return f"takes {len(hosts)} whole hosts ({names})"
    return f"placed on {names}"
