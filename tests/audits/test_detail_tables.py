"""The two-teams day audited into a lean audit.json and Parquet detail tables, read back three ways."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ledger.queries import audit, audit_run
from ledger.queries.detail import FOLDER, TABLES, Details
from tests.audits.conftest import two_teams_day

audit_module = importlib.import_module("ledger.queries.audit")  # the module (the package exports its function)


def test_audit_json_names_every_detail_table_with_the_rows_its_parquet_file_holds(run_dir: Path) -> None:
    data = audit_run(run_dir)
    on_disk = json.loads((run_dir / "audit.json").read_text())
    assert on_disk["tables"] == data["tables"]
    assert set(data["tables"]) == set(TABLES)
    for name, entry in data["tables"].items():
        path = run_dir / entry["file"]
        assert path.parent == run_dir / FOLDER and path.name == f"{name}.parquet"
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall() == [(entry["rows"],)]
    # the day: 2 teams x 2 hours (the log spans 00:00 to 02:00), one UTC day each, 3 workloads
    assert data["tables"]["teams_hourly"]["rows"] == 4 and data["tables"]["fairness_hourly"]["rows"] == 4
    assert data["tables"]["teams_daily_owed"]["rows"] == 2 and data["tables"]["workloads"]["rows"] == 3
    # no hour-by-hour series left in the document itself
    assert "hourly" not in data["fairness"] and "hourly" not in data["occupancy"]
    assert "by_team_daily" not in data["owed_hours"]


def test_the_parquet_rows_are_the_rows_of_the_audit_itself(run_dir: Path) -> None:
    audit_run(run_dir)
    whole = audit(run_dir, details=tuple(TABLES))
    files = Details.files(run_dir / FOLDER)
    for name in TABLES:
        assert files.rows(name) == Details.of(_prepared(run_dir)).rows(name), name
    b = [r for r in whole["owed_hours"]["by_team_daily"] if r["budget"] == "org/b"]
    # team b: owed 4 GPU-hours in each of hours 0 and 1, delivered 8 in hour 1
    assert b[0]["day"] == "2026-03-02T00:00:00Z"
    assert math.isclose(b[0]["owed_gpu_hours"], 8.0) and math.isclose(b[0]["delivered_gpu_hours"], 8.0)
    assert [w["workload_id"] for w in whole["workloads"]] == [w["workload_id"] for w in files.rows("workloads")]
    # times are timestamps in the file, ISO 8601 text once read back
    kinds = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{run_dir / FOLDER / 'teams_hourly.parquet'}')")
    assert ("hour", "TIMESTAMP") in {(r[0], r[1]) for r in kinds.fetchall()}


def _prepared(run_dir: Path) -> duckdb.DuckDBPyConnection:
    con = audit_module.connect(run_dir / "events", decisions=False)
    audit_module.prepare(con)
    return con


def test_a_long_workload_list_is_cut_in_the_document_and_whole_in_its_table(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_module.workloads, "__defaults__", (2,))
    data = audit_run(run_dir)
    assert len(data["workloads"]) == data["tables"]["workloads"]["listed"] == 2
    assert data["tables"]["workloads"]["rows"] == 3
    everyone = Details.files(run_dir / FOLDER).rows("workloads")
    assert everyone[:2] == data["workloads"] and len(everyone) == 3


def test_gpuledger_audit_prints_the_lean_document_and_writes_tables_only_where_asked(
    run_dir: Path, tmp_path: Path
) -> None:
    gl = [sys.executable, "-m", "ledger.cli", "audit", str(run_dir)]
    shown = json.loads(subprocess.run([*gl, "--format", "json"], capture_output=True, text=True, check=True).stdout)
    assert {entry["file"] for entry in shown["tables"].values()} == {None}
    assert shown["tables"]["workloads"]["rows"] == 3
    out = tmp_path / "tables"
    done = subprocess.run([*gl, "--format", "json", "--tables", str(out)], capture_output=True, text=True, check=True)
    named = json.loads(done.stdout)["tables"]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.parquet" for n in TABLES)
    assert Path(named["fairness_hourly"]["file"]) == out / "fairness_hourly.parquet"
    refused = subprocess.run([*gl, "--tables", str(run_dir / "events" / "x")], capture_output=True, text=True)
    assert refused.returncode != 0 and "inside the event log" in refused.stderr
    assert not (run_dir / "events" / "x").exists()


def test_the_fairness_csv_lists_every_team_hour_from_the_detail_table(run_dir: Path) -> None:
    gl = [sys.executable, "-m", "ledger.cli", "audit", str(run_dir)]
    csv = subprocess.run([*gl, "--report", "fairness", "--format", "csv"], capture_output=True, text=True, check=True)
    lines = csv.stdout.strip().splitlines()
    assert lines[0] == "budget,hour,usage_gpu_hours,allocation_gpu_hours,hour_ratio,window_ratio"
    assert len(lines) == 1 + 4 and lines[1].startswith("org/a,2026-03-02T00:00:00Z,")


def test_the_two_teams_day_audits_the_same_whichever_way_it_is_read() -> None:
    a = audit(two_teams_day())
    assert a["fairness"]["by_team"][1]["budget"] == "org/b"
    assert math.isclose(a["occupancy"]["by_team"][1]["allocated_gpu_hours"], 8.0)


def test_a_replay_audits_the_events_it_handed_the_log_exactly_as_the_log_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.commands._runs import run_one
    from ledger.core.knobs import Knobs
    from ledger.queries import projection
    from ledger.replay.run import load_inputs

    handed: list[int] = []  # the replay's events, projected without reading the log
    register = projection.register

    lab = Path(__file__).resolve().parents[2] / "examples" / "lab"
    inputs = load_inputs(lab / "trace.csv", lab / "budgets.yaml")
    run = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(projection, "register", lambda tables, con=None: handed.append(len(tables)) or register(tables))
        patched.setattr(projection, "load_arrow", None)  # reading the log back would fail here
        run_one(inputs, Knobs(policy="fairshare", gpus_per_node=inputs.gpus_per_node), run, quiet=True)
    written = json.loads((run / "audit.json").read_text())
    again = audit(run, details=tuple(TABLES))  # from the log on disk
    for name, entry in written.pop("tables").items():
        assert entry["rows"] == again["tables"][name]["rows"]
        assert Details.files(run / FOLDER).rows(name) == Details.of(_prepared(run)).rows(name), name
    assert written == {k: v for k, v in audit(run).items() if k != "tables"}
    assert written["owed_hours"]["teams"] and written["discarded_work"]["preemptions"] > 0
    assert handed == [len(projection.TABLES)]
