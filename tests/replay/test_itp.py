"""The Microsoft ITP raw traces: jobs are hashed into teams by a seeded rule, the rest assumed and noted."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.replay.itp import EPOCH, default_budgets, is_itp_trace, load_itp, team_of

SAMPLE = """job_id,submission_time,duration,num_gpu
965d744f-0445-c1a8-12af-97e4c536c66e,1932025,2429,64
fb10987f-20ac-3703-eb67-146a77a6e17c,2000581,1532,1
aaaaaaaa-0000-0000-0000-000000000001,100,600,8
aaaaaaaa-0000-0000-0000-000000000002,200,7200,0
aaaaaaaa-0000-0000-0000-000000000003,300,90000,16
"""


def test_itp_jobs_become_submissions_under_the_documented_assumptions(tmp_path: Path) -> None:
    path = tmp_path / "cluster99.csv"
    path.write_text(SAMPLE)
    assert is_itp_trace(path)
    inputs = load_itp(path)
    subs = {s.workload_id: s for s in inputs.inputs}  # type: ignore[attr-defined]
    assert len(subs) == 4 and [(r.line, r.field) for r in inputs.rejected] == [(5, "num_gpu")]
    short = subs["aaaaaaaa-0000-0000-0000-000000000001"]
    assert (short.kind, short.min_runtime_s, short.resumable, short.work_s) == ("debug", 600, False, 600)
    long = subs["aaaaaaaa-0000-0000-0000-000000000003"]
    assert (long.kind, long.min_runtime_s, long.resumable, long.checkpoint_interval_s, long.restart_s) == (
        "training",
        7200,
        True,
        1800,
        300,
    )
    assert (short.time - EPOCH).total_seconds() == 100
    assert inputs.gpus >= 64 and inputs.gpus % 8 == 0
    assert all(s.budget in default_budgets("x", 8).leaves for s in subs.values())
    assert any("hashed into 9 teams" in n for n in inputs.notes)


def test_team_assignment_is_a_stable_seeded_hash() -> None:
    leaves = default_budgets("x", 8).leaves
    ids = [f"job-{i}" for i in range(300)]
    first = [team_of(j, leaves) for j in ids]
    assert first == [team_of(j, leaves) for j in ids]
    assert first != [team_of(j, leaves, seed=1) for j in ids]
    assert set(first) == set(leaves), "every team gets jobs"


def test_a_file_that_is_not_an_itp_trace_is_not_taken_for_one(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("workload_id,submit_time\n")
    assert not is_itp_trace(path)
    with pytest.raises(Exception, match="no job"):
        load_itp(path)


def test_a_bad_number_in_an_itp_row_is_rejected_naming_its_column_and_the_rest_replayed(tmp_path: Path) -> None:
    # an edited or corrupted copy of a raw trace: each bad value is set aside with its own column, and
    # none of them (infinity, a time past what the ledger can hold, a fraction of a GPU) stops the replay;
    # a job id seen before is set aside as the other traces' repeated workload_id is
    path = tmp_path / "cluster98.csv"
    path.write_text(
        "job_id,submission_time,duration,num_gpu\n"
        "ok-1,100,600,8\n"
        "inf-submit,inf,600,8\n"
        "far-submit,1e30,600,8\n"
        "text-duration,100,ten minutes,8\n"
        "nan-duration,100,nan,8\n"
        "half-gpu,100,600,2.5\n"
        "ok-2,200.0,7200,16\n"
        "ok-1,300,600,8\n"
    )
    inputs = load_itp(path)
    assert sorted(s.workload_id for s in inputs.inputs if hasattr(s, "workload_id")) == ["ok-1", "ok-2"]
    assert [(r.line, r.field, r.value) for r in inputs.rejected] == [
        (3, "submission_time", "inf"), (4, "submission_time", "1e30"), (5, "duration", "ten minutes"),
        (6, "duration", "nan"), (7, "num_gpu", "2.5"), (9, "job_id", "ok-1"),
    ]  # fmt: skip
    assert str(inputs.rejected[1]).endswith("submission_time = '1e30': expected seconds after the epoch, "
                                            "at most 2099-12-31T23:59:59Z")
