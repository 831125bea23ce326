"""Narrated cluster days with figures worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ledger.adapters.sacctmgr import parse_sacctmgr, slurm_budgets
from ledger.errors import InputError
from ledger.queries import audit, audit_run
from tests.audits.conftest import MIXED_ASSOC, mixed_account_hours, two_teams_day
from tests.factories import Events


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_team_b_is_owed_its_quarter_and_an_over_served_hour_does_not_make_up_for_a_short_one() -> None:
    # 16 GPUs, org/a : org/b = 3 : 1. Each hour a may claim 12 GPU-hours, b 4.
    # Hour 0: a runs 8 GPUs (owed min(12, 8) = 8, received 8); b1 waits (owed min(4, 8) = 4, received 0).
    # Hour 1: b1 runs the whole hour (delivered 8, owed 4, received 4).
    a = audit(two_teams_day())
    teams = {t["budget"]: t for t in a["owed_hours"]["teams"]}
    b = teams["org/b"]
    assert close(b["owed_gpu_hours"], 8.0)
    assert close(b["delivered_gpu_hours"], 8.0)
    assert close(b["received_gpu_hours"], 4.0)
    assert close(b["ratio"], 0.5)
    # Team a in hour 1: a1 waits 60..90 then runs 90..120 (4 GPU-h), dbg runs 10 min on 1 GPU.
    # Demand in hour 1: a1 8 GPUs all hour + dbg 1 GPU from 1:10 to 1:25 -> 8.25, under the share of 12.
    a_team = teams["org/a"]
    assert close(a_team["owed_gpu_hours"], 8 + 8 + 15 / 60)
    assert close(a_team["delivered_gpu_hours"], 8 + 4 + 10 / 60)
    assert close(a_team["received_gpu_hours"], 8 + 4 + 10 / 60)
    assert a["owed_hours"]["worst_team"] == {"budget": "org/b", "ratio": 0.5}
    assert a["owed_hours"]["teams_at_95"] == 0


def test_preemption_bill_counts_work_since_the_checkpoint_plus_the_restart() -> None:
    # a1 (8 GPUs) checkpointed at 0:40, preempted at 1:00 for b1 -> 8 x 20 min = 2.667 GPU-h lost;
    # it came back at 1:30 with a 600 s restart -> 8 x 10 min = 1.333 GPU-h more.
    dw = audit(two_teams_day())["discarded_work"]
    assert dw["preemptions"] == 1
    assert close(dw["discarded_gpu_hours"], 8 * 20 / 60 + 8 * 10 / 60)
    assert close(dw["median_restart_s"], 600.0)
    delivered = 8 + 8 + 4 + 10 / 60
    assert close(dw["discarded_share"], 4.0 / delivered)
    assert dw["by_tier"]["allocated"]["preemptions"] == 1
    assert dw["by_tier"]["unallocated"]["preemptions"] == 0
    assert close(dw["eviction_ratio"], 1.0)  # 8 GPUs preempted to start b1's 8


def test_first_waits_and_requeue_waits_are_counted_apart() -> None:
    w = audit(two_teams_day())["wait_by_size"]
    eight = next(b for b in w["buckets"] if b["size"] == "2-8")
    assert eight["jobs"] == 2  # a1 waited 0 s, b1 3600 s
    assert close(eight["mean_s"], 1800.0) and close(eight["p90_s"], 3240.0) and close(eight["p99_s"], 3564.0)
    one = next(b for b in w["buckets"] if b["size"] == "1")
    assert one["jobs"] == 1 and close(one["p50_s"], 300.0)
    assert w["debug"]["jobs"] == 1 and close(w["debug"]["mean_s"], 300.0)
    requeued = next(b for b in w["requeue"]["buckets"] if b["size"] == "2-8")
    assert requeued["jobs"] == 1 and close(requeued["mean_s"], 1800.0)


def test_down_host_hours_are_reported_apart_and_left_out_of_capacity() -> None:
    E = Events()
    log = [E.capacity(0, 16), E.node(0, "org"), E.submit(0, "w", "org", gpus=8), E.start(0, "w", ("lab-n001",), 8),
           E.host(60, "lab-n001", "unhealthy"), E.complete(120, "w")]
    occ = audit(log)["occupancy"]
    assert close(occ["capacity_gpu_hours"], 32 - 8)
    assert close(occ["down_gpu_hours"], 8.0)
    assert close(occ["occupied_on_down_gpu_hours"], 8.0)  # w kept running on the draining host
    assert close(occ["occupied_gpu_hours"], 8.0)
    assert close(occ["occupied_share"], 8 / 24)


def test_partial_hours_count_pro_rata_inside_a_since_until_window() -> None:
    E = Events()
    log = [E.capacity(0, 8), E.node(0, "org"), E.submit(0, "w", "org", gpus=8), E.start(0, "w", ("lab-n000",), 8),
           E.complete(180, "w")]
    a = audit(log, since="2026-03-02T00:30:00Z", until="2026-03-02T02:00:00Z", details=("cluster_hourly",))
    assert a["period"] == {"start": "2026-03-02T00:30:00Z", "end": "2026-03-02T02:00:00Z"}
    team = a["owed_hours"]["teams"][0]
    assert close(team["owed_gpu_hours"], 8 * 1.5) and close(team["ratio"], 1.0)
    assert close(a["occupancy"]["capacity_gpu_hours"], 12.0)
    hours = [h["hour"] for h in a["occupancy"]["hourly"]]
    assert hours == ["2026-03-02T00:00:00Z", "2026-03-02T01:00:00Z"]
    assert close(a["occupancy"]["hourly"][0]["capacity_gpu_hours"], 4.0)


def test_shares_are_normalised_and_multiplied_down_the_tree_and_follow_allocation_changes() -> None:
    E = Events()
    log = [E.capacity(0, 100), E.node(0, "org", 2.0), E.node(0, "org/x", 1.0), E.node(0, "org/y", 1.0),
           E.node(0, "org/y/p", 1.0), E.node(0, "org/y/q", 3.0), E.allocate(60, "org/x", 3.0, "admin"),
           E.submit(0, "filler", "org/y/q", gpus=100), E.complete(120, "filler")]
    teams = {t["budget"]: t for t in audit(log)["owed_hours"]["teams"]}
    # q: 1/2 * 3/4 of 100 GPUs in hour 0, then 1/4 * 3/4 in hour 1.
    assert close(teams["org/y/q"]["share_gpu_hours"], 100 * (0.5 * 0.75 + 0.25 * 0.75))
    assert close(teams["org/y/q"]["owed_gpu_hours"], 100 * (0.5 * 0.75 + 0.25 * 0.75))
    assert close(teams["org/x"]["share_gpu_hours"], 100 * (0.5 + 0.75))
    assert close(teams["org/x"]["owed_gpu_hours"], 0.0) and teams["org/x"]["ratio"] is None


def test_every_submitted_workload_is_listed_with_null_times_when_absent() -> None:
    E = Events()
    log = [E.capacity(0, 8), E.node(0, "org"), E.submit(0, "ran", "org", gpus=8), E.start(0, "ran", ("lab-n000",), 8),
           E.submit(5, "waits", "org", gpus=8)]
    ws = {w["workload_id"]: w for w in audit(log)["workloads"]}
    assert ws["ran"]["first_start_time"] == "2026-03-02T00:00:00Z" and ws["ran"]["end_time"] is None
    assert ws["waits"]["first_start_time"] is None and ws["waits"]["submit_time"] == "2026-03-02T00:05:00Z"


def test_bad_records_are_listed_as_anomalies_and_left_out_of_the_figures() -> None:
    E = Events()
    log = [
        E.capacity(0, 16), E.node(0, "org"),
        E.submit(0, "ok", "org", gpus=8), E.start(0, "ok", ("lab-n000",), 8), E.complete(60, "ok"),
        E.complete(30, "stranger"),                                       # unknown workload
        E.submit(0, "rewind", "org", gpus=8), E.start(50, "rewind", ("lab-n001",), 8),
        E.complete(20, "rewind"),                                         # completion before its start
        E.submit(0, "twice", "org", gpus=1), E.start(10, "twice", ("lab-n001",), 1),
        E.start(20, "twice", ("lab-n001",), 1),                           # overlapping runs
        E.complete(40, "twice"),
        E.submit(0, "orphan", "nowhere/team", gpus=1),                    # budget path never defined
        E.start(0, "orphan", ("lab-n001",), 1), E.complete(60, "orphan"),
    ]
    a = audit(log)
    kinds = {(x["kind"], x["workload_id"]): x for x in a["anomalies"]}
    assert kinds[("unknown_workload", "stranger")]["included"] is False
    assert kinds[("completion_before_start", "rewind")]["included"] is False
    assert kinds[("overlapping_runs", "twice")]["included"] is False
    assert kinds[("undefined_budget", "orphan")]["included"] is True
    assert all(x["reason"] for x in a["anomalies"])
    # Figures: ok 8 GPU-h + twice 1 GPU x 30 min + orphan 1 GPU-h; rewind's bogus run is left out.
    assert close(a["occupancy"]["occupied_gpu_hours"], 8 + 0.5 + 1)
    assert [t["budget"] for t in a["owed_hours"]["teams"]] == ["org"]


def test_audit_run_writes_audit_json_beside_the_events(run_dir: Path) -> None:
    data = audit_run(run_dir)
    on_disk = (run_dir / "audit.json").read_text()
    assert '"owed_hours"' in on_disk and data["owed_hours"]["teams"][1]["budget"] == "org/b"
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]


def test_an_empty_log_audits_to_empty_figures(tmp_path: Path) -> None:
    a = audit([])
    assert a["workloads"] == [] and a["owed_hours"]["overall_ratio"] is None
    assert a["occupancy"]["occupied_share"] is None
    with pytest.raises(InputError):
        audit(tmp_path / "missing")


# An association tree as `sacctmgr show assoc` prints it: account phys has two users with shares of
# their own and one with Share=parent, whose jobs charge the account node itself; bio is a leaf.
def test_an_account_charged_directly_beside_its_users_nodes_is_owed_what_they_leave_of_its_share() -> None:
    budgets, _ = slurm_budgets(parse_sacctmgr(MIXED_ASSOC, "assoc.txt"), 16, 8)
    assert {n.path: n.share for n in budgets.nodes} == {"phys": 3, "phys/ana": 1, "phys/bo": 1, "bio": 1}
    E = Events()
    log = mixed_account_hours(E, [E.capacity(0, 16), *(E.node(0, n.path, n.share) for n in budgets.nodes)])
    # 16 GPUs: phys 3/4 = 12 GPUs, its users ana and bo half of that each (6), bio 1/4 = 4.
    # phys's own jobs (cy's) are owed what of phys's 12 its users' nodes are not owed, up to their demand.
    # Hour 0: ana asks 8 -> owed 6 (ran 8, received 6); bo asks 0; phys's own c1 asks 8 -> owed
    #   min(8, 12 - 6 - 0) = 6 (ran 8, received 6); bio's d1 asks 4 -> owed 4, ran 0.
    # Hour 1: ana 0; bo's o1 asks 8 -> owed 6, ran 0; c1 -> min(8, 12 - 0 - 6) = 6 (received 6);
    #   d1 -> owed 4, ran 4.
    # Owed in all: 6 + 6 + 12 + 8 = 32 = the 16 GPUs x 2 hours (counting phys's whole 12 for c1 beside
    # its users' shares made it 36); received 6 + 0 + 12 + 4 = 22.
    oh = audit(log)["owed_hours"]
    teams = {t["budget"]: t for t in oh["teams"]}
    assert set(teams) == {"phys", "phys/ana", "phys/bo", "bio"}
    figures = {b: (t["owed_gpu_hours"], t["delivered_gpu_hours"], t["received_gpu_hours"]) for b, t in teams.items()}
    want = {"phys/ana": (6, 8, 6), "phys/bo": (6, 0, 0), "phys": (12, 16, 12), "bio": (8, 4, 4)}
    for budget, (owed, delivered, received) in want.items():
        got = figures[budget]
        assert close(got[0], owed) and close(got[1], delivered) and close(got[2], received), (budget, got)
    assert close(teams["phys"]["share_gpu_hours"], 12.0)  # what its users left of phys's 12 each hour: 6 + 6
    assert close(oh["owed_gpu_hours"], 32.0) and close(oh["received_gpu_hours"], 22.0)
    assert close(oh["overall_ratio"], 22 / 32)


def test_the_shortfall_is_split_by_what_the_team_had_run_in_the_window_before_the_hour() -> None:
    # 16 GPUs, org/a : org/b = 1 : 1, so each is owed 8 GPU-hours an hour it asks for them.
    # Hours 0-2: b asks for nothing and a runs all 16 GPUs (borrowing b's idle half).
    # Hours 3-4: b runs 16 GPUs; a's a2 (8 GPUs) waits: a is short 8 GPU-hours in each.
    #   Before hour 3 a had run 48 GPU-hours of the 24 its share was worth (200 %): payback;
    #   before hour 4, 48 of 32 (150 %). b is owed 8 and receives 8 in both (its standing 0 % and 50 %).
    # Hour 5: a2 runs (a at 48 of 40 before it, 120 %), owed 8, received 8.
    E = Events()
    log = [E.capacity(0, 16), E.node(0, "org"), E.node(0, "org/a"), E.node(0, "org/b"),
           E.submit(0, "a1", "org/a", gpus=16), E.start(0, "a1", ("lab-n001", "lab-n002"), 16),
           E.complete(180, "a1"), E.submit(180, "a2", "org/a", gpus=8), E.submit(180, "b1", "org/b", gpus=16),
           E.start(180, "b1", ("lab-n001", "lab-n002"), 16), E.complete(300, "b1"),
           E.start(300, "a2", ("lab-n001",), 8), E.complete(360, "a2")]
    owed = audit(log)["owed_hours"]
    got = {r["standing"]: r for r in owed["shortfall_by_standing"]}
    assert list(got) == ["below_80", "80_to_100", "100_to_150", "above_150", "no_history"]
    expect = {  # standing: (team-hours owed something, owed, short)
        "no_history": (1, 8.0, 0.0),  # a's hour 0: no window before it
        "above_150": (3, 24.0, 8.0),  # a's hours 1, 2 (200 %) and 3 (200 %, short 8)
        "100_to_150": (2, 16.0, 8.0),  # a's hour 4 (150 %, short 8) and hour 5 (120 %)
        "below_80": (2, 16.0, 0.0),  # b's hours 3 and 4
        "80_to_100": (0, 0.0, 0.0),
    }
    for standing, (hours, owed_h, short) in expect.items():
        row = got[standing]
        assert row["team_hours"] == hours, standing
        assert close(row["owed_gpu_hours"], owed_h) and close(row["short_gpu_hours"], short), standing
        assert close(row["share_of_owed"], short / 64.0), standing
    assert close(sum(r["short_gpu_hours"] for r in got.values()), owed["owed_gpu_hours"] - owed["received_gpu_hours"])


def test_hours_over_and_under_what_was_owed_even_out_within_a_day_and_a_week() -> None:
    # 16 GPUs, org/a : org/b = 1 : 1: each team is owed 8 GPU-hours an hour it asks for them.
    # Monday 22:00-24:00: a1 runs all 16 GPUs (a owed 8, delivered 16); b1 (16 GPUs) waits (owed 8, got 0).
    # Tuesday 00:00-02:00: b1 runs all 16 (b owed 8, delivered 16); a2 (16 GPUs) waits (owed 8, got 0).
    # Tuesday 02:00-03:00: a2 runs (owed 8, delivered 16); b asks for nothing.
    # Owed: a 5 hours x 8 = 40, b 4 x 8 = 32, 72 in all.
    # Hour by hour a receives 8 + 8 + 0 + 0 + 8 = 24 and b 0 + 0 + 8 + 8 = 16: 40 of 72.
    # By UTC day: Monday a min(16, 32) = 16, b min(16, 0) = 0; Tuesday a min(24, 16) = 16, b min(16, 32) = 16: 48.
    # By week (both days in the week from Monday 2 March): a min(40, 48) = 40, b min(32, 32) = 32: all 72.
    E = Events()
    log = [E.capacity(0, 16), E.node(0, "org"), E.node(0, "org/a"), E.node(0, "org/b"),
           E.submit(1320, "a1", "org/a", gpus=16), E.start(1320, "a1", ("lab-n000", "lab-n001"), 16),
           E.submit(1320, "b1", "org/b", gpus=16), E.complete(1440, "a1"),
           E.submit(1440, "a2", "org/a", gpus=16), E.start(1440, "b1", ("lab-n000", "lab-n001"), 16),
           E.complete(1560, "b1"), E.start(1560, "a2", ("lab-n000", "lab-n001"), 16), E.complete(1620, "a2")]
    owed = audit(log)["owed_hours"]
    assert close(owed["owed_gpu_hours"], 72.0) and close(owed["received_gpu_hours"], 40.0)
    got = {r["period"]: r for r in owed["received_by_period"]}
    assert list(got) == ["hour", "day", "week"]
    for period, received in (("hour", 40.0), ("day", 48.0), ("week", 72.0)):
        assert close(got[period]["received_gpu_hours"], received), period
        assert close(got[period]["ratio"], received / 72.0), period
    assert got["hour"]["ratio"] == owed["overall_ratio"]


def test_a_non_resumable_victim_loses_its_whole_run_whatever_checkpoints_it_wrote() -> None:
    # nr (8 GPUs, cannot resume) starts at 0:00 and writes checkpoints at 0:20 and 0:40; at 1:00 it
    # is preempted for b1 and cancelled. It cannot resume from a checkpoint, so the whole hour is
    # thrown away: 8 GPU-h, as the preempt decision says (8 x 3600 GPU-seconds), not the 20 minutes
    # since its last checkpoint (2.667 GPU-h).
    from ledger.queries.explain import explain

    E = Events()
    log = [
        E.capacity(0, 8), E.node(0, "org"), E.node(0, "org/a"), E.node(0, "org/b"),
        E.submit(0, "nr", "org/a", gpus=8, resumable=False), E.start(0, "nr", ("lab-n000",), 8),
        E.checkpoint(20, "nr", 1200), E.submit(30, "b1", "org/b", gpus=8), E.checkpoint(40, "nr", 2400),
        E.preempt(60, "nr", by="b1"), E.complete(60, "nr", "cancelled"),
        E.start(60, "b1", ("lab-n000",), 8), E.complete(120, "b1"),
    ]
    dw = audit(log)["discarded_work"]
    assert dw["preemptions"] == 1
    assert close(dw["discarded_gpu_hours"], 8.0) and close(dw["lost_since_checkpoint_gpu_hours"], 8.0)
    told = explain(log, "nr")
    assert close(told["summary"]["discarded_gpu_hours"], 8.0)
    (preempted,) = [s for s in told["story"] if s["event"] == "preempted"]
    assert "it lost 8.00 GPU-hours of work since its start (it cannot resume)" in preempted["text"]
