"""Slurm sacct imports: the real reference slices, requeues, steps, arrays, time zones, bad lines."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.adapters.common import parse_zone
from ledger.adapters.slurm import (
    SlurmOptions,
    import_sacct,
    import_sacct_file,
    parse_gpus,
    parse_timelimit,
)
from tests.adapters.helpers import DATA, assert_all_valid, event_counts, size_bucket, waits_from_events

SLICES = [DATA / "slurm" / "pozidriv-slice.log", DATA / "slurm" / "phillips-slice.log"]


def plain_count(path: Path) -> tuple[set[str], Counter[str], int]:
    """Count a noheader sacct file the plain way: distinct job ids, rows per base state, rows that ran."""
    jobs: set[str] = set()
    states: Counter[str] = Counter()
    ran = 0
    for line in path.read_text().splitlines():
        f = line.split("|")
        jobs.add(f[0])
        states[f[16].split(" ")[0]] += 1
        ran += f[24] != "None assigned"
    return jobs, states, ran


@pytest.mark.parametrize("path", SLICES, ids=lambda p: p.name)
def test_real_sacct_slice_is_one_workload_per_job_with_state_counts_as_in_the_file(path: Path) -> None:
    jobs, states, ran = plain_count(path)
    res = import_sacct_file(path, SlurmOptions(gpus_for_cpu_jobs=1))
    counts = event_counts(res.events)

    assert res.rejected == []
    assert res.rows_read == sum(states.values())
    assert res.workloads == len(jobs) == counts["WorkloadSubmitted"]
    assert {e.workload_id for e in res.events} == jobs
    assert counts["WorkloadStarted"] == ran
    assert counts["WorkloadPreempted"] == counts["WorkloadPreempted:fair_share"] == states["PREEMPTED"]
    assert counts["WorkloadCompleted:succeeded"] == states["COMPLETED"]
    assert counts["WorkloadCompleted:failed"] == states["FAILED"] + states["TIMEOUT"]
    assert counts["WorkloadCompleted:cancelled"] == states["CANCELLED"] + states["PREEMPTED"]
    assert counts["WorkloadRequeued"] == 0  # no --duplicates in the reference files: nothing came back
    assert_all_valid(res.events)


def test_the_pozidriv_slice_keeps_every_preempted_row_as_a_preemption_at_its_end_time() -> None:
    path = DATA / "slurm" / "pozidriv-slice.log"
    preempted = {
        f[0]: datetime.fromisoformat(f[13]).replace(tzinfo=UTC)
        for f in (line.split("|") for line in path.read_text().splitlines())
        if f[16] == "PREEMPTED"
    }
    res = import_sacct_file(path, SlurmOptions(gpus_for_cpu_jobs=1))
    got = {e.workload_id: e.time for e in res.events if isinstance(e, ev.WorkloadPreempted)}
    assert len(preempted) == 86
    assert got == preempted


def test_cpu_jobs_are_skipped_and_counted_by_default() -> None:
    path = DATA / "slurm" / "phillips-slice.log"
    jobs, _, _ = plain_count(path)
    res = import_sacct_file(path)
    assert res.workloads == 2  # the two real gres/gpu=2 jobs
    assert res.skipped["no GPUs (CPU job)"] == len(jobs) - 2
    submitted = [e for e in res.events if isinstance(e, ev.WorkloadSubmitted)]
    assert {(e.workload_id, e.gpus, e.budget) for e in submitted} == {
        ("163485", 2, "phillips/chaff/noror"),
        ("196835", 2, "phillips/chaff/noror"),
    }


@pytest.mark.parametrize("path", SLICES, ids=lambda p: p.name)
def test_wait_by_size_of_the_import_equals_the_waits_in_the_files_own_columns(path: Path) -> None:
    direct: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        f = line.split("|")
        if f[24] == "None assigned":
            continue
        wait = datetime.fromisoformat(f[12]) - datetime.fromisoformat(f[10])
        gpus = parse_gpus(f[22]) or 1
        direct.setdefault(size_bucket(gpus), []).append(int(wait.total_seconds()))
    res = import_sacct_file(path, SlurmOptions(gpus_for_cpu_jobs=1))
    assert waits_from_events(res.events) == {k: sorted(v) for k, v in direct.items()}


def test_gpu_counts_from_tres_match_the_reference_parser_cases() -> None:
    import json

    cases = json.loads((DATA / "slurm" / "alloc-tres-gpu-count.json").read_text())
    assert [parse_gpus(tres) for tres, _ in cases] == [n for _, n in cases]
    assert parse_gpus("billing=8,cpu=8,gres/gpu=8,gres/gpu:a100=8,node=1") == 8  # generic total, typed repeat
    assert parse_gpus("gpu:tesla:2(IDX:0-1)") == 2  # AllocGRES of older Slurm


def test_time_limits() -> None:
    assert parse_timelimit("3-00:00:00") == 3 * 86_400
    assert parse_timelimit("14:20:00") == 14 * 3600 + 20 * 60
    assert parse_timelimit("30:00") == 30 * 60
    assert parse_timelimit("45") == 45 * 60
    assert parse_timelimit("UNLIMITED") is None


def by_workload(events: list[ev.Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        what = e.type_name.removeprefix("Workload")
        if isinstance(e, ev.WorkloadPreempted):
            what += f"({e.reason})"
        if isinstance(e, ev.WorkloadCompleted):
            what += f"({e.outcome})"
        out.setdefault(e.workload_id, []).append(what)  # type: ignore[attr-defined]
    return out


def test_a_day_on_a_gpu_partition_with_requeues_steps_and_arrays_read_in_local_time() -> None:
    res = import_sacct_file(
        DATA / "slurm" / "requeues-steps-arrays.txt", SlurmOptions(tz=parse_zone("America/New_York"))
    )
    story = by_workload(res.events)
    # 5001 was preempted at 11:00 local, requeued, ran again on another node and completed
    assert story["5001"] == ["Submitted", "Started", "Preempted(fair_share)", "Requeued", "Started",
                             "Completed(succeeded)"]
    # 5002 lost a node, came back and is still running
    assert story["5002"] == ["Submitted", "Started", "Preempted(host_failure)", "Requeued", "Started"]
    # an operator requeued 5009; it waits again
    assert story["5009"] == ["Submitted", "Started", "Preempted(user)", "Requeued"]
    # array tasks are workloads; a pending task range stands for each task
    assert story["5003_1"][-1] == "Completed(succeeded)" and story["5003_2"][-1] == "Completed(failed)"
    assert story["5003_3"] == story["5003_4"] == ["Submitted"]
    # cancelled while pending: no run, only the completion
    assert story["5006"] == ["Submitted", "Completed(cancelled)"]
    # the job row has no GPUs but its step does: folded in
    sub = {e.workload_id: e for e in res.events if isinstance(e, ev.WorkloadSubmitted)}
    assert sub["5007"].gpus == 1 and sub["5003_1"].gpus == 2 and sub["5002"].gpus == 16
    assert "5008" not in story  # a CPU job
    assert res.skipped == Counter(
        {"job step (folded into its job)": 5, "job step whose job is not in the file": 1, "no GPUs (CPU job)": 1}
    )
    # sacct printed New York wall time; the ledger holds UTC
    assert sub["5001"].time == datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    assert sub["5001"].resumable and not sub["5003_1"].resumable
    starts = [e for e in res.events if isinstance(e, ev.WorkloadStarted) and e.workload_id == "5002"]
    assert [s.nodes for s in starts] == [("g003", "g004"), ("g005", "g007")]
    assert [s.attempt for s in starts] == [1, 2]
    # the debug partition's 15-minute limit cuts the protected minimum runtime
    assert sub["5006"].kind == "debug" and sub["5006"].min_runtime_s == 900
    assert_all_valid(res.events)
    waits = waits_from_events(res.events)
    assert 30 * 60 in waits["2-8"]  # 5001 restarted 30 minutes after its preemption


def test_requeue_waits_count_from_the_preemption() -> None:
    res = import_sacct_file(DATA / "slurm" / "requeues-steps-arrays.txt")
    waits = waits_from_events(res.events)
    assert waits["9-64"] == sorted([30, 45 * 60])  # 5002: 30 s to first start, 45 min after the node failure


def test_a_header_line_and_the_trailing_bar_of_parsable_are_understood() -> None:
    lines = [
        "JobID|State|Submit|Start|End|AllocTRES|Account|User|",
        "7|COMPLETED|2026-03-02T10:00:00|2026-03-02T10:05:00|2026-03-02T11:00:00|gres/gpu=8|a|u|",
    ]
    res = import_sacct(lines, "x.txt", SlurmOptions(cluster="c1"))
    assert res.rejected == [] and res.workloads == 1
    assert event_counts(res.events)["WorkloadCompleted:succeeded"] == 1
    assert res.events[0].budget == "c1/a/u"  # type: ignore[attr-defined]


GOOD = ("10|10|c|p|q|acct|g|1|u|1|2026-03-02T10:00:00|2026-03-02T10:00:00|2026-03-02T10:01:00|"
        "2026-03-02T11:00:00|00:59:00|0:0|COMPLETED|1|8|8|1G||gres/gpu=1|01:00:00|n1|job")


def bad_file() -> list[str]:
    cut = GOOD.split("|")
    return [
        GOOD,
        "|".join(cut[:10]),  # line 2: truncated
        GOOD.replace("10|10|", "11|11|").replace("2026-03-02T10:00:00", "yesterday", 1),
        GOOD.replace("10|10|", "12|12|").replace("COMPLETED", "EXPLODED"),
        GOOD.replace("10|10|", "13|13|").replace("2026-03-02T11:00:00", "2026-03-02T09:00:00"),
        GOOD.replace("10|10|", "14|14|"),
    ]


def test_malformed_lines_are_rejected_with_file_line_and_reason_and_the_rest_imported() -> None:
    res = import_sacct(bad_file(), "day.log", SlurmOptions())
    assert [(r.file, r.line) for r in res.rejected] == [("day.log", 2), ("day.log", 3), ("day.log", 4),
                                                        ("day.log", 5)]
    reasons = [r.reason for r in res.rejected]
    assert "expected 26" in reasons[0]
    assert "'yesterday'" in reasons[1]
    assert "EXPLODED" in reasons[2]
    assert "before Start" in reasons[3]
    assert res.workloads == 2 and {e.workload_id for e in res.events} == {"10", "14"}  # type: ignore[attr-defined]
    assert "day.log:2: expected 26" in res.render()


@pytest.mark.parametrize("tres", ["gres/gpu=abc", "cpu=8,gres/gpu=-2", "gres/gpu:a100=x,gres/gpu=", "gres/gpu=4.5"])
def test_a_gpu_count_that_is_no_whole_number_is_rejected_not_read_as_a_cpu_job(tres: str) -> None:
    # read as 0 GPUs, such a job was skipped as a CPU job, or imported as one with --gpus-for-cpu-jobs
    lines = [GOOD, GOOD.replace("10|10|", "16|16|").replace("gres/gpu=1", tres)]
    res = import_sacct(lines, "tres.log", SlurmOptions(gpus_for_cpu_jobs=1))
    assert [(r.line, r.reason) for r in res.rejected] == [
        (2, f"AllocTRES {tres!r}: {next(e for e in tres.split(',') if e.startswith('gres/gpu'))!r} "
            "is not a GPU count (gres/gpu=N)")]
    assert res.workloads == 1 and res.skipped == {}
    assert parse_gpus("cpu=8,gres/gpumem=40G,gres/gpu=2") == 2  # other GPU resources are not the count


def test_importing_the_same_file_twice_yields_the_same_event_ids() -> None:
    path = DATA / "slurm" / "requeues-steps-arrays.txt"
    first = [e.event_id for e in import_sacct_file(path).events]
    again = [e.event_id for e in import_sacct_file(path).events]
    assert first == again
    assert len(set(first)) == len(first)
    assert "lake/slurm/5001/preempt1" in first


def test_a_malformed_array_task_list_is_rejected_not_fatal() -> None:
    res = import_sacct([GOOD.replace("10|10|", "15_[3-1]|15|"), GOOD], "arr.log")
    assert [r.line for r in res.rejected] == [1] and "array task list" in res.rejected[0].reason
    assert res.workloads == 1


def _record(state: str, start: str, end: str) -> str:
    """One record of job 21, submitted at midnight (``start`` "Unknown": it never ran)."""
    ran = start != "Unknown"
    return "|".join([
        "21", "21", "c1", "gpu", "normal", "vision", "g", "1", "ada", "1", "2026-03-02T00:00:00",
        "2026-03-02T00:00:00", start, end, "00:00:00", "0:0", state, "1", "8", "8", "1G", "cpu=8",
        "cpu=8,gres/gpu=1" if ran else "", "1-00:00:00", "g000" if ran else "None assigned", "name",
    ])  # fmt: skip


def test_records_of_one_job_that_contradict_each_other_are_rejected_not_told_out_of_order() -> None:
    # cancelled before it ever ran, at midnight, yet another record of it ran until 00:01
    cancelled_early = [
        _record("CANCELLED by 42", "Unknown", "2026-03-02T00:00:00"),
        _record("COMPLETED", "2026-03-02T00:00:00", "2026-03-02T00:01:00"),
    ]
    # a requeued run that ended at 00:10, yet the next record of the job started at 00:05
    overlapping = [
        _record("REQUEUED", "2026-03-02T00:00:00", "2026-03-02T00:10:00"),
        _record("COMPLETED", "2026-03-02T00:05:00", "2026-03-02T00:20:00"),
    ]
    for lines, line, why in (
        (cancelled_early, 1, "line 1 ends the job (CANCELLED, never started) at 2026-03-02T00:00:00+00:00, before the "
         "run of line 2 ended"),
        (overlapping, 2, "line 2 starts at 2026-03-02T00:05:00+00:00, before the run of line 1 ended"),
    ):
        res = import_sacct(lines, "odd.log")
        assert res.events == [] and res.workloads == 0
        assert [r.line for r in res.rejected] == [line] and why in res.rejected[0].reason, res.rejected


def test_a_time_at_the_edge_of_the_calendar_in_a_local_zone_is_rejected_not_a_crash() -> None:
    # read in New York, 9999-12-31 23:59 is past the last instant a datetime can hold in UTC
    lines = [GOOD.replace("2026-03-02T11:00:00", "9999-12-31T23:59:59"), GOOD.replace("10|10|", "11|11|")]
    res = import_sacct(lines, "edge.log", SlurmOptions(tz=parse_zone("America/New_York")))
    assert [r.line for r in res.rejected] == [1]
    assert "'9999-12-31T23:59:59' lies outside 2000..2100" in res.rejected[0].reason
    assert res.workloads == 1
