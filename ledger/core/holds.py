"""Holds (the *No starvation* rule): hosts kept for the head of the fair-share order until its room is free.

Rules (fair share; docs/rules.md, "Holds"):

* **Grant.** After a pass's allocated starts and preemptions, when no hold stands, the allocated
  waiter at the head of the fair-share order (it could neither start nor preempt for room) is
  granted a hold on the hosts where its room frees earliest: the whole hosts (a wide waiter) or
  the one host (a narrow one) whose runs' protected windows end first. A host's room frees when
  the last protected window on it ends (free fill frees at once; a victim leaving after its grace
  period, when it leaves). A host held by a *settled* run (preempted ``max_preemptions`` times and
  not checkpointed since: it keeps its GPUs until it checkpoints or ends), by a starting run, or by
  a run of the holder's own budget (ahead of it inside the leaf) frees at no known time and is not
  chosen. The hold's time must lie ahead: when the hosts chosen are past protection already, the
  room is the preemption step's (under its swap test, which refused it), and the waiter waits for
  a standing change or for room whose protection ends later, not for a hold that preempts at once
  — unless it has waited ``hold_span_s`` since it last began to wait (submitted or requeued), so
  the stated bound still holds.
  When the head cannot be held so, the next waiters in the order are tried (``TRIES`` in all). One
  hold stands at a time.
* **While it stands.** Held hosts are out of the free room every other start and preemption sees.
  Allocated work may start on them only when its protected window ends by the hold's time
  (``soak``, in fair-share order, at most ``TRIES_SOAK`` candidates a pass); free fill may start
  there (with no protected window past the hold's time). A change of head neither moves nor drops
  the hold: it stands until its holder starts.
* **Its time.** The holder starts on the held hosts as soon as they seat it, and at the latest at
  the hold's time: then every run on them past its protected window is preempted for it (free
  fill, and allocated work of any budget, checkpointed or not), cheapest first and only as many as
  seat it, with no further swap test: the holder stood first when the hold was granted, and the
  runs there were started knowing the hosts were held (or were protected no longer than the
  hold's time). Should a run there still be protected (started during a grace period), the hold's
  time moves to the end of its window.
* **The debug partition** (``lanes``) is never held, except for a run that needs more hosts than
  there are outside it: its hold may take partition hosts, and is granted even when the room it
  needs is free now (only a hold can give it room the preemption step never sees). Allocated work
  soaking held room is never placed on a held partition host; free fill is.
* **Dropped** when the holder starts (anywhere), leaves the queue, or a held host changes health
  or the cluster's capacity changes (a new hold is granted at the next pass).

Costs: a grant looks at every host's runs once (O(runs)); a standing hold costs O(held hosts) a
pass, and its soak at most ``TRIES_SOAK`` candidates.
"""

from __future__ import annotations

from functools import partial

from ledger.core import progress
from ledger.core.contract import EXITING, RUNNING, WAITING, Workload, hold_span_s
from ledger.core.fairshare import ALLOCATED, FairShareOrder, Pick
from ledger.core.fill import fill_into
from ledger.core.grace import keep_exiting
from ledger.core.held import Hold
from ledger.core.knobs import format_duration
from ledger.core.placement import Fits, hosts_needed
from ledger.core.reasons import start_reason
from ledger.core.state import CoreState
from ledger.core.wakeups import HOLD
from ledger.core.walk import walk_allocated
from ledger.events import Event, from_us

__all__ = ["NARROW_LATER_S", "TRIES", "TRIES_SOAK", "choose_held", "fill_held", "held_fits", "pass_holds", "soak_words"]

_US = 1_000_000
_NEVER = 1 << 62
TRIES = 8  # waiters tried, in fair-share order, for a grant when the ones before cannot be held for
TRIES_SOAK = 32  # waiters looked at per pass for room on held hosts (as Slurm's bf_max_job_test bounds its backfill)
# Where a wide run's room is gathered: a host running narrow allocated work counts as freeing this much later than
# it does, so a hold takes the hosts wide runs free (whole hosts, and no short work turned away) unless short
# work's hosts free that much sooner (docs/rules.md, "Holds": 1 h measured against none and against always).
NARROW_LATER_S = 3600


def pass_holds(core: CoreState, t: int, out: list[Event]) -> None:
    """Run a pass's hold steps, after its allocated starts and preemptions: start the holder, soak, grant."""
    if not isinstance(core.order, FairShareOrder):
        return
    hold: Hold | None = core.holds.hold
    if hold is not None:
        holder = core.workloads.get(hold.wid)
        if holder is None or holder.state != WAITING:
            core.holds.drop(core.hosts)  # started elsewhere, or left the queue
        elif not _take(core, hold, holder, t, out):
            _soak(core, hold, t, out)
    if core.holds.may_grant(t) and progress.allocated_waiting(core):
        granted = _grant(core, t, out)
        if granted is not None:
            _soak(core, granted, t, out)
        else:
            # nothing to hold for among the first waiters: look again a standing check later (or at the
            # next drop), not at every pass (a grant looks at every run)
            core.holds.retry_after(t + max(1, core.knobs.standing_check_s) * _US)


# ---------------------------------------------------------------- grant
def _grant(core: CoreState, t: int, out: list[Event]) -> Hold | None:
    """Grant a hold to the first waiter, among the first heads of the order, that can be held for; return it."""
    order = core.order
    assert isinstance(order, FairShareOrder)
    tried = 0
    per = core.hosts.per_node
    for _node, queue, _ahead, _walker in walk_allocated(order, t):
        for key, size in queue.heads():
            tried += 1
            if tried > TRIES:
                return None
            if size <= per:
                continue  # one host or less: the rules of a single host's room apply (see the docstring)
            w = core.workloads[key[2]]
            found = _earliest_room(core, w, t)
            # a hold's time lies ahead: room that is free of protection now is the preemption step's to give,
            # under its swap test, and a hold at "now" would take it with no test at all (the churn of two
            # budgets taking each other's hosts through holds, each restarted elsewhere at once); only a
            # waiter that has waited a hold's span already is held for at "now" (the bound stays as stated)
            # (a run too wide for the hosts outside the debug partition is the exception: the preemption step
            # never sees the partition, so only a hold gives it room, and it is held for at "now" too)
            if found is not None and (
                found[1] > t or t - _waiting_since(w) >= hold_span_s(core.knobs) * _US or _beyond_lane(core, size)
            ):
                hosts, until = found
                hold = Hold(w.wid, hosts, until, t, w.size)
                core.holds.grant(hold, core.hosts)
                core.wakeups.timed(until, HOLD)
                words = _hold_words(core, w, hosts, until, t)
                out.append(core.decide("hold", w, t, until, words, position=order.position_of(w, t), hosts=hosts))
                return hold
    return None


def _beyond_lane(core: CoreState, size: int) -> bool:
    """Return whether a run of ``size`` GPUs needs more hosts than there are outside the debug partition."""
    hosts = core.hosts
    return bool(hosts.lane_hosts) and hosts_needed(size, hosts.per_node) > hosts.outside_hosts()


def _waiting_since(w: Workload) -> int:
    """Return when (µs) ``w`` last began to wait: its submission, or the end of its last run."""
    return w.exit_us if w.attempt else w.submit_us


def _frees_at(core: CoreState, v: Workload, t: int, holder: Workload | None = None) -> int:
    """Return when (µs) a hold for ``holder`` could take the GPUs ``v`` holds: its protected window's end, or never."""
    if holder is not None and v.allocated and v.node == holder.node and v.key < holder.key:
        # the holder's own budget: work that ranks ahead of the holder inside the leaf (priority, then submit
        # time) keeps its GPUs, so a hold waits for it to end; work that ranks behind it (started while the
        # holder could not) is held for like any other, or one leaf's narrow runs could keep it off for ever
        return _NEVER
    if v.state == EXITING:
        return max(t, v.exit_us)
    if v.state != RUNNING:
        return _NEVER  # starting after a grace period: its window is not known yet
    if v.allocated and v.preemptions >= core.knobs.max_preemptions and not (
        v.resumable and v.last_ckpt_us > v.start_us
    ):
        return _NEVER  # settled: keeps its GPUs until it checkpoints or ends
    return max(t, v.protected_until)


def _earliest_room(core: CoreState, w: Workload, t: int) -> tuple[list[int], int] | None:
    """Return the hosts where ``w``'s room frees earliest and when, or None when no such time is known. O(runs)."""
    hosts = core.hosts
    per = hosts.per_node
    size = w.size
    workloads = core.workloads
    open_ = hosts.healthy  # the debug partition left out (``lanes``) ...
    if size > per:
        need = hosts_needed(size, per)
        if _beyond_lane(core, size):
            open_ = hosts.open  # ... unless the run needs more hosts than there are outside it
        ready: list[tuple[int, int, int]] = []
        for h in hosts.hosts:
            if h.gpus != per or not open_[h.index]:
                continue
            at = t
            narrow = False
            for wid in h.workloads:
                v = workloads[wid]
                at = max(at, _frees_at(core, v, t, w))
                if at >= _NEVER:
                    break
                narrow = narrow or (v.allocated and v.held <= per)
            if at < _NEVER:
                # a host of narrow allocated work counts as freeing NARROW_LATER_S later: gathering room for a
                # wide run takes hosts that wide runs free before it takes the hosts short work runs on
                ready.append((at + NARROW_LATER_S * _US if narrow else at, h.index, at))
        if len(ready) < need:
            return None
        ready.sort()
        chosen = ready[:need]
        return sorted(i for _, i, _ in chosen), max(at for _, _, at in chosen)
    best: tuple[int, int] | None = None
    for h in hosts.hosts:
        if h.gpus < size or not open_[h.index]:
            continue
        short = size - (h.gpus - h.used)
        at = t
        if short > 0:
            frees = sorted((_frees_at(core, workloads[wid], t, w), g) for wid, g in h.workloads.items())
            for when, g in frees:
                at = when
                short -= g
                if short <= 0:
                    break
        if at < _NEVER and (best is None or at < best[0]):
            best = (at, h.index)
    if best is None:
        return None
    return [best[1]], best[0]


def _hold_words(core: CoreState, w: Workload, hosts: list[int], until: int, t: int) -> str:
    what = f"{len(hosts)} hosts" if len(hosts) > 1 else f"host {core.hosts.hosts[hosts[0]].name}"
    when = (
        f"now: the runs there are past their protected windows, and it has waited "
        f"{format_duration((t - _waiting_since(w)) // _US)}"
        if until <= t
        else f"{from_us(until):%Y-%m-%d %H:%M} UTC, when the last protected window on them ends "
        f"(in {format_duration((until - t + _US - 1) // _US)})"
    )
    return (
        f"first in the fair-share order and neither free room nor preemption seats it: holding {what} for "
        f"{w.wid} ({w.size} GPUs) until {when}; meanwhile only work whose protected window ends by then, and "
        f"free fill, starts there"
    )


# ---------------------------------------------------------------- the holder's start
def _take(core: CoreState, hold: Hold, holder: Workload, t: int, out: list[Event]) -> bool:
    """Start the holder on its held hosts if they seat it, preempting there once the hold's time has come."""
    hosts = core.hosts
    hl = hosts.hosts
    per = hosts.per_node
    size = holder.size
    chosen: list[int] = []
    if size > per:
        need = hosts_needed(size, per)
        chosen = [i for i in hold.hosts if hl[i].used == 0][:need]
        if len(chosen) < need:
            # wholly free hosts outside the hold count too (the held ones first)
            chosen += hosts.buckets[per][: need - len(chosen)]
            chosen.sort()
        if len(chosen) < need and t >= hold.until:
            chosen = _clear_wide(core, hold, holder, need, t, out)
        if len(chosen) < need:
            return False
    else:
        i = hold.hosts[0]
        if hl[i].gpus - hl[i].used < size and t >= hold.until:
            _clear_narrow(core, hold, holder, i, t, out)
        if hl[i].gpus - hl[i].used < size:
            return False
        chosen = [i]
    core.holds.drop(core.hosts)
    position = core.order.position_of(holder, t)
    waited = format_duration((t - hold.since) // _US) if t > hold.since else "0s"
    why = f"on the hosts held for it since {from_us(hold.since):%Y-%m-%d %H:%M} UTC ({waited}); " + start_reason(
        core, holder, _pick(holder, position), chosen, t
    )
    # victims still running out a grace period for the holder (none without a grace: they left at once); the
    # scan looks at every workload the core knows, so it is made only when there can be some
    victims = core.workloads.exiting_for(holder.wid) if core.knobs.grace_s else []
    grace = core.knobs.grace_s * _US if victims else 0
    core.start_run(holder, chosen, t, position, out, why, grace=grace)
    for v in victims:
        keep_exiting(core, v)
    return True


def _clear_wide(core: CoreState, hold: Hold, holder: Workload, need: int, t: int, out: list[Event]) -> list[int]:
    """Preempt the runs past their protection on enough held hosts to seat the holder; return those hosts."""
    hl = core.hosts.hosts
    workloads = core.workloads
    ready: list[tuple[int, int]] = []  # (GPU-µs the host's runs would lose, host)
    later = hold.until
    for i in hold.hosts:
        runs = [workloads[wid] for wid in hl[i].workloads]
        if all(v.state == RUNNING and v.protected_until <= t for v in runs):
            ready.append((sum(v.lost_if_preempted(t) for v in runs), i))
        else:
            later = max([later, *(_frees_at(core, v, t) for v in runs if v.state != RUNNING or v.protected_until > t)])
    if len(ready) < need:
        _move(core, hold, later)
        return []
    ready.sort()
    chosen = sorted(i for _, i in ready[:need])
    seen: dict[str, None] = {}
    for i in chosen:
        for wid in hl[i].workloads:
            seen[wid] = None
    _preempt_all(core, hold, holder, [workloads[wid] for wid in seen], t, out)
    return chosen


def _clear_narrow(core: CoreState, hold: Hold, holder: Workload, i: int, t: int, out: list[Event]) -> None:
    """Preempt, cheapest first, the runs past their protection on the held host until it seats the holder."""
    h = core.hosts.hosts[i]
    runs = sorted(
        (v.lost_if_preempted(t), v.wid, v)
        for v in (core.workloads[wid] for wid in h.workloads)
        if v.state == RUNNING and v.protected_until <= t
    )
    short = holder.size - (h.gpus - h.used)
    taken: list[Workload] = []
    for _, _, v in runs:
        if short <= 0:
            break
        taken.append(v)
        short -= h.workloads[v.wid]
    if short > 0:
        later = min((_frees_at(core, core.workloads[wid], t) for wid in h.workloads), default=hold.until)
        _move(core, hold, max(later, t + 1))
        return
    _preempt_all(core, hold, holder, taken, t, out)


def _preempt_all(core: CoreState, hold: Hold, holder: Workload, victims: list[Workload], t: int,
                 out: list[Event]) -> None:
    position = core.order.position_of(holder, t)
    since = f"{from_us(hold.since):%Y-%m-%d %H:%M} UTC"
    for v in victims:
        lost = v.lost_if_preempted(t) // _US
        tier = "free fill" if not v.allocated else "past its protected window"
        why = (
            f"on a host held since {since} for {holder.wid} ({holder.size} GPUs), whose time has come: {tier}, "
            f"preempted for it (it discards {lost} GPU-seconds since its last checkpoint)"
        )
        core.preempt_run(v, t, out, "fair_share", holder, why, position=position)


def _move(core: CoreState, hold: Hold, until: int) -> None:
    """Put the hold's time off to ``until`` (a run on its hosts is still protected) and wake then."""
    if until > hold.until and until < _NEVER:
        hold.until = until
        core.wakeups.timed(until, HOLD)


# ---------------------------------------------------------------- soaking the held room
def _held_fits(core: CoreState, hold: Hold, soak: bool = False) -> Fits:
    """Return which sizes fit the held hosts' free room (``soak``: the held hosts outside the debug partition)."""
    hl = core.hosts.hosts
    per = core.hosts.per_node
    lane = core.hosts.lane
    most, whole = 0, 0
    for i in hold.hosts:
        if soak and lane[i]:
            continue  # allocated work soaking held room is no debug run: it never starts on the partition
        h = hl[i]
        free = h.gpus - h.used
        if free > most:
            most = free
        if free == per and h.gpus == per:
            whole += 1
    return Fits(per, most, whole)


def held_fits(core: CoreState, hold: Hold, at_most: int) -> Fits:
    """Return which sizes up to ``at_most`` GPUs fit the held room allocated work may soak."""
    fits = _held_fits(core, hold, soak=True)
    return Fits(fits.per, min(fits.most, at_most), fits.whole if at_most >= fits.per else 0)


def choose_held(core: CoreState, hold: Hold, size: int) -> list[int]:
    """Return the held hosts allocated work of ``size`` GPUs soaks (``_choose_held``, off the debug partition)."""
    return _choose_held(core, hold, size, soak=True)


def soak_words(hold: Hold, hosts: list[int]) -> str:
    """Return what a start on held room adds to its reason: whose hold, until when, and why it may start there."""
    return (
        f"; on {'hosts' if len(hosts) > 1 else 'a host'} held for {hold.wid} until "
        f"{from_us(hold.until):%Y-%m-%d %H:%M} UTC: its protected window ends by then"
    )


def _soak(core: CoreState, hold: Hold, t: int, out: list[Event]) -> None:
    """Start on held room, in fair-share order, allocated work whose protected window ends by the hold's time."""
    fits = _held_fits(core, hold, soak=True)
    if not fits.most:
        return
    order = core.order
    assert isinstance(order, FairShareOrder)
    left = hold.until - t
    tried = 0
    started = True
    while started and fits.most:
        started = False
        for _node, queue, _ahead, _walker in walk_allocated(order, t):
            for key, size in queue.heads():
                tried += 1
                if tried > TRIES_SOAK:
                    return
                w = core.workloads[key[2]]
                if w.wid == hold.wid or not fits.ok(size) or progress.protection_s(core, w) * _US > left:
                    continue
                if w.preemptions >= core.knobs.max_preemptions:
                    continue  # it would be preempted at the hold's time once more without a checkpoint
                hosts = _choose_held(core, hold, size, soak=True)
                position = order.position_of(w, t)
                why = start_reason(core, w, _pick(w, position), hosts, t) + soak_words(hold, hosts)
                core.start_run(w, hosts, t, position, out, why)
                started = True
                break
            if started:
                break
        fits = _held_fits(core, hold, soak=True)


def fill_held(core: CoreState, t: int, out: list[Event]) -> None:
    """Start free fill on the free room of held hosts (it is preempted when the hold's time comes)."""
    hold = core.holds.hold
    if hold is None:
        return
    fill_into(core, t, out, partial(_held_fits, core, hold), partial(_choose_held, core, hold), _HeldWords(hold))


class _HeldWords:
    """The words of a fill start on held hosts (a class: a compiled closure forms a reference cycle)."""

    __slots__ = ("hold",)

    def __init__(self, hold: Hold) -> None:
        self.hold = hold

    def __call__(self, core: CoreState, w: Workload, pick: Pick, hosts: list[int], t: int) -> str:
        hold = self.hold
        return start_reason(core, w, pick, hosts, t) + (
            f"; on {'hosts' if len(hosts) > 1 else 'a host'} held for {hold.wid} until "
            f"{from_us(hold.until):%Y-%m-%d %H:%M} UTC, preempted then if still running"
        )


def _choose_held(core: CoreState, hold: Hold, size: int, soak: bool = False) -> list[int]:
    """Return held hosts for ``size`` GPUs: the fullest that fits (narrow), the lowest wholly free ones (wide).

    ``soak``: allocated work soaking held room, never placed on a held debug-partition host.
    """
    hl = core.hosts.hosts
    per = core.hosts.per_node
    lane = core.hosts.lane
    held = [i for i in hold.hosts if not lane[i]] if soak else hold.hosts
    if size > per:
        need = hosts_needed(size, per)
        return [i for i in held if hl[i].used == 0 and hl[i].gpus == per][:need]
    best, room = -1, per + 1
    for i in held:
        free = hl[i].gpus - hl[i].used
        if size <= free < room:
            best, room = i, free
    return [best]


def _pick(w: Workload, position: int) -> Pick:
    return Pick(w.key, position, ALLOCATED)
