"""Invariants of any sacct import: well-formed stories per workload, valid events, stable unique ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from ledger.adapters.slurm import import_sacct
from tests.adapters.helpers import assert_all_valid

STATES = ["COMPLETED", "FAILED", "CANCELLED by 42", "TIMEOUT", "PREEMPTED", "REQUEUED", "NODE_FAIL",
          "OUT_OF_MEMORY", "RUNNING", "PENDING", "BOOT_FAIL", "DEADLINE", "SUSPENDED"]  # fmt: skip
T0 = datetime(2026, 3, 2, tzinfo=UTC)


def stamp(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S")


@st.composite
def record(draw: st.DrawFn, job: int, after: int) -> tuple[int, str]:
    """One sacct record of job ``job`` submitted at or after minute ``after``; return (its end, the line)."""
    state = draw(st.sampled_from(STATES))
    submit = after + draw(st.integers(0, 60))
    ran = state != "PENDING" and draw(st.booleans() if state.startswith("CANCELLED") else st.just(True))
    start = submit + draw(st.integers(0, 120))
    end = start + draw(st.integers(0, 600))
    ended = state not in ("RUNNING", "PENDING", "SUSPENDED")
    gpus = draw(st.sampled_from(["", "gres/gpu=1", "gres/gpu=8", "gres/gpu:a100=4,gres/gpu=4"]))
    fields = [
        str(job), str(job), "c1", "gpu", "normal", draw(st.sampled_from(["vision", "speech"])), "g", "1",
        draw(st.sampled_from(["ada", "bo"])), "1", stamp(submit), stamp(submit),
        stamp(start) if ran else "Unknown", stamp(end) if ended else "Unknown", "00:00:00", "0:0", state, "1", "8",
        "8", "1G", "cpu=8", f"cpu=8,{gpus}" if ran else "", "1-00:00:00",
        f"g{job:03d}" if ran else "None assigned", "name",
    ]  # fmt: skip
    return (end if ended else end + 10_000), "|".join(fields)


@st.composite
def sacct_file(draw: st.DrawFn) -> list[str]:
    lines: list[str] = []
    for job in range(draw(st.integers(1, 8))):
        t = draw(st.integers(0, 1000))
        for _ in range(draw(st.integers(1, 3))):  # --duplicates: a requeued job prints one record per run
            end, line = draw(record(job, t))
            lines.append(line)
            t = end
            if draw(st.booleans()):
                step = line.split("|")
                step[0] = step[1] = f"{job}.batch"
                lines.append("|".join(step))
    return draw(st.permutations(lines))


@settings(max_examples=60, deadline=None)
@given(sacct_file())
def test_every_workload_tells_a_well_formed_story(lines: list[str]) -> None:
    res = import_sacct(lines, "gen.log", None)
    assert_all_valid(res.events)
    ids = [e.event_id for e in res.events]
    assert len(ids) == len(set(ids))
    assert ids == [e.event_id for e in import_sacct(lines, "gen.log", None).events]  # same file, same ids
    times = [e.time for e in res.events]
    assert times == sorted(times)
    stories: dict[str, list[ev.Event]] = {}
    for e in res.events:
        stories.setdefault(e.workload_id, []).append(e)  # type: ignore[attr-defined]
    assert len(stories) == res.workloads
    for story in stories.values():
        assert isinstance(story[0], ev.WorkloadSubmitted)
        running = False
        waiting = True
        for e in story[1:]:
            assert not isinstance(e, ev.WorkloadSubmitted)
            if isinstance(e, ev.WorkloadStarted):
                assert waiting and not running
                running, waiting = True, False
            elif isinstance(e, ev.WorkloadPreempted):
                assert running
                running = False
            elif isinstance(e, ev.WorkloadRequeued):
                assert not running and not waiting
                waiting = True
            elif isinstance(e, ev.WorkloadCompleted):
                assert e is story[-1]
        starts = [e.attempt for e in story if isinstance(e, ev.WorkloadStarted)]
        assert starts == list(range(1, len(starts) + 1))
