"""ITP jobs as the PAI v2020 simulator's job CSV: each job once, in submission order, wide jobs as gangs of hosts."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench.commands import ITP
from bench.pai import COLUMNS, write_simulator_trace
from ledger.replay.itp import load_itp


def _first_jobs(where: Path, count: int) -> list[str]:
    lines = ITP.read_text().splitlines()[: count + 1]  # the header and the first jobs of cluster04
    (where / "cluster04.csv").write_text("\n".join(lines) + "\n")
    return lines[1:]


def test_the_first_jobs_of_cluster04_become_the_simulators_rows(tmp_path: Path) -> None:
    jobs = _first_jobs(tmp_path, 40)  # 31 jobs of 8 GPUs, six of 16, three of 32

    written = write_simulator_trace(load_itp(tmp_path / "cluster04.csv"), tmp_path / "jobs.csv")

    with (tmp_path / "jobs.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    assert written == len(rows) == 40
    assert [row["job_id"] for row in rows] == [str(n) for n in range(40)]  # the simulator keeps ids as integers
    for row, job in zip(rows, jobs, strict=True):
        _, submitted, duration, gpus = job.split(",")
        assert (row["submit_time"], row["duration"]) == (submitted, duration)
        assert int(row["num_gpu"]) * int(row["num_inst"]) == int(gpus)
        assert int(row["num_gpu"]) <= 8  # an instance never wider than a host
    assert {(row["num_gpu"], row["num_inst"]) for row in rows} == {("8", "1"), ("8", "2"), ("8", "4")}


def test_a_wide_job_that_is_not_whole_hosts_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.csv").write_text("job_id,submission_time,duration,num_gpu\nj1,10,600,8\nj2,20,600,12\n")

    with pytest.raises(SystemExit, match="j2 asks 12 GPUs"):
        write_simulator_trace(load_itp(tmp_path / "odd.csv"), tmp_path / "jobs.csv")
