"""The offset trace tells a chain of worker runs that lost or doubled an input from one that did not."""

from __future__ import annotations

from streams.trace import check_trace, parse_ranges, ranges


def line(pid: int, text: str) -> str:
    return f"[2026-03-02 08:00:00,000] [{pid}] [WARNING] offsets {text}"


def two_runs(second_restores_at: int, second_applies: str, commit: int = 10) -> list[str]:
    return [
        line(1, "restored cluster=busy partition=0 state=-1"),
        line(1, "applied cluster=busy partition=0 offsets=0-9 replayed=-"),
        line(1, "checkpoint cluster=busy partition=0 state=9 acked=0-9"),
        line(1, f"commit partition=0 offset={commit} done=True"),
        line(1, "applied cluster=busy partition=0 offsets=10-14 replayed=-"),  # lost with the crash
        line(2, f"restored cluster=busy partition=0 state={second_restores_at}"),
        line(2, f"applied cluster=busy partition=0 offsets={second_applies} replayed=-"),
    ]


def test_ranges_round_trip() -> None:
    assert ranges([9, 3, 4, 5, 7]) == "3-5,7,9"
    assert parse_ranges("3-5,7,9") == [3, 4, 5, 7, 9]
    assert ranges([]) == "-" and parse_ranges("-") == []


def test_a_restart_that_resumes_after_its_checkpoint_is_consistent() -> None:
    assert check_trace(two_runs(9, "10-20")) == []
    # a checkpoint made durable just before the crash, its trace line lost with the process
    assert check_trace(two_runs(12, "13-20")) == []


def test_a_restart_that_skips_records_shows_them_never_applied() -> None:
    assert check_trace(two_runs(9, "12-20")) == ["pid 2 cluster busy: offsets 10-11 never applied"]


def test_a_restart_from_a_stale_checkpoint_or_applying_an_offset_again_is_reported() -> None:
    problems = check_trace(two_runs(7, "8-20"))
    assert problems == ["pid 2 cluster busy: restored state at offset 7, but the last durable checkpoint reflects 9"]
    assert check_trace(two_runs(9, "10-13,12-20")) == ["pid 2 cluster busy: offset 12 applied twice",
                                                       "pid 2 cluster busy: offset 13 applied twice"]


def test_a_commit_past_the_last_checkpoint_is_reported() -> None:
    assert check_trace(two_runs(9, "10-20", commit=12)) == ["pid 1 partition 0: committed 12, past the checkpoints' 9"]
    assert check_trace(two_runs(9, "10-20", commit=12), commits=False) == []
