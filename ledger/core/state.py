"""What the rules see of the decision core: the state a pass reads and changes, and what it may emit.

The scheduling rules (``fill``, ``lanes``, ``preemption`` with ``walk``, ``holds``, ``progress``,
``grace``, ``reasons``) are functions of a ``CoreState``:

* they read the standings (``tree``, ``occ``, ``order``), the ``hosts``, the ``workloads``
  (``Roster``), the victim ``pool``, the standing hold (``holds``), the ``debug_demand``, the
  ``knobs`` and the clock (``now``), and change them only through those components' methods;
* they emit a decision in words (``decide``) and wake-ups (``wakeups``), and ask the core to start
  a run (``start_run``) or to preempt one (``preempt_run``).

Starting and preempting are the life of a run (its meters, its protected window, its exit and
requeue), which ``scheduler.DecisionCore`` owns: it is the one implementation of this class, and
hands itself to the rules. So the imports run one way: the scheduler over the rules, the rules over
this state and its components, which import no rule (pyproject's import contracts).
"""

from __future__ import annotations

import math

from ledger.core.contract import Workload
from ledger.core.demand import DebugDemand
from ledger.core.fairshare import FairShareOrder
from ledger.core.held import Holds
from ledger.core.knobs import DEBUG_RUNTIME_S, Knobs, format_duration
from ledger.core.occupancy import Occupancy
from ledger.core.outputs import LAST_US, Outputs
from ledger.core.passes import Passes
from ledger.core.placement import Hosts
from ledger.core.policies import FlatOrder, team_limit
from ledger.core.pool import VictimPool
from ledger.core.roster import Roster
from ledger.core.tree import BudgetTree
from ledger.core.verdicts import Verdicts
from ledger.core.wakeups import Wakeups
from ledger.events import Event, SchedulingDecision

__all__ = ["CoreState"]


class CoreState:
    """One cluster's scheduling state as the rules see it: the components a pass reads and changes, and its outputs.

    ``start_run`` and ``preempt_run`` are the decision core's (``scheduler.DecisionCore``).
    """

    def __init__(self, knobs: Knobs, cluster: str) -> None:
        self.knobs = knobs
        self.cluster = cluster
        self.now = 0  # µs: the core's clock, moved on by events and wake-ups
        # the standings: the budget tree, its meters and the order of the waiting work
        self.tree = BudgetTree()
        self.occ = Occupancy(knobs.window_s, knobs.half_life_s, knobs.charge == "upfront")
        self.order: FairShareOrder | FlatOrder
        if knobs.policy == "fairshare":
            self.order = FairShareOrder(self.tree, self.occ)
        else:
            self.order = FlatOrder(knobs.policy == "priority")
        # the debug partition is a fair-share rule: the baselines place on every host alike; sized from demand at
        # each pass when the knob leaves it to the demand (``lanes.size_partition``)
        lane = knobs.debug_hosts or 0 if knobs.policy == "fairshare" else 0
        self.hosts = Hosts(cluster, knobs.gpus_per_node, lane)  # hosts and placement
        if isinstance(self.order, FairShareOrder):  # debug runs are indexed apart: they start first (``lanes``)
            self.order.debug_s, self.order.debug_size = DEBUG_RUNTIME_S, knobs.gpus_per_node
        self.debug_demand = DebugDemand()  # what the debug partition is sized from (``lanes``)
        self.workloads = Roster()  # every known workload
        self.pool = VictimPool()  # running work a waiter may preempt
        self.wakeups = Wakeups()
        self.holds = Holds()  # the standing hold (``holds``)
        self.passes = Passes()  # pending facts, the last pass and preemption walk
        self.outputs = Outputs(cluster)  # decision ids and datetimes
        self.verdicts = Verdicts()  # derived, never in a snapshot: who may preempt whom this instant
        # a constant of the knobs, for the words of a decision
        self.lookback = (
            f"{format_duration(knobs.half_life_s)} half-life"
            if knobs.half_life_s
            else f"{format_duration(knobs.window_s)} window"
        )

    # ---- what a pass reads -----------------------------------------------------------------
    def chain(self, w: Workload) -> list[str]:
        """Return the budget nodes ``w`` is charged to, its own node first (none when unallocated)."""
        return self.tree.ancestors(w.node) if w.node is not None else []

    def within_team_limit(self, w: Workload) -> bool:
        """Return whether ``w`` would run non-preemptible under the priority policy (False under the others)."""
        if self.knobs.policy != "priority" or not w.wants_allocation:
            return False
        assert w.node is not None
        limit = team_limit(self.tree.fraction(w.node), self.hosts.capacity, self.hosts.per_node)
        return self.pool.shielded_gpus(w.node) + w.size <= limit

    # ---- what a pass emits -----------------------------------------------------------------
    def decide(
        self, action: str, w: Workload, t: int, effective: int, reason: str,
        for_workload: str | None = None, position: int | None = None, hosts: list[int] | None = None,
    ) -> SchedulingDecision:
        """Return the decision ``action`` about ``w`` at ``t``, in effect at ``effective``, with its reason in words.

        ``hosts``: the hosts it names when not ``w``'s own (a hold names the hosts it holds).
        """
        ratio = None
        if w.node is not None and isinstance(self.order, FairShareOrder) and self.hosts.capacity:
            r = self.order.ratio(w.node, t)
            ratio = r if math.isfinite(r) else None
        outputs = self.outputs
        result: SchedulingDecision = outputs.new(
            SchedulingDecision, t,
            {"action": action, "workload_id": w.wid, "nodes": self.hosts.names(w.hosts if hosts is None else hosts),
             "reason": reason, "for_workload": for_workload, "budget_ratio": ratio, "queue_position": position,
             "effective_time": outputs.at(min(effective, LAST_US))},
        )
        return result

    def start_run(
        self, w: Workload, hosts: list[int], t: int, position: int, out: list[Event], why: str, grace: int = 0
    ) -> None:
        """Decide to start ``w`` on ``hosts`` now, or ``grace`` µs later when it follows a preemption."""
        raise NotImplementedError  # the decision core's (``scheduler.DecisionCore``)

    def preempt_run(
        self, w: Workload, t: int, out: list[Event], reason: str, by: Workload | None, why: str,
        immediate: bool = False, position: int | None = None,
    ) -> None:
        """Decide to preempt the running ``w`` (``by``: for that waiter); it exits now, or when the grace ends."""
        raise NotImplementedError  # the decision core's (``scheduler.DecisionCore``)
