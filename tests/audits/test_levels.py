"""Owed hours at every level of the budget tree: a narrated two hours, the CLI's --level, bad levels, invariants."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from ledger import events as ev
from ledger.budgets import load_budgets, parse_budgets
from ledger.cli import main
from ledger.errors import InputError
from ledger.queries import audit, connect, prepare
from ledger.queries.audit import levels, rows
from tests.audits.conftest import MIXED_ASSOC, mixed_account_hours, write_log
from tests.audits.strategies import cluster_logs
from tests.factories import Events, at

# 16 GPUs; two programs of two teams of two researchers, every share 1: a researcher's share is
# 2 GPUs, a team's 4, a program's 8.
TREE = """\
cluster: {name: lab, gpus: 16, gpus_per_node: 8}
nodes:
  - {path: org}
  - {path: org/p1}
  - {path: org/p1/t1}
  - {path: org/p1/t1/u1}
  - {path: org/p1/t1/u2}
  - {path: org/p1/t2}
  - {path: org/p1/t2/u1}
  - {path: org/p1/t2/u2}
  - {path: org/p2}
  - {path: org/p2/t3}
  - {path: org/p2/t3/u1}
  - {path: org/p2/t3/u2}
  - {path: org/p2/t4}
  - {path: org/p2/t4/u1}
  - {path: org/p2/t4/u2}
levels: [org, program, team, user]
team_level: team
"""


def two_hours() -> list[ev.Event]:
    """Two hours of the 2 x 2 x 2 tree.

    Hour 0: p1/t1/u1 runs 8 GPUs (4x its share); p1/t1/u2 asks for 4 and waits; p2/t3/u1 runs 4;
    p2/t4/u1 asks for 4 and waits both hours; p2/t4/u2 runs 4 GPUs of free fill. Nothing is idle.
    Hour 1: u1's run and the fill are done; p1/t1/u2 runs its 4; p2/t3/u1 runs on; 8 GPUs idle.
    """
    budgets = parse_budgets(yaml.safe_load(TREE), "tree.yaml")
    E = Events()
    return [
        *budgets.events(at(0)),
        E.submit(0, "big", "org/p1/t1/u1", gpus=8), E.start(0, "big", ("lab-n000",), 8),
        E.submit(0, "wait1", "org/p1/t1/u2", gpus=4),
        E.submit(0, "run3", "org/p2/t3/u1", gpus=4), E.start(0, "run3", ("lab-n001",), 4),
        E.submit(0, "never", "org/p2/t4/u1", gpus=4),
        E.submit(0, "fill", "org/p2/t4/u2", gpus=4, min_runtime_s=0),
        E.start(0, "fill", ("lab-n001",), 4, allocated=False),
        E.complete(60, "big"), E.complete(60, "fill"), E.start(60, "wait1", ("lab-n000",), 4),
        E.complete(120, "wait1"), E.complete(120, "run3"),
    ]


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lv["name"]: lv for lv in data["owed_hours"]["levels"]}


def causes(level: dict[str, Any]) -> dict[str, float]:
    return {c["cause"]: c["short_gpu_hours"] for c in level["shortfall_by_cause"]}


def test_each_level_sums_its_teams_hours_before_taking_owed_and_received() -> None:
    data = audit(two_hours())
    levels = by_name(data)
    assert list(levels) == ["org", "program", "team", "user"]
    assert [lv["team_level"] for lv in levels.values()] == [False, False, True, False]
    # user (share 2 GPU-hours an hour): hour 0 owed 2 each to t1/u1 (received 2), t1/u2 (0), t3/u1 (2),
    # t4/u1 (0); hour 1 owed 2 to t1/u2 (2), t3/u1 (2), t4/u1 (0): 14 owed, 8 received.
    # team (4): hour 0 t1 owed 4 (ran 8), t3 4 (ran 4), t4 4 (ran 0, the fill is not its allocated work);
    #   hour 1 the same owed, t1 and t3 received: 24 owed, 16 received.
    # program (8): hour 0 p1 asks 12 -> owed 8, ran 8; p2 asks 8 -> owed 8, ran 4;
    #   hour 1 p1 asks 4 -> owed 4, ran 4; p2 asks 8 -> owed 8, ran 4: 28 owed, 20 received.
    # org (16): hour 0 asks 20 -> owed 16, ran 12; hour 1 asks 12 -> owed 12, ran 8: 28 owed, 20 received.
    for name, owed, received in (("user", 14, 8), ("team", 24, 16), ("program", 28, 20), ("org", 28, 20)):
        assert close(levels[name]["owed_gpu_hours"], owed), name
        assert close(levels[name]["received_gpu_hours"], received), name
        assert close(levels[name]["ratio"], received / owed), name
        assert close(levels[name]["delivered_gpu_hours"], 20), name  # 8 + 4 + 4 + 4, at every level
    # Over the week t1/u2 is owed 4 and ran 4, t3/u1 owed 4 and ran 8: the user level receives 2 + 4 + 4 + 0.
    assert close(levels["user"]["ratio_week"], 10 / 14)
    assert close(levels["team"]["ratio_week"], 16 / 24)
    # The team level is the one reported: its nodes are owed_hours.teams and its ratio the headline.
    owed = data["owed_hours"]
    assert owed["level"] == {"depth": 2, "name": "team", "team_level": True}
    assert close(owed["overall_ratio"], 16 / 24)
    teams = {t["budget"]: t for t in owed["teams"]}
    assert set(teams) == {"org/p1/t1", "org/p1/t2", "org/p2/t3", "org/p2/t4"}
    assert close(teams["org/p1/t1"]["delivered_gpu_hours"], 12) and close(teams["org/p1/t1"]["ratio"], 1.0)
    assert teams["org/p1/t2"]["ratio"] is None  # asked for nothing
    assert owed["worst_team"] == {"budget": "org/p2/t4", "ratio": 0.0}
    assert levels["team"]["nodes_owed"] == 3 and levels["team"]["nodes_at_95"] == 2
    assert levels["team"]["worst_node"] == {"budget": "org/p2/t4", "ratio": 0.0}


def test_the_shortfall_is_split_among_wide_runs_idle_gpus_free_fill_and_nodes_above_their_share() -> None:
    levels = by_name(audit(two_hours()))
    # team, hour 0: t4 is short 4. Beyond their shares: t1 ran 8 on a share of 4, all of it forced by one
    #   8-GPU run wider than the share (8 - 4 = 4 wide); 4 GPUs ran free fill; none idle. 4 x 4/8 to each.
    # team, hour 1: t4 short 4 again; nobody above its share, no fill, 8 GPUs idle: all 4 to idle.
    assert causes(levels["team"]) == pytest.approx(
        {"wide_runs": 2.0, "idle_gpus": 4.0, "free_fill": 2.0, "above_share": 0.0, "unexplained": 0.0})
    # user, hour 0: short 4 (t1/u2 2, t4/u1 2); t1/u1 ran 6 over its 2 (its 8-GPU run is wider: all wide),
    #   t3/u1 2 over its 2 (a 4-GPU run: wide); fill 4: 4 x 8/12 wide, 4 x 4/12 fill.
    # user, hour 1: short 2 (t4/u1); t1/u2 and t3/u1 each 2 over with 4-GPU runs (wide); 8 idle:
    #   2 x 4/12 wide, 2 x 8/12 idle.
    assert causes(levels["user"]) == pytest.approx(
        {"wide_runs": 8 / 3 + 2 / 3, "idle_gpus": 4 / 3, "free_fill": 4 / 3, "above_share": 0.0, "unexplained": 0.0})
    # program: hour 0 p2 short 4, nobody over 8, fill 4; hour 1 p2 short 4, 8 idle.
    assert causes(levels["program"]) == pytest.approx(
        {"wide_runs": 0.0, "idle_gpus": 4.0, "free_fill": 4.0, "above_share": 0.0, "unexplained": 0.0})
    for lv in levels.values():
        assert sum(causes(lv).values()) == pytest.approx(lv["owed_gpu_hours"] - lv["received_gpu_hours"])


def test_a_run_above_its_share_but_no_wider_than_it_counts_as_above_share() -> None:
    # 16 GPUs, a : b = 1 : 1 (8 each). a runs two 6-GPU runs (12 GPUs, 4 over its 8, but neither run is
    # wider than 8); b asks for 8 and runs only 4: short 4, all of it to a's over-share.
    E = Events()
    log = [E.capacity(0, 16), E.node(0, "org"), E.node(0, "org/a"), E.node(0, "org/b"),
           E.submit(0, "a1", "org/a", gpus=6), E.start(0, "a1", ("lab-n000",), 6),
           E.submit(0, "a2", "org/a", gpus=6), E.start(0, "a2", ("lab-n001",), 6),
           E.submit(0, "b1", "org/b", gpus=4), E.start(0, "b1", ("lab-n000", "lab-n001"), 4),
           E.submit(0, "b2", "org/b", gpus=4),
           E.complete(60, "a1"), E.complete(60, "a2"), E.complete(60, "b1"), E.complete(60, "b2")]
    owed = audit(log)["owed_hours"]
    assert {c["cause"]: c["short_gpu_hours"] for c in owed["shortfall_by_cause"]} == pytest.approx(
        {"wide_runs": 0.0, "idle_gpus": 0.0, "free_fill": 0.0, "above_share": 4.0, "unexplained": 0.0})


def test_a_tree_that_names_no_levels_reports_its_deepest_level() -> None:
    data = audit([e.model_copy(update={"level": None, "team_level": None}) if isinstance(e, ev.BudgetNodeDefined)
                  else e for e in two_hours()])
    owed = data["owed_hours"]
    assert owed["level"] == {"depth": 3, "name": None, "team_level": True}
    assert close(owed["overall_ratio"], 8 / 14)
    assert [lv["name"] for lv in owed["levels"]] == [None, None, None, None]


def test_audit_level_flag_picks_a_level_by_name_or_depth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "events", two_hours())
    assert main(["audit", str(log), "--level", "program", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["owed_hours"]["level"] == {"depth": 1, "name": "program", "team_level": False}
    assert {t["budget"] for t in data["owed_hours"]["teams"]} == {"org/p1", "org/p2"}
    assert close(data["owed_hours"]["overall_ratio"], 20 / 28)
    assert main(["audit", str(log), "--level", "3", "--report", "owed-hours"]) == 0
    text = capsys.readouterr().out
    assert "org/p1/t1/u2" in text and "57.1%" in text  # 8 of 14
    assert main(["audit", str(log)]) == 0
    head = capsys.readouterr().out.splitlines()
    assert head[0] == "GPU-hours received / owed per team (the team level): 66.7% hour by hour, 66.7% over each week"
    assert main(["audit", str(log), "--level", "project"]) == 2
    err = capsys.readouterr().err
    assert "--level project" in err and "0 (org), 1 (program), 2 (team), 3 (user)" in err


def test_every_levels_hours_go_to_a_parquet_table_that_sums_to_the_levels_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "events", two_hours())
    assert main(["audit", str(log), "--format", "json", "--tables", str(tmp_path / "tables")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tables"]["levels_hourly"]["rows"] == (1 + 2 + 4 + 8) * 2  # every node of every level, 2 hours
    con = duckdb.connect()
    sums = con.execute(
        "SELECT level, sum(owed_gpu_hours), sum(received_gpu_hours) FROM read_parquet(?) GROUP BY level",
        [str(tmp_path / "tables" / "levels_hourly.parquet")],
    ).fetchall()
    want = {lv["name"]: (lv["owed_gpu_hours"], lv["received_gpu_hours"]) for lv in data["owed_hours"]["levels"]}
    assert {name: (pytest.approx(o), pytest.approx(r)) for name, o, r in sums} == want


@pytest.mark.parametrize(("extra", "message"), [
    ("levels: [org, program, team]\n", "levels = ['org', 'program', 'team']: 3 name(s) for a tree 4 level(s) deep"),
    ("levels: [org, team, team, user]\n", "team named twice"),
    ("levels: org\n", "levels = 'org': expected a list of names"),
    ("levels: [org, program, team, user]\nteam_level: project\n",
     "team_level = 'project': not one of the levels org, program, team, user"),
    ("team_level: team\n", "team_level = 'team': name the levels first"),
])
def test_a_budgets_file_with_bad_levels_is_refused_naming_file_field_and_value(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = tmp_path / "budgets.yaml"
    path.write_text(TREE.split("levels:")[0] + extra, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_budgets(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_levels_survive_the_budgets_file_and_the_log() -> None:
    budgets = parse_budgets(yaml.safe_load(TREE), "tree.yaml")
    assert parse_budgets(yaml.safe_load(budgets.to_yaml()), "again") == budgets
    nodes = [e for e in budgets.events(at(0)) if isinstance(e, ev.BudgetNodeDefined)]
    assert {e.path: e.level for e in nodes}["org/p2/t4/u1"] == "user"
    assert {e.team_level for e in nodes} == {"team"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_logs(anomalies=False))
def test_a_node_is_owed_at_least_what_its_children_are_and_receives_at_least_what_they_do(
    log: list[ev.Event],
) -> None:
    # Not "at most": min(sum of shares, sum of demands) >= the sum of min(share, demand), so a parent is
    # owed at least its children's sum (a child's idle share covers a sibling's demand), and may fall
    # further short than they do. Delivered and demand add up exactly; received <= owed and <= delivered.
    con = connect(log, decisions=False)
    prepare(con)
    kids = rows(con, """
        SELECT p.depth, p.budget, p.hour_us, any_value(p.owed_gpu_us) AS owed, any_value(p.received_gpu_us) AS received,
               any_value(p.delivered_gpu_us) AS delivered, any_value(p.demand_gpu_us) AS demand,
               sum(c.owed_gpu_us) AS kids_owed, sum(c.received_gpu_us) AS kids_received,
               sum(c.delivered_gpu_us) AS kids_delivered, sum(c.demand_gpu_us) AS kids_demand
        FROM level_hours p JOIN level_groups g ON g.depth = p.depth AND g.budget = p.budget AND NOT g.own
        JOIN level_hours c ON c.depth = p.depth + 1 AND c.hour_us = p.hour_us
         AND (c.budget = p.budget OR starts_with(c.budget, p.budget || '/'))
        GROUP BY ALL
    """)
    eps = 1e-6 * 3.6e9
    for r in kids:
        assert r["owed"] >= r["kids_owed"] - eps, r
        assert r["received"] >= r["kids_received"] - eps, r
        assert abs(r["delivered"] - r["kids_delivered"]) <= eps and abs(r["demand"] - r["kids_demand"]) <= eps, r
    bad = rows(con, "SELECT * FROM level_hours WHERE received_gpu_us > owed_gpu_us + 1 "
                    "OR received_gpu_us > delivered_gpu_us + 1 OR owed_gpu_us > demand_gpu_us + 1")
    assert not bad
    # Over a day or a week an hour over what was owed makes up for one under it: never less received.
    for lv in levels(con):
        if lv["ratio"] is not None:
            assert lv["ratio"] <= lv["ratio_day"] + 1e-9 <= lv["ratio_week"] + 2e-9, lv


def test_an_imported_slurm_tree_reports_its_accounts_with_users_below() -> None:
    from ledger.adapters.sacctmgr import parse_sacctmgr, slurm_budgets

    budgets, _ = slurm_budgets(parse_sacctmgr(MIXED_ASSOC, "assoc.txt"), 16, 8)
    assert budgets.levels == ("account", "user") and budgets.team_level == "account"
    owed = audit(mixed_account_hours(Events(), list(budgets.events(at(0)))))["owed_hours"]
    # account: phys (12 GPUs) asks 16 in each hour -> owed 12, runs 16 then 8: received 12 + 8;
    # bio (4) asks 4 each hour, runs 0 then 4. 32 owed, 24 received.
    assert owed["level"] == {"depth": 0, "name": "account", "team_level": True}
    assert close(owed["owed_gpu_hours"], 32) and close(owed["received_gpu_hours"], 24)
    # user (the deepest; phys's own work beside its users' nodes): 32 owed, 22 received, as the leaf view.
    users = by_name({"owed_hours": owed})["user"]
    assert close(users["owed_gpu_hours"], 32) and close(users["received_gpu_hours"], 22)


def test_imported_trees_name_their_levels_by_what_stands_at_each_depth() -> None:
    from ledger.adapters.common import level_names
    from ledger.adapters.kueue_tree import kueue_budgets, parse_kueue_objects

    data = Path(__file__).resolve().parents[1] / "data" / "kueue" / "queues.yaml"
    budgets, notes = kueue_budgets(parse_kueue_objects(data.read_text(encoding="utf-8"), str(data)), "kueue", None, 8)
    assert budgets.levels == ("cohort", "clusterqueue") and budgets.team_level == "clusterqueue"
    assert any(n.startswith("levels: cohort, clusterqueue") for n in notes)
    # a ragged tree: users beside sub-accounts at depth 1, more users at depth 2
    assert level_names([{"account"}, {"account", "user"}, {"user"}], "account", "user") == (
        "account", "account2-or-user", "user")
    assert level_names([{"cohort"}, {"cohort"}, {"clusterqueue"}], "cohort", "clusterqueue") == (
        "cohort", "cohort2", "clusterqueue")
