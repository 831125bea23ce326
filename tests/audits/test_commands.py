"""`gpuledger audit` and `gpuledger explain` on a real run directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ledger.cli import main
from tests.audits.conftest import write_log
from tests.factories import Events


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_json_has_the_keys_of_audit_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert {"owed_hours", "discarded_work", "wait_by_size", "occupancy", "workloads", "anomalies"} <= set(data)
    assert [w["workload_id"] for w in data["workloads"]] == ["a1", "b1", "dbg"]


def test_audit_table_shows_each_report_and_one_report_on_request(run_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir))
    assert code == 0
    for title in ("owed hours", "discarded work", "wait by size", "occupancy", "workloads"):
        assert title in out
    code, out, _ = run(capsys, "audit", str(run_dir / "events"), "--report", "owed-hours")
    assert code == 0 and out.startswith("owed hours") and "org/b" in out and "wait by size" not in out


def test_audit_csv_of_one_report_parses(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "csv", "--report", "wait_by_size")
    assert code == 0
    table = list(csv.DictReader(io.StringIO(out)))
    first = {r["size"]: r for r in table if r["wait"] == "first"}
    assert first["2-8"]["jobs"] == "2" and float(first["2-8"]["mean_s"]) == 1800.0


def test_the_discarded_work_table_carries_the_eviction_ratio_as_gpus_per_gpu(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "json")
    ratio = json.loads(out)["discarded_work"]["eviction_ratio"]
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "csv", "--report", "discarded_work")
    rows = {r["split"]: r for r in csv.DictReader(io.StringIO(out))}
    assert code == 0 and float(rows["(all)"]["eviction_ratio"]) == ratio
    assert rows["allocated"]["eviction_ratio"] == ""  # counted over the whole cluster only
    code, out, _ = run(capsys, "audit", str(run_dir), "--report", "discarded-work")
    assert "eviction ratio" in out and f"{ratio:.2f}" in out.splitlines()[3]


def test_the_headline_gives_the_clusters_use_or_says_the_log_has_no_capacity_to_measure_it(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "json")
    occ = json.loads(out)["occupancy"]
    code, out, _ = run(capsys, "audit", str(run_dir))
    # 16 GPUs, two hours
    assert f"Occupancy, the whole cluster over the period: {occ['occupied_share']:.1%} of 32 capacity GPU-hours" in out
    # records imported without a budgets file: GPUs ran, but against no stated capacity
    E = Events()
    bare = write_log(tmp_path / "bare", [E.submit(0, "j", "org/a", gpus=8), E.start(0, "j", ("n1",), 8),
                                         E.complete(90, "j")])
    code, out, _ = run(capsys, "audit", str(bare))
    assert code == 0
    assert ("Occupancy, the whole cluster over the period: 12.0 GPU-hours run, but the log states no capacity to "
            "measure them against") in " ".join(line.strip() for line in out.splitlines())
    assert "--budgets FILE" in out


def test_audit_since_until_limits_the_period(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--format", "json", "--since", "2026-03-02T01:00:00",
                       "--until", "2026-03-02T02:00:00Z")
    assert code == 0
    assert json.loads(out)["period"] == {"start": "2026-03-02T01:00:00Z", "end": "2026-03-02T02:00:00Z"}
    code, _, err = run(capsys, "audit", str(run_dir), "--since", "yesterday")
    assert code != 0 and "--since 'yesterday'" in err


def test_audit_html_writes_one_file(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "audit", str(run_dir), "--format", "html", "--out", str(out))
    assert code == 0 and out.read_text().startswith("<!DOCTYPE html>")


def test_audit_of_a_missing_source_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "audit", str(tmp_path / "nope"))
    assert code != 0 and "nope" in err


def test_explain_tells_why_b1_waited_and_why_a1_was_preempted(run_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", str(run_dir), "b1")
    assert code == 0
    assert "b1 was submitted" in out
    # records with no decisions: what they show, and the ledger's reading of the standings, labelled
    assert "the scheduler's own reasons are not in its records" in out
    assert "under the budgets in this log, org/b stood 2 of 2 at 0 % of its allocation" in out
    assert "GPUs held by a1 (org/a, 8 GPUs, since 2026-03-02T00:00:00Z); 8 of 16 GPUs in use (50 %)" in out
    assert "started (attempt 1) after waiting 60.0 min" in out
    code, out, _ = run(capsys, "explain", str(run_dir), "a1")
    assert "the records show it preempted by the scheduler to make room for b1 (org/b, 8 GPUs)" in out
    assert "lost 2.67 GPU-hours of work since its last checkpoint" in out and "1.33 GPU-hours restarting" in out
    assert "- 2026-03-02T01:00:00Z: the records show it requeued." in out
    assert "2026-03-02T01:30:00Z: started (attempt 2) after waiting 30.0 min" in out
    assert out.startswith("Workload a1 (org/a, 8 GPUs): started 2 time(s), preempted 1 time(s), waited 30.0 min in "
                          "all, "
                          "4.00 GPU-hours thrown away by preemption.")
    # while a1 waited for 8 GPUs, a 1-GPU debug job of its own team took the room that was left
    assert "dbg (org/a, 1 GPU) started while it waited (the ledger's reading: org/a at 0.4 %)" in out
    assert "9 of 16 GPUs in use (56 %)" in out


def test_explain_ratios_cover_the_whole_window_as_the_core_does(run_dir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # a1 ran 8 GPU-hours; org/a's 3/4 of 16 GPUs over a 7-day window is 2,016 GPU-hours: 0.004 (not 0.53 as
    # it would be if the allocation counted only the 75 minutes the log covers)
    code, out, _ = run(capsys, "explain", str(run_dir), "a1")
    assert code == 0
    assert "org/a stood 2 of 2 at 0.4 % of its allocation" in out


def test_explain_json_and_unknown_workload(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", str(run_dir), "a1", "--format", "json")
    story = json.loads(out)["story"]
    assert [s["event"] for s in story if s["event"] != "could_start"] == [
        "submitted", "started", "preempted", "requeued", "started", "completed"]
    code, _, err = run(capsys, "explain", str(run_dir), "zz9")
    assert code != 0 and "workload 'zz9' is not in the log" in err


def test_audit_table_opens_with_the_headline_and_sorts_worst_first(run_dir: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir))
    assert code == 0
    lines = out.splitlines()
    # the tree names no levels: its leaves, the deepest level, are taken for teams, and the headline says so once
    assert lines[0] == ("GPU-hours received / owed per budget at depth 1 (the deepest level): 66.7% hour by hour, "
                        "83.2% over each week")
    assert lines[1].startswith("  Hour by hour: ")
    assert any(line.startswith("  Owed: each hour, a team is owed its budget share") for line in lines[:6])
    assert sum("names no levels" in line for line in lines) == 1
    assert "`levels: [org, program, team, user]`" in " ".join(line.strip() for line in lines)
    assert any(line.startswith("Under 95% of what they were owed, per budget at depth 1 (the deepest level): ")
               for line in lines[:30])
    assert any(line.startswith("Debug runs (protected, minimum runtime <= 15 min), the whole cluster over the period: "
                               "wait p90 ") for line in lines)
    assert any(line.startswith("Discarded by preemption, the whole cluster over the period: 4.0 GPU-hours")
               for line in lines)
    owed = out[out.index("\nowed hours per budget at depth 1 (the deepest level): hour by hour"):].splitlines()
    assert owed[4].startswith("(overall)")  # first under the header: no cut can hide it
    data = json.loads(run(capsys, "audit", str(run_dir), "--format", "json")[1])
    ratios = [t["ratio"] for t in sorted(data["owed_hours"]["teams"], key=lambda t: t["ratio"])]
    # columns: ... hour ratio, day ratio, week ratio
    shown = [float(line.split()[-3].rstrip("%")) / 100 for line in owed[5:5 + len(ratios)]]
    assert shown == pytest.approx(ratios, abs=0.0005)  # the teams worst first


def test_durations_read_as_durations_in_tables_and_stay_seconds_in_csv_and_json(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "audit", str(run_dir), "--report", "wait-by-team")
    assert code == 0 and out.startswith("wait by team")
    header = out.splitlines()[1].split()
    assert header == ["budget", "workloads", "started", "waiting", "cancelled", "mean", "p50", "p90", "max"]
    b = next(line for line in out.splitlines() if line.startswith("org/b"))
    assert b.endswith("60.0 min") and "3600" not in b  # b1 waited an hour
    code, out, _ = run(capsys, "audit", str(run_dir), "--report", "wait-by-team", "--format", "csv")
    rows = {r["budget"]: r for r in csv.DictReader(io.StringIO(out))}
    assert float(rows["org/b"]["max_s"]) == 3600.0
    code, out, _ = run(capsys, "audit", str(run_dir), "--report", "wait-by-team", "--format", "json")
    teams = {t["budget"]: t for t in json.loads(out)["wait_by_team"]}
    assert teams["org/b"]["p90_s"] == 3600.0 and teams["org/b"]["started"] == 1


def test_explain_tells_a_team_mate_ahead_in_the_queue_from_one_that_fit(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # x1 holds all 16 GPUs; when it ends, b1 (org/b, submitted first, 8 GPUs) starts with all 16 free, so it
    # went first by its place in the team's queue, not because b2 (12 GPUs) could not fit; then b3, submitted
    # after b2, takes 4 of the 8 GPUs left, room too small for b2
    E = Events()
    write_log(tmp_path / "run" / "events", [
        E.capacity(0, 16), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0), E.node(0, "org/b", 1.0),
        E.submit(0, "x1", "org/a", gpus=16), E.start(0, "x1", ("lab-n000", "lab-n001"), 16),
        E.submit(10, "b1", "org/b", gpus=8), E.submit(20, "b2", "org/b", gpus=12),
        E.submit(30, "b3", "org/b", gpus=4),
        E.complete(60, "x1"),
        E.start(60, "b1", ("lab-n000",), 8), E.start(60, "b3", ("lab-n001",), 4),
        E.complete(90, "b1"), E.complete(90, "b3"),
        E.start(90, "b2", ("lab-n000", "lab-n001"), 16), E.complete(120, "b2"),
    ])
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "b2")
    assert code == 0
    # records only: who started while it waited, and how busy the cluster was; no reason is invented
    assert "b1 (org/b, 8 GPUs) started while it waited" in out and "started instead" not in out
    assert "b3 (org/b, 4 GPUs) started while it waited" in out and "12 of 16 GPUs in use (75 %)" in out


def test_explain_counts_a_wait_still_open_at_the_end_of_the_log(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # w2 never starts: it waited from 00:30 to the log's last event at 02:00, not 0 s; w3 is cancelled at 01:00
    E = Events()
    write_log(tmp_path / "run" / "events", [
        E.capacity(0, 8), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0),
        E.submit(0, "w1", "org/a", gpus=8), E.start(0, "w1", ("lab-n000",), 8),
        E.submit(30, "w2", "org/a", gpus=8), E.submit(40, "w3", "org/a", gpus=8),
        E.complete(60, "w3", "cancelled"), E.complete(120, "w1"),
    ])
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "w2", "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["waited_s"] == 90 * 60
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "w2")
    assert "started 0 time(s), preempted 0 time(s), waited 90.0 min in all" in out
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "w3", "--format", "json")
    assert json.loads(out)["summary"]["waited_s"] == 20 * 60


def test_waits_by_team_count_the_audit_period_and_tell_jobs_cancelled_while_waiting_from_those_still_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # org/a: w1 waits 30 min; w2 is cancelled at 00:50 before it ever starts (it is not waiting at the end of
    # anything); w3, submitted at 01:40, waits an hour; w4, submitted at 02:50, is still waiting when the log
    # ends at 04:00; w5 runs at once from 00:00 to 04:00
    E = Events()
    log = write_log(tmp_path / "run" / "events", [
        E.capacity(0, 32), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0),
        E.submit(0, "w1", "org/a"), E.submit(0, "w2", "org/a"), E.submit(0, "w5", "org/a"),
        E.start(0, "w5", ("lab-n000",), 8), E.start(30, "w1", ("lab-n001",), 8),
        E.complete(50, "w2", "cancelled"), E.complete(60, "w1"),
        E.submit(100, "w3", "org/a"), E.start(160, "w3", ("lab-n001",), 8),
        E.submit(170, "w4", "org/a"), E.complete(200, "w3"), E.complete(240, "w5"),
    ])

    def team(*period: str) -> dict[str, object]:
        code, out, _ = run(capsys, "audit", str(log), "--report", "wait-by-team", "--format", "json", *period)
        assert code == 0
        (row,) = json.loads(out)["wait_by_team"]
        return dict(row)

    whole = team()
    assert (whole["workloads"], whole["started"], whole["waiting"], whole["cancelled"]) == (5, 3, 1, 1)
    assert whole["max_s"] == 3600.0
    # from 01:30 to 03:30 only w3's wait ends (with its start at 02:40) and w4 is still waiting at the end;
    # w1's wait and w2's cancellation happened before the period
    part = team("--since", "2026-03-02T01:30:00Z", "--until", "2026-03-02T03:30:00Z")
    assert (part["workloads"], part["started"], part["waiting"], part["cancelled"]) == (2, 1, 1, 0)
    assert part["mean_s"] == part["p90_s"] == 3600.0
    # the table says the same
    code, out, _ = run(capsys, "audit", str(log), "--report", "wait-by-team", "--since", "2026-03-02T01:30:00Z",
                       "--until", "2026-03-02T03:30:00Z")
    assert code == 0
    assert out.splitlines()[1].split() == ["budget", "workloads", "started", "waiting", "cancelled", "mean", "p50",
                                           "p90", "max"]
    assert out.splitlines()[3].split()[:5] == ["org/a", "2", "1", "1", "0"]


def test_records_that_ran_more_gpus_than_the_stated_capacity_are_an_anomaly_the_headline_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a budgets file says 16 GPUs, but the records ran three 8-GPU jobs at once from 00:30 to 01:00
    # (j3 made it 24); j1 ends at 01:00 as j4 starts there, which keeps 24 running until 01:30
    E = Events()
    log = write_log(tmp_path / "events", [
        E.capacity(0, 16), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0),
        E.submit(0, "j1", "org/a"), E.submit(0, "j2", "org/a"), E.submit(0, "j3", "org/a"), E.submit(0, "j4", "org/a"),
        E.start(0, "j1", ("lab-n000",), 8), E.start(0, "j2", ("lab-n001",), 8), E.start(30, "j3", ("lab-n002",), 8),
        E.complete(60, "j1"), E.start(60, "j4", ("lab-n000",), 8),
        E.complete(90, "j2"), E.complete(90, "j3"), E.complete(120, "j4"),
    ])
    code, out, _ = run(capsys, "audit", str(log), "--format", "json")
    assert code == 0
    data = json.loads(out)
    (over,) = [a for a in data["anomalies"] if a["kind"] == "over_capacity"]
    assert over["workload_id"] == "j3" and over["time"] == "2026-03-02T00:30:00Z" and over["included"] is True
    assert over["reason"].startswith("the records ran up to 24 GPUs at once, more than the 16 GPUs of the "
                                     "cluster's capacity (over it for 1.0 h in all, first when workload j3 started)")
    assert data["occupancy"]["occupied_share"] > 1
    code, out, _ = run(capsys, "audit", str(log))
    assert "  The records ran up to 24 GPUs at once, more than the 16 GPUs of the cluster's capacity" in out
    # the same records against a capacity that holds them: nothing to report
    E = Events()
    fits = write_log(tmp_path / "fits", [
        E.capacity(0, 24), E.submit(0, "j1", "org/a"), E.submit(0, "j2", "org/a"), E.submit(0, "j3", "org/a"),
        E.start(0, "j1", ("lab-n000",), 8), E.start(0, "j2", ("lab-n001",), 8), E.start(30, "j3", ("lab-n002",), 8),
        E.complete(60, "j1"), E.complete(60, "j2"), E.complete(60, "j3"),
    ])
    code, out, _ = run(capsys, "audit", str(fits), "--format", "json")
    assert not [a for a in json.loads(out)["anomalies"] if a["kind"] == "over_capacity"]


def test_explain_tells_why_a_job_waited_until_it_was_cancelled_and_that_it_never_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # w (org/a) waits from 00:10 for all 16 GPUs; b2 (org/b) takes them at 00:30 when x1 ends; w's user
    # cancels it at 01:00, as sacct records for a job cancelled while pending
    E = Events()
    write_log(tmp_path / "run" / "events", [
        E.capacity(0, 16), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0), E.node(0, "org/b", 1.0),
        E.submit(0, "x1", "org/b", gpus=16), E.start(0, "x1", ("lab-n000", "lab-n001"), 16),
        E.submit(5, "b2", "org/b", gpus=16), E.submit(10, "w", "org/a", gpus=16),
        E.complete(30, "x1"), E.start(30, "b2", ("lab-n000", "lab-n001"), 16),
        E.complete(60, "w", "cancelled"), E.complete(90, "b2"),
    ])
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "w")
    assert code == 0
    assert "- 2026-03-02T00:30:00Z: b2 (org/b, 16 GPUs) started while it waited" in out  # why it waited
    assert "- 2026-03-02T01:00:00Z: cancelled after waiting 50.0 min, without ever starting." in out
    assert "running again" not in out


def test_explain_ratios_stay_right_once_the_log_is_longer_than_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8 GPUs, org/a : org/b = 1 : 1. a1 holds all 8 for nine days; a2 (org/a) waits from day 8. At day 8
    # the 7-day window is days 1-8: org/a ran 8 x 168 = 1,344 GPU-hours of its 4 x 168 = 672: 2.00.
    # The allocation used to lose the first hour's segment once the window had slid past it (each
    # day since counted against it, 4 x 23 GPU-hours at day 8): 1,344 / 580 = 2.32, and 2.94 at day 9.
    day = 24 * 60
    E = Events()
    write_log(tmp_path / "run" / "events", [
        E.capacity(0, 8), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0), E.node(0, "org/b", 1.0),
        E.submit(0, "a1", "org/a", gpus=8), E.start(0, "a1", ("lab-n000",), 8),
        E.submit(8 * day, "a2", "org/a", gpus=8), E.complete(9 * day, "a1"),
        E.start(9 * day, "a2", ("lab-n000",), 8), E.complete(9 * day + 60, "a2"),
    ])
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "a2")
    assert code == 0
    assert "org/a stood 2 of 2 at 200 % of its allocation (ahead of it: org/b 0 %)" in out


def test_explain_ranks_over_the_runs_own_window_not_always_seven_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run replayed with --window 1h: 8 GPUs, org/a : org/b = 1 : 1; a1 holds all 8 from 00:00 to 03:00
    # and a2 (org/a) waits from 02:00. Over the run's hour before 02:00 org/a ran 8 GPU-hours of its 4:
    # 2.00, as the decisions of that run quote it; over 7 days it would read 16 of 672: 0.02.
    E = Events()
    write_log(tmp_path / "run" / "events", [
        E.capacity(0, 8), E.node(0, "org", 1.0), E.node(0, "org/a", 1.0), E.node(0, "org/b", 1.0),
        E.submit(0, "a1", "org/a", gpus=8), E.start(0, "a1", ("lab-n000",), 8),
        E.submit(120, "a2", "org/a", gpus=8), E.complete(180, "a1"),
        E.start(180, "a2", ("lab-n000",), 8), E.complete(240, "a2"),
    ])
    settings = {"policy": "fairshare", "window_s": 3600, "half_life_s": None, "fill_headroom": 0.03}
    (tmp_path / "run" / "replay.json").write_text(json.dumps({"settings": settings}))
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "a2")
    assert code == 0 and "org/a stood 2 of 2 at 200 % of its allocation" in out
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "a2", "--window", "7d")  # asked for: as asked
    assert "org/a stood 2 of 2 at 2.4 % of its allocation" in out
    # a run ranked by a half-life: explain's window cannot recount it, and says so
    (tmp_path / "run" / "replay.json").write_text(json.dumps({"settings": {**settings, "half_life_s": 86400}}))
    code, out, _ = run(capsys, "explain", str(tmp_path / "run"), "a2")
    assert "The run ranked budgets by a 1d half-life: the standings below are over a 1h window" in out
