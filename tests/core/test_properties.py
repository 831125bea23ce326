"""Invariants of the decision core on random budget trees and random workload streams."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from tests.core.sim import Ledger, allowed_preemptions, drive, liveness_bound_us
from tests.factories import Events

PER_NODE = 8


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[ev.Event], dict[str, float], int, list[str]]:
    """Draw a budget tree, a host count and a stream of submissions and host-health changes."""
    e = Events()
    hosts = draw(st.integers(2, 5))
    inputs: list[ev.Event] = [e.capacity(0, hosts * PER_NODE), e.node(0, "org", 1.0, ("ceo",))]
    paths = ["org"]
    frontier = ["org"]
    while frontier and len(paths) < 9:
        parent = frontier.pop(0)
        for i in range(draw(st.integers(0 if parent != "org" else 1, 3))):
            child = f"{parent}/n{i}"
            inputs.append(e.node(0, child, draw(st.sampled_from([0.5, 1.0, 2.0])), (f"m-{child}",)))
            paths.append(child)
            frontier.append(child)
    work: dict[str, float] = {}
    n = draw(st.integers(1, 22))
    for i in range(n):
        wid = f"w{i}"
        budget = draw(st.sampled_from([*paths, "nowhere/team"]))
        minute = draw(st.integers(1, 480))
        inputs.append(
            e.submit(
                minute, wid, budget,
                gpus=draw(st.sampled_from([1, 2, 4, 8, 8, 16])),
                min_runtime_s=draw(st.sampled_from([0, 600, 3600])),
                resumable=draw(st.booleans()),
                priority=draw(st.integers(0, 2)),
            )
        )
        # 10 and 60 minutes equal the minimum runtimes drawn: runs that complete as their protection ends
        work[wid] = draw(st.sampled_from([5, 10, 30, 60, 90, 240]))
        if draw(st.integers(0, 9)) == 0:
            inputs.append(e.checkpoint(minute + 20, wid, 600))
    for _ in range(draw(st.integers(0, 2))):
        host = f"lab-n{draw(st.integers(0, hosts - 1)):03d}"
        minute = draw(st.integers(1, 480))
        inputs.append(e.host(minute, host, draw(st.sampled_from(["unhealthy", "failed"]))))
        inputs.append(e.host(minute + draw(st.integers(10, 200)), host, "healthy"))
    if draw(st.booleans()) and len(paths) > 1:
        target = draw(st.sampled_from(paths[1:]))
        who = draw(st.sampled_from(["ceo", "stranger", f"m-{target}"]))
        inputs.append(e.allocate(draw(st.integers(1, 480)), target, draw(st.sampled_from([0.25, 3.0])), who))
    return inputs, work, hosts, paths


def _ordered(inputs: list[ev.Event]) -> list[ev.Event]:
    return sorted(inputs, key=lambda x: x.time)


def _ledger(hosts: int) -> Ledger:
    return Ledger(PER_NODE, {f"lab-n{i:03d}": PER_NODE for i in range(hosts)})


KNOBS = st.sampled_from(
    [
        Knobs(),
        Knobs(charge="accrued"),
        Knobs(max_min_runtime_s=1800, preempt_cycle_s=60),
        Knobs(preemption_strategy="instant"),
        Knobs(window_s=3 * 3600),
        Knobs(half_life_s=7200, grace_s=0),
        Knobs(policy="priority"),
        Knobs(policy="fifo"),
        Knobs(preempt_uncheckpointed=True),
        Knobs(standing_check_s=0),
    ]
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(clusters(), KNOBS)
def test_hosts_are_never_overfilled_protected_work_is_never_preempted_and_nothing_that_fits_waits(
    cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs
) -> None:
    inputs, work, hosts, _ = cluster
    ledger = _ledger(hosts)

    def check(core: DecisionCore, led: Ledger) -> None:
        kept = core.knobs.fill_headroom * core.hosts.capacity if core.knobs.policy == "fairshare" else 0
        hold = core.hold
        held = core.hosts.names(hold.hosts) if hold is not None else ()
        partition = core.hosts.names(core.hosts.lane_hosts)
        stuck = led.nothing_waiting_fits(math.ceil(kept), held, hold.wid if hold is not None else "", partition)
        assert stuck is None, f"{stuck} waits although it fits the free room"
        # the hosts each budget runs on, as placement counts them, are the hosts its runs are on
        counted: dict[str, dict[int, int]] = {}
        for h in core.hosts.hosts:
            for wid in h.workloads:
                node = core.workloads[wid].node
                if node is not None:
                    counted.setdefault(node, {}).setdefault(h.index, 0)
                    counted[node][h.index] += 1
        assert core.hosts.budget_hosts == counted

    # Ledger.fact asserts capacity per host and the protected window on every preemption.
    drive(DecisionCore(knobs, "lab"), _ordered(inputs), work, ledger=ledger, check=check)


def _run_to_the_end(cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs) -> tuple[
    DecisionCore, list[ev.Event]
]:
    """Drive a cluster until nothing is left; assert every workload finished within the liveness bound."""
    inputs, work, hosts, _ = cluster
    ordered = _ordered(inputs)
    ledger = _ledger(hosts)
    # drive() has no cap: it fails past liveness_bound_us, and on a preemption at a completion instant;
    # Ledger.fact asserts every host's capacity (a victim's GPUs are freed at its WorkloadPreempted)
    _, core = drive(DecisionCore(knobs, "lab"), ordered, work, ledger=ledger)
    assert not ledger.waiting and not ledger.open, f"left unfinished: {sorted(ledger.waiting)} {sorted(ledger.open)}"
    assert core.next_wakeup() is None
    bound = liveness_bound_us(core, ordered, work)
    assert bound is None or core.now <= bound
    return core, ordered


@FAST
@given(clusters(), KNOBS)
def test_liveness_every_workload_finishes_within_the_stated_bound_and_none_is_preempted_as_it_completes(
    cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs
) -> None:
    core, ordered = _run_to_the_end(cluster, knobs)
    if knobs.policy == "fairshare":
        ckpts = [e.workload_id for e in ordered if isinstance(e, ev.CheckpointWritten)]
        for w in core.workloads.values():
            if w.wants_allocation:
                allowed = allowed_preemptions(knobs, ckpts.count(w.wid))
                assert w.preemptions <= allowed, f"{w.wid} preempted {w.preemptions} times (at most {allowed})"


@FAST
@given(clusters(), st.sampled_from([Knobs(), Knobs(charge="accrued"), Knobs(window_s=2 * 3600)]))
def test_charged_gpu_time_is_exact_and_adds_up_the_tree(
    cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs
) -> None:
    inputs, work, hosts, paths = cluster
    ledger = _ledger(hosts)
    chains = {p: [p[: i] for i in range(len(p) + 1) if i == len(p) or p[i] == "/"] for p in paths}

    def check(core: DecisionCore, led: Ledger) -> None:
        t = core.now
        window = knobs.window_s * 1_000_000
        recounts = led.charged_by_node(chains, t, window, knobs.charge == "upfront")
        for p in paths:
            if p not in core.tree:
                continue  # not defined yet at this point of the stream
            recount = recounts.get(p, 0)
            assert core.charged_us(p) == recount, f"{p}: core {core.charged_us(p)} != recount {recount}"
            children = core.tree.nodes[p].children
            own = recount - sum(recounts.get(c, 0) for c in children)
            assert core.charged_us(p) == sum(core.charged_us(c) for c in children) + own
            assert own >= 0

    drive(DecisionCore(knobs, "lab"), _ordered(inputs), work, ledger=ledger, check=check)


@FAST
@given(clusters(), KNOBS, st.integers(1, 40))
def test_same_events_give_the_same_bytes_and_a_restored_snapshot_carries_on_identically(
    cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs, cut: int
) -> None:
    inputs, work, _, _ = cluster
    ordered = _ordered(inputs)
    first, core1 = drive(DecisionCore(knobs, "lab"), ordered, work)
    second, core2 = drive(DecisionCore(knobs, "lab"), ordered, work)
    assert first == second
    assert core1.snapshot() == core2.snapshot()
    resumed, _ = drive(DecisionCore(knobs, "lab"), ordered, work, cut=min(cut, len(ordered)))
    assert resumed == first


def test_grace_delays_the_victims_exit_and_the_waiters_start_by_the_same_amount() -> None:
    e = Events()
    knobs = Knobs(grace_s=120)
    core = DecisionCore(knobs, "lab")
    setup = [e.capacity(0, 8), e.node(0, "org", 1.0), e.node(0, "org/a", 1.0), e.node(0, "org/b", 1.0)]
    for x in setup:
        core.handle(x)
    core.handle(e.submit(1, "free", "org/a", gpus=8, min_runtime_s=0))
    # after the free fill's short protected window (5 minutes)
    out = core.handle(e.submit(7, "paid", "org/b", gpus=8, min_runtime_s=3600))
    decisions = [o for o in out if isinstance(o, ev.SchedulingDecision)]
    assert [(d.action, d.workload_id) for d in decisions] == [("preempt", "free"), ("start", "paid")]
    assert all(d.effective_time == d.time + timedelta(seconds=120) for d in decisions)
    assert not any(isinstance(o, ev.WorkloadStarted | ev.WorkloadPreempted) for o in out)
    assert core.next_wakeup() == ev.to_us(decisions[0].time) + 120_000_000
    later = core.advance(core.next_wakeup() or 0)
    kinds = [type(o).__name__ for o in later]
    assert kinds.index("WorkloadPreempted") < kinds.index("WorkloadStarted")


GRACE_KNOBS = st.sampled_from(
    [Knobs(grace_s=120), Knobs(grace_s=600, preemption_strategy="instant"), Knobs(grace_s=300, max_min_runtime_s=600)]
)


@FAST
@given(clusters(), GRACE_KNOBS)
def test_with_a_grace_period_hosts_are_never_overfilled_and_every_workload_still_finishes(
    cluster: tuple[list[ev.Event], dict[str, float], int, list[str]], knobs: Knobs
) -> None:
    """A victim runs on through its grace period: nothing else may start on the GPUs it still uses."""
    _run_to_the_end(cluster, knobs)
