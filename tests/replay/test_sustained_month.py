"""A sustained-demand month: submissions that never let up, and the widest run of its first day still starts."""

from __future__ import annotations

from collections import Counter

from ledger.core.contract import start_bound
from ledger.core.knobs import Knobs
from ledger.replay.scenario_family import LEVELS, START, Sustained, sustained
from tests.replay.heads import replay_sustained

DAY = 86_400


def test_a_week_of_the_month_asks_for_two_to_three_times_the_cluster_every_day_on_a_150_researcher_tree() -> None:
    subs, budgets = sustained(Sustained(days=7), seed=1)

    assert budgets.levels == LEVELS and budgets.team_level == "team"
    depth = Counter(n.path.count("/") for n in budgets.nodes)
    assert (depth[1], depth[2], depth[3]) == (4, 15, 150)  # programs, projects (the teams), researchers
    assert all(0.5 <= n.share <= 2.0 for n in budgets.nodes if n.path != "lab")
    assert {s.budget for s in subs} <= set(budgets.leaves)

    capacity = budgets.gpus * DAY
    per_day = Counter((s.time - START).days for s in subs)
    work: Counter[int] = Counter()
    for s in subs:
        work[(s.time - START).days] += s.gpus * (s.work_s or 0)
    assert sorted(per_day) == list(range(7))  # to the last day
    assert 2.4 <= sum(work.values()) / (7 * capacity) <= 2.6
    assert all(1.5 <= w / capacity <= 3.5 for w in work.values()), {d: round(w / capacity, 2) for d, w in work.items()}

    wide = [s for s in subs if s.kind == "training"]
    assert 0.005 <= len(wide) / len(subs) <= 0.03  # a few percent of the workloads ...
    share = sum(s.gpus * (s.work_s or 0) for s in wide) / sum(work.values())
    assert 0.6 <= share <= 0.8  # ... most of the GPU-hours
    assert {s.gpus for s in wide} == {8, 16, 32, 64, 128, 256}
    assert all(s.resumable and 900 <= (s.checkpoint_interval_s or 0) <= 3600 for s in wide)
    assert all(4 * 3600 <= s.min_runtime_s <= 8 * 3600 for s in wide)
    rest = Counter(s.kind for s in subs if s.kind != "training")
    assert 0.42 <= rest["debug"] / sum(rest.values()) <= 0.48
    assert any(s.min_runtime_s == 0 for s in subs)  # a little free fill

    again, _ = sustained(Sustained(days=7), seed=1)
    assert again == subs
    other, _ = sustained(Sustained(days=7), seed=2)
    assert other != subs


def test_a_whole_cluster_run_submitted_on_day_one_starts_within_the_bound_while_submissions_pour_in() -> None:
    # 256 GPUs, 2.5x their capacity submitted every day for four days, 70 % of it in training runs
    # of 8-256 GPUs. Twenty minutes in, lab/p1/j03/r010 submits a 256-GPU run: every host at once.
    shape = Sustained(gpus=256, days=4, programs=2, projects=4, researchers=12)
    knobs = Knobs()
    watch, subs, horizon = replay_sustained(shape, 3, knobs)
    run = next(s for s in subs if s.workload_id == "wide-000004")
    assert (run.gpus, run.budget) == (256, "lab/p1/j03/r010")
    assert (run.time - START).total_seconds() < 3600

    # Its budget comes to stand first and the run heads the fair-share order ...
    first = min(since for since, wid in watch.heads if wid == run.workload_id)
    # ... and from then on it waits no longer than the core's stated bound, submissions pouring in all along.
    bound = start_bound(knobs, max(s.restart_s or 0 for s in subs))
    started = watch.first_start.get(run.workload_id)
    assert started is not None and started < horizon
    assert (started - first) / 1e6 <= bound.total_seconds(), (started - first) / 3.6e9
