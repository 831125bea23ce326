"""Philly attempts and CSV traces: runs, requeues between attempts, column maps, relative times, skips."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from ledger import events as ev
from ledger.adapters.csv_trace import CsvOptions, import_csv, import_csv_file, parse_column_map
from ledger.adapters.philly import PhillyOptions, import_philly, import_philly_file
from ledger.errors import ConfigError
from tests.adapters.helpers import DATA, assert_all_valid, event_counts, size_bucket, waits_from_events

PHILLY = DATA / "philly" / "jobs-slice.json"
PACIFIC = ZoneInfo("America/Los_Angeles")


def test_each_philly_job_is_one_workload_with_a_run_per_attempt_and_a_requeue_between() -> None:
    jobs = json.loads(PHILLY.read_text())
    res = import_philly_file(PHILLY)
    counts = event_counts(res.events)
    attempts = sum(len(j["attempts"]) for j in jobs)
    assert res.rejected == [] and res.workloads == len(jobs) == counts["WorkloadSubmitted"]
    assert counts["WorkloadStarted"] == attempts
    assert counts["WorkloadPreempted"] == counts["WorkloadRequeued"] == attempts - len(jobs)
    assert counts["WorkloadCompleted:succeeded"] == len(jobs)  # the subset keeps Pass jobs only
    assert_all_valid(res.events)


def test_a_three_attempt_philly_job_reads_as_pacific_time_with_restarts_timed_from_each_preemption() -> None:
    job = next(j for j in json.loads(PHILLY.read_text()) if len(j["attempts"]) == 3)
    res = import_philly(json.dumps([job]), "one.json")
    mine = [e for e in res.events if e.workload_id == job["id"]]  # type: ignore[attr-defined]
    assert [e.type_name for e in mine] == [
        "WorkloadSubmitted", "WorkloadStarted", "WorkloadPreempted", "WorkloadRequeued",
        "WorkloadStarted", "WorkloadPreempted", "WorkloadRequeued", "WorkloadStarted", "WorkloadCompleted",
    ]  # fmt: skip

    def local(text: str) -> datetime:
        return datetime.fromisoformat(text).replace(tzinfo=PACIFIC).astimezone(UTC)

    a = job["attempts"]
    assert mine[0].time == local(job["submitted_time"])
    assert [e.time for e in mine if isinstance(e, ev.WorkloadStarted)] == [local(x["start_time"]) for x in a]
    waits = waits_from_events(res.events)[size_bucket(job["num_gpus"])]
    expected = [local(a[0]["start_time"]) - local(job["submitted_time"])]
    expected += [local(a[i]["start_time"]) - local(a[i - 1]["end_time"]) for i in (1, 2)]
    assert waits == sorted(int(d.total_seconds()) for d in expected)


def test_malformed_philly_jobs_are_rejected_by_line_and_the_rest_kept() -> None:
    good = json.loads(PHILLY.read_text())[:2]
    text = (
        json.dumps(good[0]) + "\n"
        + '{"id": "x1", "num_gpus": 4, "submitted_time": "2017-10-01 10:00:00", "attempts": '
        '[{"start_time": "2017-10-01 09:00:00", "end_time": "2017-10-01 11:00:00"}]}\n'
        + '{"id": "x2", "num_gpus": "four"}\n'
        + "{not json at all\n"
        + '{"id": "x3", "num_gpus": 0, "submitted_time": "2017-10-01 10:00:00", "attempts": []}\n'
        + json.dumps(good[1]) + "\n"
    )  # fmt: skip
    res = import_philly(text, "jobs.jsonl", PhillyOptions(cluster="philly"))
    assert [(r.line, r.reason.split(":")[0]) for r in res.rejected] == [
        (2, "job x1"),
        (3, "job x2"),
        (4, "not JSON"),
    ]
    assert "before submitted_time" in res.rejected[0].reason
    assert res.skipped == {"0 GPUs (not a GPU workload)": 1}
    assert res.workloads == 2


ITP_MAP = "workload_id=job_id,submit=submission_time,duration=duration,gpus=num_gpu"


def test_an_itp_trace_becomes_submissions_at_epoch_plus_seconds_with_work_from_duration() -> None:
    path = DATA / "itp" / "cluster10.csv"
    rows = list(csv.DictReader(path.open()))
    epoch = datetime(2021, 3, 4, tzinfo=UTC)
    res = import_csv_file(
        path, CsvOptions(columns=parse_column_map(ITP_MAP), epoch="2021-03-04T00:00:00", cluster="itp10")
    )
    assert res.rejected == [] and res.workloads == len(rows) == 260
    assert event_counts(res.events) == {"WorkloadSubmitted": 260}  # no start column: nothing invented
    sub = {e.workload_id: e for e in res.events if isinstance(e, ev.WorkloadSubmitted)}
    for r in rows:
        e = sub[r["job_id"]]
        assert e.time == epoch + timedelta(seconds=int(r["submission_time"]))
        assert (e.gpus, e.work_s, e.budget) == (int(r["num_gpu"]), int(r["duration"]), "itp10")
    assert any("no start column" in n for n in res.notes)
    assert_all_valid(res.events)


TEAM_MAP = "workload_id=id,submit=submitted,start=started,end=finished,gpus=gpus,budget=team,user=user,outcome=status"


def test_a_teams_own_export_with_never_ran_running_and_zero_gpu_rows() -> None:
    res = import_csv_file(DATA / "csv" / "team-export.csv", CsvOptions(columns=parse_column_map(TEAM_MAP)))
    assert res.rows_read == 7 and res.workloads == 5
    assert res.skipped == {"0 GPUs (not a GPU workload)": 2}
    outcomes = {e.workload_id: e.outcome for e in res.events if isinstance(e, ev.WorkloadCompleted)}
    assert outcomes == {"j1": "succeeded", "j2": "failed", "j3": "cancelled", "j6": "succeeded"}
    started = {e.workload_id for e in res.events if isinstance(e, ev.WorkloadStarted)}
    assert started == {"j1", "j2", "j4", "j6"}  # j3 never ran; j4 is still running
    assert waits_from_events(res.events) == {"2-8": [600, 7200], "1": [3600], "9-64": [30]}
    assert {e.budget for e in res.events if isinstance(e, ev.WorkloadSubmitted)} == {"lab/vision", "lab/speech"}
    assert_all_valid(res.events)


def test_csv_rejects_bad_rows_with_their_line_and_keeps_going() -> None:
    lines = [
        "id,submit,gpus,start",
        "a,100,8,160",
        "b,100,0.5,",  # fractional GPUs
        "c,100,8",  # short row
        "d,soon,8,",
        "a,100,8,",  # repeated id
        "e,200,8,150",  # starts before it was submitted
        "f,100,-2,",
        "g,300,8,",
    ]
    columns = parse_column_map("workload_id=id,submit=submit,gpus=gpus,start=start")
    opts = CsvOptions(columns=columns, epoch="2026-03-02")
    res = import_csv(lines, "export.csv", opts)
    assert [r.line for r in res.rejected] == [3, 4, 5, 6, 7, 8]
    assert "gpus '0.5'" in res.rejected[0].reason and "expected 4 fields" in res.rejected[1].reason
    assert "'soon'" in res.rejected[2].reason and "already on line 2" in res.rejected[3].reason
    assert str(res.rejected[0]).startswith("export.csv:3: ")
    assert res.workloads == 2


def test_a_column_map_must_name_known_fields_and_the_needed_ones() -> None:
    with pytest.raises(ConfigError, match="gpus"):
        parse_column_map("workload_id=a,submit=b")
    with pytest.raises(ConfigError, match="'colour'"):
        parse_column_map("workload_id=a,submit=b,gpus=c,colour=d")


def test_times_outside_the_ledgers_range_are_rejected_with_the_reason() -> None:
    columns = parse_column_map("workload_id=id,submit=submit,gpus=gpus")
    res = import_csv(["id,submit,gpus", "a,1999-12-31T23:00:00,1", "b,2026-03-02T10:00:00,1"], "t.csv",
                     CsvOptions(columns=columns))  # fmt: skip
    assert [(r.line, r.reason) for r in res.rejected] == [
        (2, "submit 1999-12-31T23:00:00+00:00 lies outside 2000..2100")
    ]


# The example entry of the Philly trace's own cluster_job_log (its README, github.com/msr-fiddle/philly-traces,
# CC BY 4.0): the job's id is `jobid` and its GPUs are the ones each attempt's `detail` lists; no `num_gpus`.
CLUSTER_JOB_LOG_ENTRY = {
    "status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
    "attempts": [
        {"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23",
         "detail": [{"ip": "m47", "gpus": [f"gpu{i}" for i in range(8)]}]},
        {"start_time": "2017-10-07 01:13:30", "end_time": "2017-10-09 06:53:12",
         "detail": [{"ip": "m412", "gpus": [f"gpu{i}" for i in range(8)]}]},
    ],
    "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c",
}  # fmt: skip


def test_the_philly_traces_own_cluster_job_log_is_read_with_gpus_from_the_hosts_each_attempt_held() -> None:
    never_ran = {"status": "Killed", "vc": "ee9e8c", "jobid": "application_1506638472019_2", "attempts": [],
                 "submitted_time": "2017-10-07 02:11:39", "user": "ce2f4c"}
    running = {"status": "Failed", "vc": "103959", "jobid": "application_1506638472019_3", "user": "9a1f0b",
               "submitted_time": "2017-10-07 03:11:39",
               "attempts": [{"start_time": "2017-10-07 03:12:09", "end_time": None,
                             "detail": [{"ip": "m47", "gpus": ["gpu0"]}, {"ip": "m48", "gpus": ["gpu0", "gpu1"]}]}]}
    res = import_philly(json.dumps([CLUSTER_JOB_LOG_ENTRY, never_ran, running], indent=1), "cluster_job_log")
    assert res.rejected == [] and res.workloads == 2
    # a job never scheduled lists no GPUs and the log gives no count: counted, not guessed
    assert res.skipped == {"never scheduled: no GPU count": 1}
    subs = {e.workload_id: e for e in res.events if isinstance(e, ev.WorkloadSubmitted)}
    job = subs["application_1506638472019_14199"]
    assert (job.gpus, job.budget, job.user, job.resumable) == (8, "philly/ee9e8c/ce2f4c", "ce2f4c", True)
    starts = [e for e in res.events if isinstance(e, ev.WorkloadStarted)]
    assert [(e.workload_id, e.nodes, e.gpus) for e in starts] == [
        ("application_1506638472019_14199", ("m47",), 8), ("application_1506638472019_14199", ("m412",), 8),
        ("application_1506638472019_3", ("m47", "m48"), 3),
    ]
    counts = event_counts(res.events)
    assert counts["WorkloadPreempted"] == counts["WorkloadRequeued"] == 1
    assert counts["WorkloadCompleted:succeeded"] == 1 and counts["WorkloadCompleted"] == 1  # the other still runs
    assert_all_valid(res.events)
