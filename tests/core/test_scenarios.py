"""More of the cluster's day: the worked example, draining, failure, the free tier, wide work, baselines."""

from __future__ import annotations

from datetime import timedelta

from ledger import events as ev
from ledger.core import DecisionCore, Knobs
from tests.core.test_day import of, run, to_minutes
from tests.factories import Events, at

HOUR = 60


def _tree(e: Events, gpus: int, teams: dict[str, float]) -> list[ev.Event]:
    return [e.capacity(0, gpus), e.node(0, "org", 1.0, ("ceo",))] + [
        e.node(0, f"org/{t}", share) for t, share in teams.items()
    ]


def test_worked_example_ranks_b_first_and_d_second() -> None:
    """Teams A–D, shares 0.35/0.35/0.30/0.10, 7-day usage 5880/2000/5040/1344 GPU-hours on 100 GPUs."""
    e = Events()
    core = DecisionCore(Knobs(charge="accrued"), "lab")
    inputs = _tree(e, 100, {"A": 0.35, "B": 0.35, "C": 0.30, "D": 0.10})
    # GPUs held for the week by each team: A 35, B 20 (for 100 h), C 30, D 8 (the squatter)
    sizes = {"A": [8, 8, 8, 8, 3], "B": [8, 8, 4], "C": [8, 8, 8, 6], "D": [8]}
    for team, parts in sizes.items():
        for i, g in enumerate(parts):
            inputs.append(e.submit(0, f"{team}{i}", f"org/{team}", gpus=g, min_runtime_s=3600))
    run(core, inputs)
    assert len(core.running()) == 13
    run(core, [e.complete(100 * HOUR, f"B{i}") for i in range(3)])
    run(core, [e.complete(168 * HOUR, wid) for wid in list(core.running())])
    hours = {t: core.usage(f"org/{t}")["charged_gpu_s"] / 3600 for t in "ABCD"}
    assert hours == {"A": 5880, "B": 2000, "C": 5040, "D": 1344}
    order = [p for p in core.fair_share_order() if p != "org"]
    assert order[:2] == ["org/B", "org/D"]
    assert order == ["org/B", "org/D", "org/A", "org/C"]  # A and C tie at the same ratio: by path


def test_an_unhealthy_host_drains_each_workload_when_its_protected_window_ends() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    out = run(core, [*_tree(e, 16, {"a": 1.0}), e.submit(1, "long", "org/a", gpus=8, min_runtime_s=2 * 3600)])
    host = of(out, ev.WorkloadStarted)[0].nodes[0]  # type: ignore[attr-defined]
    out = run(core, [e.host(30, host, "unhealthy", "ECC errors")])
    drain = of(out, ev.SchedulingDecision)[0]
    assert drain.action == "drain" and "ECC errors" in drain.reason  # type: ignore[attr-defined]
    assert not of(out, ev.WorkloadPreempted)
    # new work avoids the draining host
    out = run(core, [e.submit(40, "next", "org/a", gpus=8, min_runtime_s=600)])
    assert of(out, ev.WorkloadStarted)[0].nodes[0] != host  # type: ignore[attr-defined]
    out = core.advance(to_minutes(121))
    pre = of(out, ev.WorkloadPreempted)
    assert [(p.workload_id, p.reason) for p in pre] == [("long", "host_drain")]  # type: ignore[attr-defined]
    assert of(out, ev.WorkloadRequeued)  # resumable: back in the queue


def test_a_host_that_recovers_before_the_window_ends_keeps_its_work() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    out = run(core, [*_tree(e, 8, {"a": 1.0}), e.submit(1, "long", "org/a", gpus=8, min_runtime_s=2 * 3600)])
    host = of(out, ev.WorkloadStarted)[0].nodes[0]  # type: ignore[attr-defined]
    run(core, [e.host(30, host, "unhealthy"), e.host(60, host, "healthy")])
    assert not of(core.advance(to_minutes(200)), ev.WorkloadPreempted)
    assert "long" in core.running()


def test_a_failed_host_preempts_even_protected_work_at_once() -> None:
    e = Events()
    core = DecisionCore(Knobs(grace_s=300), "lab")
    out = run(core, [*_tree(e, 8, {"a": 1.0}), e.submit(1, "job", "org/a", gpus=8, min_runtime_s=8 * 3600)])
    host = of(out, ev.WorkloadStarted)[0].nodes[0]  # type: ignore[attr-defined]
    out = run(core, [e.host(10, host, "failed")])
    pre = of(out, ev.WorkloadPreempted)
    assert [(p.workload_id, p.reason) for p in pre] == [("job", "host_failure")]  # type: ignore[attr-defined]
    assert pre[0].time == of(out, ev.SchedulingDecision)[0].time  # no grace for a failure
    assert core.waiting() == ["job"]  # requeued, and nowhere to go until the host is back
    out = run(core, [e.host(50, host, "healthy")])
    assert of(out, ev.WorkloadStarted)[0].attempt == 2  # type: ignore[attr-defined]


def test_the_free_tier_runs_in_idle_room_and_yields_first_and_a_non_resumable_victim_is_cancelled() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    inputs = [
        *_tree(e, 16, {"a": 1.0, "b": 1.0}),
        e.submit(1, "free", "org/a", gpus=8, min_runtime_s=0, resumable=False),
        e.submit(1, "paid-a", "org/a", gpus=8, min_runtime_s=600),
    ]
    out = run(core, inputs)
    started = {s.workload_id: s for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]
    # free fill keeps its GPUs for a short window (Knobs.fill_protect_s), then yields first
    fill_window = timedelta(seconds=Knobs().fill_protect_s)
    assert started["free"].allocated is False
    assert started["free"].protected_until == started["free"].time + fill_window
    assert started["paid-a"].allocated is True
    out = run(core, [e.submit(7, "paid-b", "org/b", gpus=8, min_runtime_s=600)])
    # the unallocated workload is the victim (the allocated one is protected anyway); it cannot resume
    assert [p.workload_id for p in of(out, ev.WorkloadPreempted)] == ["free"]  # type: ignore[attr-defined]
    done = of(out, ev.WorkloadCompleted)
    assert [(c.workload_id, c.outcome) for c in done] == [("free", "cancelled")]  # type: ignore[attr-defined]
    assert not of(out, ev.WorkloadRequeued)
    assert "free" not in core.waiting()
    # submitted again under the same id, it queues afresh (a redelivery of the old submission would not)
    run(core, [inputs[-2]])
    assert "free" not in core.waiting()
    run(core, [e.submit(8, "free", "org/a", gpus=8, min_runtime_s=0, resumable=False)])
    assert core.waiting() == ["free"]


def test_an_undefined_budget_runs_unallocated_and_says_why() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    out = run(core, [*_tree(e, 8, {"a": 1.0}), e.submit(1, "stray", "org/ghost", gpus=2, min_runtime_s=3600)])
    decision = of(out, ev.SchedulingDecision)[0]
    assert "org/ghost is not defined" in decision.reason  # type: ignore[attr-defined]
    assert of(out, ev.WorkloadStarted)[0].allocated is False  # type: ignore[attr-defined]
    assert core.usage("org")["charged_gpu_s"] == 0


def test_wide_work_takes_whole_named_hosts_and_narrow_work_is_packed() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    out = run(
        core,
        [
            *_tree(e, 32, {"a": 1.0}),
            e.submit(1, "small1", "org/a", gpus=2),
            e.submit(2, "small2", "org/a", gpus=4),
            e.submit(3, "wide", "org/a", gpus=12),
            e.submit(4, "spread", "org/a", gpus=4, nodes=2),  # asks for two hosts: takes them whole
        ],
    )
    nodes = {s.workload_id: s.nodes for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]
    assert nodes["small1"] == nodes["small2"] == ("lab-n000",)  # packed onto the partly used host
    assert nodes["wide"] == ("lab-n001", "lab-n002")
    assert of(out, ev.WorkloadStarted)[2].gpus == 16  # type: ignore[attr-defined]
    assert "spread" not in nodes and core.waiting() == ["spread"]  # only one wholly free host is left
    out = run(core, [e.complete(60, "wide")])
    assert [(s.workload_id, s.nodes, s.gpus) for s in of(out, ev.WorkloadStarted)] == [  # type: ignore[attr-defined]
        ("spread", ("lab-n001", "lab-n002"), 16)
    ]


def test_upfront_charge_stops_a_burst_from_sorting_ahead_on_stale_usage() -> None:
    def first_ranked(charge: str) -> str:
        e = Events()
        core = DecisionCore(Knobs(charge=charge), "lab")  # type: ignore[arg-type]
        run(core, [*_tree(e, 64, {"a": 1.0, "b": 1.0})])
        run(core, [e.submit(1, f"a{i}", "org/a", gpus=8, min_runtime_s=8 * 3600) for i in range(4)])
        return next(p for p in core.fair_share_order() if p != "org")

    assert first_ranked("upfront") == "org/b"  # a's burst is charged 4 × 8 GPUs × 8 h at once
    assert first_ranked("accrued") == "org/a"  # nothing accrued yet at that instant: a tie, broken by path


def test_priority_baseline_never_preempts_non_preemptible_work_and_caps_teams() -> None:
    e = Events()
    core = DecisionCore(Knobs(policy="priority"), "lab")
    out = run(
        core,
        [
            *_tree(e, 16, {"a": 1.0, "b": 1.0}),
            e.submit(1, "np", "org/a", gpus=8, min_runtime_s=600, priority=0),
            e.submit(1, "np2", "org/a", gpus=8, min_runtime_s=600, priority=0),
        ],
    )
    started = {s.workload_id: s for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]
    # both declared a minimum runtime, so both runs are allocated (charged to org/a) ...
    assert {w: s.allocated for w, s in started.items()} == {"np": True, "np2": True}
    # ... but team a's limit is half the cluster (8 GPUs): the second request runs preemptible, unprotected
    assert {w: s.protected_until > s.time for w, s in started.items()} == {"np": True, "np2": False}
    out = run(core, [e.submit(100, "hi", "org/b", gpus=8, min_runtime_s=600, priority=5)])
    assert [p.workload_id for p in of(out, ev.WorkloadPreempted)] == ["np2"]  # type: ignore[attr-defined]
    out = run(core, [e.submit(200, "higher", "org/b", gpus=8, min_runtime_s=0, priority=9)])
    assert not of(out, ev.WorkloadPreempted)  # "np" opted out of preemption; "hi" is non-preemptible too


def test_priority_baseline_does_not_start_work_that_a_higher_priority_waiter_preempts_at_once() -> None:
    """Two 8-GPU hosts. Team a's preemptible runs hold one host (r1, 8 GPUs) and half the other (r2, 4 GPUs).

    At 01:40 two requests arrive together: b's urgent 8-GPU run (priority 5) and b's 4-GPU job of
    priority -1 that cannot resume. The urgent run comes first: it takes r2's host, preempting r2
    (the cheaper victim). The low-priority job waits. It used to be backfilled into r2's free half
    first and then preempted in the same instant for the urgent run (the cheapest victim: it had
    run no time at all), which cancelled it without ever running.
    """
    e = Events()
    core = DecisionCore(Knobs(policy="priority"), "lab")
    teams = _tree(e, 16, {"a": 1.0, "b": 1.0})
    run(core, [*teams, e.submit(1, "r1", "org/a", gpus=8, min_runtime_s=0),
               e.submit(1, "r2", "org/a", gpus=4, min_runtime_s=0)])
    assert core.running() == {"r1": ("lab-n000",), "r2": ("lab-n001",)}
    for sub in (e.submit(100, "urgent", "org/b", gpus=8, min_runtime_s=0, priority=5),
                e.submit(100, "low", "org/b", gpus=4, min_runtime_s=0, priority=-1, resumable=False)):
        core.handle(sub, decide=False)
    out = core.advance(to_minutes(100))
    assert [p.workload_id for p in of(out, ev.WorkloadPreempted)] == ["r2"]  # type: ignore[attr-defined]
    assert [s.workload_id for s in of(out, ev.WorkloadStarted)] == ["urgent"]  # type: ignore[attr-defined]
    assert core.waiting() == ["r2", "low"]


def test_fifo_baseline_serves_by_arrival_and_backfills_without_preempting() -> None:
    e = Events()
    core = DecisionCore(Knobs(policy="fifo"), "lab")
    out = run(
        core,
        [
            *_tree(e, 16, {"a": 1.0}),
            e.submit(1, "big", "org/a", gpus=16, min_runtime_s=600),
            e.submit(2, "wide", "org/a", gpus=16, min_runtime_s=600),
            e.submit(3, "tiny", "org/a", gpus=1, min_runtime_s=0),
        ],
    )
    assert [s.workload_id for s in of(out, ev.WorkloadStarted)] == ["big"]  # type: ignore[attr-defined]
    out = run(core, [e.complete(30, "big")])
    assert [s.workload_id for s in of(out, ev.WorkloadStarted)] == ["wide"]  # type: ignore[attr-defined]
    assert not of(out, ev.WorkloadPreempted)


def test_asking_for_the_fair_share_order_leaves_later_ratios_in_the_same_instant_fresh() -> None:
    """A query between two events of one instant must not hide a meter change from the core's ratios."""
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_tree(e, 16, {"A": 0.5, "B": 0.5}), e.submit(10, "a1", "org/A", gpus=4, min_runtime_s=3600)])
    before = core.usage("org/A")["ratio"]
    run(core, [e.submit(10, "a2", "org/A", gpus=4, min_runtime_s=3600)])  # same instant: A is charged more
    core.fair_share_order()
    after = core.usage("org/A")["ratio"]
    assert after == 2 * before  # upfront: each run prepaid 4 GPUs × 1 h


def test_a_share_change_counts_as_the_window_slides_over_it() -> None:
    """Allocated time in the window is the integral of the shares in force, not today's share × window.

    Teams a and b split 16 GPUs evenly (8 GPUs each). At noon the manager triples b's share
    (b gets 12 GPUs' worth, a 4). With a one-day window, six hours later b's allocation covers
    18 h at 8 GPUs and 6 h at 12; a day after the change only the new shares count.
    """
    e = Events()
    core = DecisionCore(Knobs(window_s=86_400), "lab")
    run(core, _tree(e, 16, {"a": 1.0, "b": 1.0}))
    assert core.usage("org/b", to_minutes(6 * HOUR))["allocation_gpu_s"] == 8 * 24 * 3600
    run(core, [e.allocate(12 * HOUR, "org/b", 3.0, "ceo")])

    def worth(team: str, hours: float) -> float:
        return round(core.usage(f"org/{team}", to_minutes(hours * HOUR))["allocation_gpu_s"] / 3600, 6)

    assert (worth("b", 18), worth("a", 18)) == (8 * 18 + 12 * 6, 8 * 18 + 4 * 6)
    assert (worth("b", 36), worth("a", 36)) == (12 * 24, 4 * 24)


def test_a_victim_in_its_grace_period_keeps_the_gpus_its_waiter_does_not_take() -> None:
    """One 8-GPU host, a 5-minute grace, teams a and b at equal shares.

    a's 8-GPU run (checkpointed at 50 min) has held the host for an hour when b submits two 4-GPU
    jobs. The first needs a preempted: a gets five minutes to exit, and b's job starts when a is gone. a still holds
    all 8 GPUs during those five minutes, so b's second job cannot start before a exits either:
    it starts at 65 min beside the first, not at 60 min on GPUs a is still using.
    """
    e = Events()
    core = DecisionCore(Knobs(grace_s=300), "lab")
    run(core, [*_tree(e, 8, {"a": 1.0, "b": 1.0}), e.submit(0, "a-8", "org/a", gpus=8, min_runtime_s=600)])
    run(core, [e.checkpoint(50, "a-8", progress_s=50 * 60)])  # saved progress: a victim past its protection
    out = run(core, [e.submit(60, "b-4", "org/b", gpus=4, min_runtime_s=600)])
    out += run(core, [e.submit(60, "b-4bis", "org/b", gpus=4, min_runtime_s=600)])
    assert [(d.action, d.workload_id) for d in of(out, ev.SchedulingDecision)][:2] == [  # type: ignore[attr-defined]
        ("preempt", "a-8"),
        ("start", "b-4"),
    ]
    assert not of(out, ev.WorkloadStarted), "nothing may start on the host while a-8 still runs there"
    assert core.waiting() == ["b-4bis"]
    out = core.advance(to_minutes(65))
    assert [type(o).__name__ for o in out if not isinstance(o, ev.SchedulingDecision)] == [
        "WorkloadPreempted", "WorkloadRequeued", "WorkloadStarted", "WorkloadStarted"
    ]
    started = {s.workload_id: s.time for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]
    assert started == {"b-4": at(65), "b-4bis": at(65)}


def test_a_waiter_starts_as_soon_as_its_victim_is_gone_not_when_the_grace_would_have_run_out() -> None:
    """One 8-GPU host, a 10-minute grace.

    b's job needs a's 8-GPU run preempted at 60 min; a may take until 70 min to exit, but it
    finishes its work at 63 min. From then the host is empty, so b's job starts at 63 min
    instead of leaving the GPUs idle for seven more minutes.
    """
    e = Events()
    core = DecisionCore(Knobs(grace_s=600), "lab")
    run(core, [*_tree(e, 8, {"a": 1.0, "b": 1.0}), e.submit(0, "a-8", "org/a", gpus=8, min_runtime_s=600)])
    run(core, [e.checkpoint(50, "a-8", progress_s=50 * 60)])
    out = run(core, [e.submit(60, "b-8", "org/b", gpus=8, min_runtime_s=600)])
    assert [(d.action, d.workload_id) for d in of(out, ev.SchedulingDecision)] == [  # type: ignore[attr-defined]
        ("preempt", "a-8"),
        ("start", "b-8"),
    ]
    # the reason counts what a-8 has run since its checkpoint at 50 min, now and by the end of its grace
    preempt = of(out, ev.SchedulingDecision)[0]
    assert preempt.reason.endswith(  # type: ignore[attr-defined]
        "it discards 4800 GPU-seconds since its last checkpoint, "
        "9600 by its exit after the grace period unless it checkpoints first"
    )
    out = run(core, [e.complete(63, "a-8")])
    assert [(s.workload_id, s.time) for s in of(out, ev.WorkloadStarted)] == [("b-8", at(63))]  # type: ignore[attr-defined]
    assert not of(out, ev.WorkloadPreempted)  # a-8 completed: it was never preempted
    assert not of(core.advance(to_minutes(70)), ev.WorkloadStarted)  # the wake-up at 70 min is void
    assert set(core.running()) == {"b-8"}


def test_a_narrow_run_joins_its_own_budgets_host_under_fair_share_and_packs_by_size_under_priority() -> None:
    placed = {}
    for policy in ("fairshare", "priority"):
        e = Events()
        core = DecisionCore(Knobs(policy=policy), "lab")
        inputs = _tree(e, 16, {"vision": 0.5, "text": 0.5})
        # 08:01 vision takes 6 GPUs of the first host, 08:02 text 4 of the second; then one 2-GPU run each
        for minute, (wid, team, gpus) in enumerate([("v1", "vision", 6), ("t1", "text", 4), ("t2", "text", 2),
                                                    ("v2", "vision", 2)], start=1):  # fmt: skip
            inputs.append(e.submit(minute, wid, f"org/{team}", gpus=gpus))
        out = run(core, inputs)
        placed[policy] = {s.workload_id: s.nodes[0] for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]
    # fair share: each host ends up holding one budget's runs, whose standing alone decides whether
    # one preemption can free it
    assert placed["fairshare"] == {"v1": "lab-n000", "t1": "lab-n001", "t2": "lab-n001", "v2": "lab-n000"}
    # priority: best fit alone sends text's 2-GPU run into the 2 GPUs vision left on the first host
    assert placed["priority"] == {"v1": "lab-n000", "t1": "lab-n001", "t2": "lab-n000", "v2": "lab-n001"}


def test_a_draining_or_failed_host_can_be_removed_from_the_cluster_and_added_back() -> None:
    for state in ("unhealthy", "failed"):
        e = Events()
        core = DecisionCore(Knobs(), "lab")
        out = run(core, [*_tree(e, 32, {"a": 1.0}), e.submit(1, "job", "org/a", gpus=8, min_runtime_s=2 * 3600),
                         e.host(2, "lab-n002", state), e.capacity(3, 16)])  # fmt: skip
        assert of(out, ev.WorkloadStarted)[0].nodes == ("lab-n000",)  # type: ignore[attr-defined]
        assert core.hosts.capacity == 16 and core.hosts.buckets[8] == [1]
        # back at full size, the removed hosts come back as new, healthy hosts
        out = run(core, [e.capacity(4, 32), *(e.submit(5, f"w{i}", "org/a", gpus=8) for i in range(3))])
        assert sorted(s.nodes[0] for s in of(out, ev.WorkloadStarted)) == [  # type: ignore[attr-defined]
            "lab-n001", "lab-n002", "lab-n003"
        ]
