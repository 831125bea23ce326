"""The decision core: state + event -> new state + decisions. Pure: no IO, no clock, no randomness.

``DecisionCore.handle(event)`` first processes every internal wake-up before the event's time,
then applies the event, then that instant's wake-ups and one scheduling pass: facts of an instant
come before its wake-ups (``handle(event, decide=False)`` + ``advance(t)`` applies several facts
of one instant before one pass). A pass:

1. *debug runs first* (fair share, ``lanes``): on the debug partition, on any room, on held room.
2. *fill* (``fill``): while some waiting workload fits the free room on healthy hosts that are not
   held, start the first such workload in the policy's order (backfill: whatever can start without
   preempting starts; nothing waits for a workload that cannot start, except on held hosts). One pick
   costs O(depth × b log b + distinct sizes) under fair share (see ``fairshare``), independent of
   the queue length; the loop ends as soon as nothing fits.
3. *preempt* (``preemption``): walk the allocated waiters in order; for each node only the first
   waiter of each size is tried (a later one of the same size cannot do better), and once a size
   failed every larger size is skipped, so at most a handful of attempts are made; each attempt is
   O(p log p) over the p preemptible runs. Cheap bounds (free + unallocated + past-protection
   GPUs still eligible) skip attempts that cannot succeed. If a preemption is made, go to 1.
4. *hold* (fair share, ``holds``): the holder of the standing hold starts on its held hosts if they
   seat it (preempting there once the hold's time has come); else allocated work whose protected
   window ends by the hold's time soaks the held room; with no hold standing, the first wide
   waiter of the order is granted one. Then free fill goes into what is left, held room and the
   debug partition included.

Wake-ups (a heap, O(log w) each): end of a protected window, end of a grace period (victim
exits, waiter starts), a drain falling due (``wakeups``). Stale wake-ups are recognised by an epoch
counter.

The state is ``state.CoreState``'s, held by components that own their data (docs/design.md draws
them); a snapshot is each one's own state. The rules live in modules of their own, functions of a
``CoreState`` that read and change it through those components and emit through it: this class
hands itself to them and implements what they ask of it, ``start_run`` and ``preempt_run``.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.core import fill, holds, lanes, progress
from ledger.core.contract import DONE, EXITING, RUNNING, STARTING, WAITING, Workload
from ledger.core.fairshare import FairShareOrder
from ledger.core.grace import keep_exiting, leave_hosts, unreserve, victim_left
from ledger.core.held import Hold
from ledger.core.knobs import DEBUG_RUNTIME_S
from ledger.core.outputs import EPOCH, LAST_US
from ledger.core.placement import hosts_needed
from ledger.core.preemption import preempt_for, preempt_once, priority_pass
from ledger.core.state import CoreState
from ledger.core.wakeups import CYCLE, DRAIN, EXIT, HOLD, PROTECT, RECHECK, SPARED, START, TIMED
from ledger.errors import InputError
from ledger.events import (
    AllocationChanged,
    AllocationRefused,
    BudgetNodeDefined,
    CheckpointWritten,
    ClusterCapacityChanged,
    Event,
    HostHealthChanged,
    WorkloadCompleted,
    WorkloadPreempted,
    WorkloadRequeued,
    WorkloadStarted,
    WorkloadSubmitted,
    from_us,
    to_us,
)

__all__ = ["SNAPSHOT_MAGIC", "DecisionCore"]


SNAPSHOT_MAGIC = b"GPULEDGER-CORE-1\n"
_US = 1_000_000


class DecisionCore(CoreState):
    """One cluster's scheduling state; feed it events in time order, get decisions back.

    The state the rules read and change is ``CoreState``'s; this class applies the events, runs the
    wake-ups and the passes, and owns the life of a run (``start_run``, ``preempt_run``).
    """

    # ================================================================ public API
    def handle(self, event: Event, decide: bool = True, t_us: int | None = None) -> list[Event]:
        """Apply an event after the wake-ups due before its time, then its instant's wake-ups and pass.

        Facts of one instant come before that instant's wake-ups: a workload that completes at the
        very instant its protected window ends has completed and is never preempted at that instant.
        With ``decide=False`` the pass is left pending, so a caller that holds several facts of one
        instant (the replay driver) applies them all and then calls ``advance(t)`` for one pass.
        ``t_us`` is the event's time in µs when the caller has already converted it (the driver has).
        """
        if event.cluster != self.cluster:
            raise InputError(
                f"{event.type_name} {event.event_id}: cluster {event.cluster!r} is not this core's {self.cluster!r}"
            )
        when = event.time
        t = to_us(when) if t_us is None else t_us
        out = self.advance(t - 1)
        if t >= self.now:
            if when.__class__ is datetime and when.tzinfo is UTC:
                # this instant's outputs carry the event's own datetime (equal to a conversion of t), so
                # t is converted once for the event and its outputs, here and in whatever reads them
                self.outputs.seen(t, when)
        else:
            t = self.now  # a late event is applied at the core's clock: decisions never go back in time
        self.now = t
        self.workloads.forget(t - self.knobs.window_s * _US)
        if self._apply(event, t, out):
            self.passes.fact(self.workloads.get(event.workload_id) if isinstance(event, WorkloadSubmitted) else None)
        if decide:
            self._instant(t, out)
        return out

    def advance(self, until_us: int) -> list[Event]:
        """Run the pending pass and every wake-up at or before ``until_us``; return the events they produce."""
        out: list[Event] = []
        if self.passes.pending and self.now <= until_us:
            self._instant(self.now, out)
        wakeups = self.wakeups
        while True:
            at = wakeups.next_time()
            if at < 0 or at > until_us:
                return out
            self.now = max(self.now, at)
            self._instant(self.now, out)

    def _instant(self, t: int, out: list[Event]) -> None:
        """Process the wake-ups due by ``t`` (after every fact of ``t``), then one pass if anything changed."""
        wakeups = self.wakeups
        changed = self.passes.pending
        while wakeups.due(t):
            _, _, kind, wid, epoch = wakeups.pop()
            if kind == CYCLE:
                changed = True
                continue
            if kind == RECHECK:
                changed |= progress.recheck_due(self, t)
                continue
            if kind == HOLD:
                changed |= self.holds.due(t)  # else dropped, or put off (another wake-up)
                continue
            w = self.workloads.get(wid)
            if w is not None and w.epoch == epoch:
                changed |= self._wake(kind, w, t, out)
        fresh = self.passes.take()
        if changed:
            self._pass(t, out, fresh)

    def next_wakeup(self) -> int | None:
        """Return the time (µs) of the next pending wake-up, or None."""
        wakeups = self.wakeups
        while wakeups.next_time() >= 0:
            at, _, kind, wid, epoch = wakeups.peek()
            w = self.workloads.get(wid)
            if kind in TIMED or (w is not None and w.epoch == epoch):
                return at
            wakeups.pop()  # stale: its workload moved on
        return None

    @property
    def hold(self) -> Hold | None:
        """Return the standing hold (``holds``), or None."""
        return self.holds.hold

    @property
    def pending(self) -> bool:
        """Return whether facts of the core's instant were applied and their scheduling pass has not run yet."""
        return self.passes.pending

    def state(self) -> dict[str, object]:
        """Return the state a snapshot holds: the core's own fields and each component's state, caches left out."""
        return {
            "knobs": self.knobs, "cluster": self.cluster, "now": self.now,
            # one object graph: the order refers to the tree and the meters it ranks by
            "standings": (self.tree, self.occ, self.order),
            "hosts": self.hosts,
            "workloads": self.workloads.snapshot(),
            "pool": self.pool.snapshot(),
            "wakeups": self.wakeups.snapshot(),
            "holds": self.holds.snapshot(),
            "debug_demand": self.debug_demand.snapshot(),
            "passes": self.passes.snapshot(),
            "outputs": self.outputs.snapshot(),
        }

    def snapshot(self) -> bytes:
        """Return the whole state as bytes (same history -> same bytes); for trusted storage only."""
        # One round trip first: pickle shares interned strings by identity, which a restored core
        # no longer has; normalising makes the bytes a function of the state alone (a fixpoint).
        raw = pickle.dumps(self.state(), protocol=5)
        return SNAPSHOT_MAGIC + pickle.dumps(pickle.loads(raw), protocol=5)

    @classmethod
    def restore(cls, data: bytes) -> DecisionCore:
        """Rebuild a core from ``snapshot()`` bytes (produced by this code, from trusted storage)."""
        if not data.startswith(SNAPSHOT_MAGIC):
            raise InputError("not a decision-core snapshot: bad header")
        state: dict[str, Any] = pickle.loads(data[len(SNAPSHOT_MAGIC) :])  # own snapshots only (trusted)
        core = cls(state["knobs"], state["cluster"])
        core.now = state["now"]
        core.tree, core.occ, core.order = state["standings"]
        core.hosts = state["hosts"]
        core.workloads.restore(state["workloads"])
        core.pool.restore(state["pool"])
        core.wakeups.restore(state["wakeups"])
        core.holds.restore(state["holds"])
        core.debug_demand.restore(state["debug_demand"])
        core.passes.restore(state["passes"])
        core.outputs.restore(state["outputs"])
        return core

    # ---- queries -------------------------------------------------------------------------
    def usage(self, path: str, at_us: int | None = None) -> dict[str, Any]:
        """Return a node's occupancy: charged and accrued allocated, unallocated GPU-seconds, ratio."""
        if path not in self.occ.nodes:
            raise InputError(f"budget node {path!r} is not defined")
        t = max(self.now, at_us or 0)
        out: dict[str, Any] = {
            "path": path,
            "charged_gpu_s": self.occ.charged(path, t) / _US,
            "accrued_gpu_s": self.occ.accrued(path, t) / _US,
            "unallocated_gpu_s": self.occ.unallocated(path, t) / _US,
            "gpus_now": self.occ.nodes[path].allocated.rate + self.occ.nodes[path].unallocated.rate,
        }
        if path and isinstance(self.order, FairShareOrder):
            out["allocation_gpu_s"] = self.order.allocation_us(path, t) / _US
            out["ratio"] = self.order.ratio(path, t)
        return out

    def charged_us(self, path: str, at_us: int | None = None) -> int:
        """Return the exact allocated GPU-microseconds charged to a node in the window (window mode)."""
        return self.occ.charged_exact(path, max(self.now, at_us or 0))

    def fair_share_order(self, at_us: int | None = None) -> list[str]:
        """Return every budget node in fair-share order (depth first, lowest ratio first)."""
        t = max(self.now, at_us or 0)
        if isinstance(self.order, FairShareOrder):
            # the core's own order: a second reader of the meters would take the change notes
            # (``Occupancy.touched``) its ratio cache relies on, leaving stale ratios in this instant
            return self.order.ranking(t)
        order = FairShareOrder(self.tree, self.occ)
        order.capacity = self.hosts.capacity
        order.retarget(t)  # no history under another policy: today's shares taken to have held
        return order.ranking(t)

    def waiting(self) -> list[str]:
        """Return the ids of waiting workloads (submit order)."""
        return [w.wid for w in self.workloads.values() if w.state == WAITING]

    def running(self) -> dict[str, tuple[str, ...]]:
        """Return running (or starting, or exiting) workloads and their hosts."""
        return {
            w.wid: self.hosts.names(w.hosts) for w in self.workloads.values() if w.state in (RUNNING, STARTING, EXITING)
        }

    # ================================================================ applying inputs
    def _apply(self, e: Event, t: int, out: list[Event]) -> bool:
        if isinstance(e, WorkloadSubmitted):
            return self._submitted(e, t)
        if isinstance(e, WorkloadCompleted):
            return self._completed(e.workload_id, t)
        if isinstance(e, CheckpointWritten):
            w = self.workloads.get(e.workload_id)
            if w is not None and w.state in (RUNNING, EXITING):
                return progress.checkpoint_written(self, w, t)
            return False
        if isinstance(e, BudgetNodeDefined):
            self.tree.define(e.path, e.parent, e.share, e.managers, t, e.event_id)
            if e.team_level is not None and e.level == e.team_level:
                self.tree.name_team_level(e.path)
            for p in self.tree.nodes:
                self.occ.add_node(p)
            self._shares_changed(t)
            return True
        if isinstance(e, AllocationChanged):
            return self._allocation(e, t, out)
        if isinstance(e, ClusterCapacityChanged):
            self.holds.drop(self.hosts)  # hosts come and go: the next pass holds afresh
            retired = self.hosts.resize(e.gpus, e.gpus_per_node)
            self._shares_changed(t)
            for i in retired:
                self._host_unhealthy(i, t, out, why=f"host {self.hosts.hosts[i].name} was removed from the cluster")
            return True
        if isinstance(e, HostHealthChanged):
            return self._health(e, t, out)
        # Decisions and the facts they imply are this core's own output: nothing to apply.
        return False

    def _submitted(self, e: WorkloadSubmitted, t: int) -> bool:
        old = self.workloads.get(e.workload_id)
        if old is not None and (old.state != DONE or old.submitted_by == e.event_id):
            return False  # a duplicate delivery
        # (a finished workload submitted again under its id, e.g. a cancelled non-resumable one,
        # starts afresh; its attempts keep counting)
        node = e.budget if e.budget in self.tree else None
        w = Workload(
            wid=e.workload_id,
            budget=e.budget,
            node=node,
            user=e.user,
            gpus=e.gpus,
            min_runtime_s=min(e.min_runtime_s, self.knobs.max_min_runtime_s),
            resumable=e.resumable,
            priority=e.priority,
            kind=e.kind,
            submit_us=t,
            submitted_by=e.event_id,
            size=self._size(e.gpus, e.nodes),
            restart_s=e.restart_s or 0,
        )
        if old is not None:
            w.attempt, w.epoch, w.preemptions = old.attempt, old.epoch + 1, old.preemptions
        w.key = (0 if self.knobs.policy == "fifo" else -w.priority, w.submit_us, w.wid)
        self.workloads.add(w)
        self.order.add(w)
        if w.wants_allocation and 0 < w.min_runtime_s <= DEBUG_RUNTIME_S and w.size <= self.hosts.per_node:
            self.debug_demand.submitted(t, w.size * w.min_runtime_s)
        return True

    def _size(self, gpus: int, nodes: int) -> int:
        """Return the GPUs a workload will hold: its own count on one host, or whole hosts when wide.

        Wide means more GPUs than a host has, or more than one host requested (``nodes``); it then
        takes max(nodes, ceil(gpus / gpus_per_node)) whole hosts.
        """
        per = self.hosts.per_node
        if nodes <= 1 and gpus <= per:
            return gpus
        return max(nodes, hosts_needed(gpus, per)) * per

    def _completed(self, wid: str, t: int) -> bool:
        w = self.workloads.get(wid)
        if w is None or w.state == DONE:
            return False
        if w.state == WAITING:
            self.order.remove(w)
        elif w.state == STARTING:
            unreserve(self, w)
        elif w.state == RUNNING:
            self._detach(w)
            self._account_stop(w, t)
        elif w.state == EXITING:
            leave_hosts(self, w)
            self._account_stop(w, t)
        exiting = w.state == EXITING
        self.workloads.finish(w, t)
        w.epoch += 1
        if exiting:
            victim_left(self, w, t)
        return True

    def _allocation(self, e: AllocationChanged, t: int, out: list[Event]) -> bool:
        reason = ""
        if e.path not in self.tree:
            reason = f"budget node {e.path} is not defined"
        elif self.tree.applied(e.path, e.event_id):
            return False
        elif not self.tree.may_change(e.path, e.set_by):
            reason = f"{e.set_by} manages neither {e.path} nor any budget node above it"
        if reason:
            out.append(
                self.outputs.new(
                    AllocationRefused, t,
                    {"path": e.path, "share": e.share, "set_by": e.set_by, "refused_event_id": e.event_id,
                     "reason": reason},
                )
            )
            return False
        self.tree.set_share(e.path, e.share, t, e.event_id)
        self._shares_changed(t)
        return True

    def _shares_changed(self, t: int) -> None:
        """Drop cached ratios, rankings and verdicts: an allocation is worth something else from ``t``."""
        if isinstance(self.order, FairShareOrder):
            self.order.capacity = self.hosts.capacity
            self.order.invalidate()
            self.order.retarget(t)
        self.verdicts.clear()

    def _health(self, e: HostHealthChanged, t: int, out: list[Event]) -> bool:
        i = self.hosts.by_name.get(e.host)
        if i is None or self.hosts.hosts[i].state == "retired":
            return False
        h = self.hosts.hosts[i]
        if e.state == h.state:
            return False
        if h.held:
            self.holds.drop(self.hosts)  # a held host changed health: the next pass holds afresh
        self.hosts.set_state(i, e.state)
        why = f"host {h.name} is {e.state}" + (f" ({e.reason})" if e.reason else "")
        if e.state == "healthy":
            for wid in h.workloads:  # pending drains are called off once every host of the run is healthy
                w = self.workloads[wid]
                if w.draining and all(self.hosts.hosts[j].state == "healthy" for j in w.hosts):
                    w.draining = False
            return True
        if e.state == "unhealthy":
            self._host_unhealthy(i, t, out, why)
            return True
        for wid in list(h.workloads):
            w = self.workloads[wid]
            if w.state == STARTING:
                self._cancel_start(w, t, out, why)
            elif w.state == RUNNING:
                self.preempt_run(w, t, out, "host_failure", None, why + ": preempted at once", immediate=True)
        for w in list(self.workloads.values()):
            # a victim still in its grace period on the failed host stops now
            if w.state == EXITING and i in w.hosts:
                w.exit_reason = "host_failure"
                self._exit(w, t, out)
        return True

    def _host_unhealthy(self, i: int, t: int, out: list[Event], why: str) -> None:
        h = self.hosts.hosts[i]
        for wid in list(h.workloads):
            w = self.workloads[wid]
            if w.state == STARTING:
                self._cancel_start(w, t, out, why)
            elif w.state == RUNNING:
                self._drain(w, t, out, why)

    def _drain(self, w: Workload, t: int, out: list[Event], why: str) -> None:
        if w.shielded:
            out.append(
                self.decide(
                    "drain", w, t, t, why + ": non-preemptible under the priority policy, it stays until it ends"
                )
            )
            return
        if w.protected_until <= t:
            self.preempt_run(w, t, out, "host_drain", None, why + ": draining, past its protected window, preempted")
            return
        w.draining = True
        until = w.protected_until
        out.append(
            self.decide(
                "drain", w, t, until,
                why + f": draining, it leaves when its protected window ends at {from_us(until):%Y-%m-%d %H:%M:%S} UTC",
            )
        )
        self.wakeups.workload(until, DRAIN, w)

    # ================================================================ wake-ups
    def _wake(self, kind: int, w: Workload, t: int, out: list[Event]) -> bool:
        if kind == PROTECT:
            progress.protection_ended(self, w)
            return True
        if kind == EXIT:
            self._exit(w, t, out)
            return True
        if kind == START:
            self._begin_run(w, t, out)
            return False
        if kind == SPARED:
            return progress.spare_ended(self, w)
        if kind == DRAIN and w.draining and w.state == RUNNING:
            if w.prepaid or not w.exposed:
                progress.protection_ended(self, w)
            self.preempt_run(w, t, out, "host_drain", None, "host draining: its protected window ended, preempted")
            return True
        return False

    # ================================================================ runs
    def _account_stop(self, w: Workload, t: int) -> None:
        """Stop charging a run that ends at ``t``: O(depth)."""
        chain = self.chain(w)
        self.occ.run_changed(chain, t, -w.held, w.allocated)
        if w.prepaid:
            self.occ.prepaid_changed(chain, -w.held, w.protected_until)
            w.prepaid = False

    def _detach(self, w: Workload) -> None:
        """Free a run's hosts and take it out of the victim pool (its charge runs on until it exits)."""
        self.pool.discard(w, self.hosts)
        self.hosts.release(w.wid, w.hosts, w.node)
        if w.exposed:
            self.occ.exposed_changed(self.chain(w), -w.held)
            w.exposed = False
        if not w.allocated:
            self.pool.run_unallocated(-w.held)
        if w.shielded:
            assert w.node is not None
            self.pool.shield(w.node, -w.held)
            w.shielded = False

    def _begin_run(self, w: Workload, t: int, out: list[Event]) -> None:
        protect = progress.protection_s(self, w)  # before the attempt counts: only a restart is covered
        w.state = RUNNING
        w.epoch += 1
        w.attempt += 1
        w.start_us = w.last_ckpt_us = t
        chain = self.chain(w)
        self.occ.run_changed(chain, t, w.held, w.allocated)
        if w.allocated and (self.knobs.policy != "priority" or w.shielded):
            w.protected_until = t + protect * _US
            if w.shielded:
                assert w.node is not None
                self.pool.shield(w.node, w.held)
            if self.knobs.policy == "fairshare":
                if self.occ.upfront:
                    self.occ.prepaid_changed(chain, w.held, w.protected_until)
                    w.prepaid = True
                self.wakeups.workload(w.protected_until, PROTECT, w)
        else:
            # unallocated, or (priority policy) allocated work beyond its team's non-preemptible limit
            w.protected_until = t
            if not w.allocated:
                self.pool.run_unallocated(w.held)
                if self.knobs.policy == "fairshare" and self.knobs.fill_protect_s:
                    # (on a held host never past the hold's time)
                    w.protected_until = self.holds.clip(w, t + protect * _US, self.hosts)
                    if w.protected_until > t:
                        self.wakeups.workload(w.protected_until, PROTECT, w)
            if self.knobs.policy != "fifo" and w.protected_until == t:
                self.pool.add(w, self.hosts)
        out.append(
            self.outputs.new(
                WorkloadStarted, t,
                {"workload_id": w.wid, "nodes": self.hosts.names(w.hosts), "gpus": w.held, "allocated": w.allocated,
                 # the window's end as ``from_us`` gives it, without its interpreted call
                 "protected_until": EPOCH + timedelta(0, 0, min(w.protected_until, LAST_US)), "attempt": w.attempt},
            )
        )

    def start_run(
        self, w: Workload, hosts: list[int], t: int, position: int, out: list[Event], why: str, grace: int = 0
    ) -> None:
        """Decide to start ``w`` on ``hosts`` now, or after the grace period when it follows a preemption."""
        self.order.remove(w)
        w.hosts = hosts
        w.held = w.size
        w.allocated = w.wants_allocation
        w.shielded = self.within_team_limit(w)
        self.hosts.place(w.wid, hosts, w.size, w.node)
        out.append(self.decide("start", w, t, t + grace, why, position=position))
        if grace:
            w.state = STARTING
            w.epoch += 1
            self.wakeups.workload(t + grace, START, w)
        else:
            self._begin_run(w, t, out)

    def _cancel_start(self, w: Workload, t: int, out: list[Event], why: str) -> None:
        unreserve(self, w)
        w.state = WAITING
        w.epoch += 1
        self.order.add(w)
        out.append(self.decide("requeue", w, t, t, why + ": its start was called off, back in the queue"))

    def preempt_run(
        self, w: Workload, t: int, out: list[Event], reason: str, by: Workload | None, why: str,
        immediate: bool = False, position: int | None = None,
    ) -> None:
        """Decide to preempt a running workload; it exits now or when the grace period ends."""
        self._detach(w)
        w.state = EXITING
        w.epoch += 1
        w.draining = False
        w.exit_reason = reason
        w.exit_by = by.wid if by is not None else None
        if by is not None:
            w.preemptions += 1
        grace = 0 if immediate else self.knobs.grace_s * _US
        w.exit_us = t + grace
        out.append(self.decide("preempt", w, t, t + grace, why, for_workload=w.exit_by, position=position))
        if grace:
            self.wakeups.workload(t + grace, EXIT, w)
            if by is None:
                keep_exiting(self, w)  # no waiter takes its GPUs: it holds them all until it leaves
        else:
            self._exit(w, t, out)

    def _exit(self, w: Workload, t: int, out: list[Event]) -> None:
        """The victim leaves: free its hosts, stop its charge; requeue it, or cancel it when it cannot resume."""
        leave_hosts(self, w)
        self._account_stop(w, t)
        w.epoch += 1
        reason: Any = w.exit_reason
        out.append(
            self.outputs.new(WorkloadPreempted, t, {"workload_id": w.wid, "reason": reason, "preempted_by": w.exit_by})
        )
        if w.resumable:
            w.state = WAITING
            self.order.add(w)
            out.append(self.decide("requeue", w, t, t, "resumable: requeued automatically, keeps its submit time"))
            out.append(self.outputs.new(WorkloadRequeued, t, {"workload_id": w.wid}))
        else:
            self.workloads.finish(w, t)
            out.append(
                self.decide("complete", w, t, t, "not resumable: cancelled by the preemption, must be resubmitted")
            )
            out.append(self.outputs.new(WorkloadCompleted, t, {"workload_id": w.wid, "outcome": "cancelled"}))
        victim_left(self, w, t)

    # ================================================================ the scheduling pass
    def _pass(self, t: int, out: list[Event], fresh: list[Workload] | None = None) -> None:
        # Allocated work first, preemption for it next, and only then unallocated work into what is
        # left: free-tier work started into room an allocated waiter is about to take would be
        # preempted at the same instant.
        if self.knobs.policy == "priority":
            # strictly by priority: a waiter preempts for room before lower-priority work backfills it
            priority_pass(self, t, out, fresh or [])
            self._cycle_done(t)
            self.passes.ran(t)
            return
        fair = isinstance(self.order, FairShareOrder)
        if fair and self.knobs.debug_hosts is None:  # the debug partition sized from the debug runs of the last day
            lanes.size_partition(self, t)
        lane = bool(self.hosts.lane_hosts)  # a debug partition with hosts now
        while True:
            if fair:  # debug runs first: the partition, any room, held room (``lanes``)
                lanes.start_debug(self, t, out)
            fill.fill(self, t, out, allocated_only=True)
            walk = self.passes.walk_due(t)
            if lane and (walk or fresh) and lanes.preempt_debug(self, t, out):
                continue
            if fresh and not walk:
                # a new submission is tried at once (O(p log p)) even between preemption cycles
                waiter = fresh.pop(0)
                if waiter.state == WAITING and waiter.wants_allocation and preempt_for(self, waiter, t, out):
                    continue
                if fresh:
                    continue
            if walk and preempt_once(self, t, out):
                continue
            self._cycle_done(t)
            break
        holds.pass_holds(self, t, out)  # the head's hold: its start, the held room soaked, or a grant
        if fair:  # room the hold step freed (a holder starting elsewhere, victims at a hold's time) serves debug first
            lanes.start_debug(self, t, out)
        fill.fill(self, t, out)
        if lane:
            lanes.fill_lane(self, t, out)  # free fill soaks the debug partition as any host
        holds.fill_held(self, t, out)
        self.passes.ran(t)
        progress.queue_recheck(self, t)

    def _cycle_done(self, t: int) -> None:
        """Close the pass's preemption cycle: a walk at ``t`` puts the next one a cycle later, else wake for it."""
        passes = self.passes
        if passes.walk_due(t):
            passes.walked(t, self.knobs.preempt_cycle_s * _US)
        elif self.pool.any():
            self.wakeups.once(passes.walk_after, CYCLE)
