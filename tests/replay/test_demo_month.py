"""The demo month: seeded, reproducible, and shaped like the cluster the published accounts describe."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from ledger.cli import main
from ledger.events import validated
from ledger.replay.demo_month import DAYS, FULL, generate


def test_the_same_seed_gives_the_same_month_and_another_seed_another() -> None:
    one, two, other = generate(7, scale=0.05), generate(7, scale=0.05), generate(8, scale=0.05)
    assert [s.model_dump() for s in one.submissions] == [s.model_dump() for s in two.submissions]
    assert [s.model_dump() for s in one.submissions] != [s.model_dump() for s in other.submissions]


def test_the_month_has_the_described_tree_and_mix() -> None:
    month = generate(7, scale=0.5)
    b = month.budgets
    assert (b.gpus, b.gpus_per_node) == (512, 8)  # half the month on half the cluster
    assert {n.path.count("/") for n in b.nodes} == {0, 1, 2, 3}, "root, programs, projects, researchers"
    assert 70 <= len(b.leaves) <= 80
    subs = month.submissions
    assert all(validated(s) == s for s in subs[:: max(1, len(subs) // 500)])
    assert all(month.start <= s.time < month.end for s in subs)
    assert (month.end - month.start).days == DAYS
    assert [s.time for s in subs] == sorted(s.time for s in subs)
    assert len({s.workload_id for s in subs}) == len(subs)
    kinds = Counter(s.kind for s in subs)
    debug = [s for s in subs if s.min_runtime_s <= 900 and s.min_runtime_s > 0]
    assert all(1 <= s.gpus <= 8 for s in debug) and len(debug) > 0.4 * len(subs)
    assert kinds["interactive"] and kinds["training"]
    assert any(s.gpus == 256 for s in subs) and all(s.gpus <= 256 for s in subs)  # half the smaller cluster
    assert any(not s.resumable and s.kind != "debug" for s in subs), "some non-resumable work besides debug"
    training = [s for s in subs if s.kind == "training" and s.resumable]
    assert all(s.checkpoint_interval_s and s.work_s > s.checkpoint_interval_s for s in training)
    work = sum(s.gpus * (s.work_s or 0) for s in subs)
    capacity = b.gpus * DAYS * 86_400
    assert 0.6 < work / capacity < 1.2, "submitted work near what the cluster can run: bursts make the queue"


def test_teams_come_in_bursts() -> None:
    month = generate(7, scale=0.3)
    per_day: dict[str, Counter[int]] = {}
    for s in month.submissions:
        project = s.budget.rsplit("/", 1)[0]
        per_day.setdefault(project, Counter())[(s.time - month.start).days] += 1
    # in a bursty project the busiest day sees several times the quietest day's submissions
    ratios = [max(c.values()) / max(1, min(c.get(d, 0) for d in range(DAYS))) for c in per_day.values()]
    assert sorted(ratios)[len(ratios) // 2] > 3


def test_the_full_month_holds_about_a_hundred_thousand_workloads() -> None:
    month = generate(7, mix=FULL)
    assert 95_000 < len(month.submissions) < 105_000
    work = sum(s.gpus * (s.work_s or 0) for s in month.submissions)
    assert 0.7 < work / (month.budgets.gpus * DAYS * 86_400) < 1.2
    fill = sum(s.gpus * (s.work_s or 0) for s in month.submissions if s.min_runtime_s == 0)
    assert 0.12 < fill / (month.budgets.gpus * DAYS * 86_400) < 0.3


def test_teams_fill_idle_gpus_with_free_preemptible_work_in_arrays() -> None:
    month = generate(7, scale=0.5)
    fill = [s for s in month.submissions if s.min_runtime_s == 0]
    assert all(1 <= s.gpus <= 8 and s.resumable and s.checkpoint_interval_s for s in fill)
    capacity = month.budgets.gpus * DAYS * 86_400
    share = sum(s.gpus * (s.work_s or 0) for s in fill) / capacity
    assert 0.12 < share < 0.3, "more free work than the idle fragments take, not more than the cluster"
    # launched in arrays: most fill jobs have a sibling from the same team within two minutes
    by_team: dict[str, list[float]] = {}
    for s in fill:
        by_team.setdefault(s.budget.rsplit("/", 1)[0], []).append(s.time.timestamp())
    close = sum(1 for ts in by_team.values() for a, b in pairwise(ts) if b - a <= 120)
    assert close > 0.6 * len(fill)


def test_priority_is_inflated_most_work_asks_for_the_top_level() -> None:
    subs = generate(7, scale=0.3).submissions
    top = sum(1 for s in subs if s.priority == max(x.priority for x in subs))
    assert top > 0.7 * len(subs)


def test_a_smaller_month_shrinks_its_cluster_and_tree_with_its_workloads() -> None:
    full, small = generate(7), generate(7, scale=0.02)
    assert (full.budgets.gpus, small.budgets.gpus) == (1024, 24)  # 3 hosts of 8
    assert len(small.budgets.leaves) == 13 < len(full.budgets.leaves)  # one researcher a project
    # no job wider than half the small cluster: a wider one is several of 8 GPUs side by side, same GPU-hours
    assert max(s.gpus for s in small.submissions) == 8
    parts = [s for s in small.submissions if s.workload_id.count("-") == 2]
    assert parts and {s.kind for s in parts} <= {"training", "batch"}

    def asked(m: Any) -> float:
        return sum(s.gpus * (s.work_s or 0) for s in m.submissions) / (m.budgets.gpus * DAYS * 86_400)

    assert 0.5 * asked(full) < asked(small) < 2 * asked(full)  # work asked against capacity: the same order


def test_the_small_demo_has_the_big_months_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The month at scale 1 (seed 7; `gpuledger demo`): demand 3.2x capacity, occupancy 97.4 % (fairshare)
    # and 98.3 % (priority), 11.8 and 14.4 preemptions per workload-week. At 0.02 on 1,024 GPUs it was
    # 1.1 % occupied with no preemption; on its own 24 GPUs it is busy and contended like the big one.
    assert main(["demo", "--scale", "0.02", "--out", str(tmp_path / "small"), "--quiet"]) == 0
    assert "A month on a 24-GPU cluster (3 hosts x 8 GPUs)" in capsys.readouterr().out
    for policy in ("fairshare", "priority"):
        audit = json.loads((tmp_path / "small" / policy / "audit.json").read_text())
        replay = json.loads((tmp_path / "small" / policy / "replay.json").read_text())
        assert replay["demand_ratio"] > 2.0, policy
        assert audit["occupancy"]["occupied_share"] > 0.6, policy
    fair = json.loads((tmp_path / "small" / "fairshare" / "audit.json").read_text())["discarded_work"]
    assert 5 < fair["preemptions_per_workload_week"] < 25
