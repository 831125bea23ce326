"""A debug partition's day: the last host of four takes only debug runs, and free fill while it is idle.

Four hosts of 8 GPUs, two teams with equal shares, ``debug_hosts=1``: lab-n003 is the debug host.
Team a runs a 24-GPU training run, three times its share, and so stands last in the fair-share
order; team b, which has used nothing, stands first. Without the partition a's 8-GPU debug run
would wait for b's work to be served first; with it, the debug host serves it within minutes,
while b's batch run is never placed there and free fill soaks the host between debug runs.
"""

from __future__ import annotations

import argparse

import pytest

from ledger import events as ev
from ledger.commands._knobs import add_knob_arguments, knobs_from_args
from ledger.core import DecisionCore, Knobs
from ledger.core.knobs import debug_partition_size
from ledger.errors import ConfigError
from tests.core.test_day import of, run
from tests.core.test_holds import _cluster
from tests.factories import Events, at

DEBUG_HOST = ("lab-n003",)


def _started(out: list[ev.Event]) -> dict[str, ev.WorkloadStarted]:
    return {s.workload_id: s for s in of(out, ev.WorkloadStarted)}  # type: ignore[attr-defined]


def _reason(out: list[ev.Event], wid: str, action: str = "start") -> str:
    return next(
        d.reason for d in of(out, ev.SchedulingDecision)  # type: ignore[attr-defined]
        if d.workload_id == wid and d.action == action  # type: ignore[attr-defined]
    )


def test_a_debug_run_of_the_team_ranked_last_starts_on_the_debug_host_within_minutes() -> None:
    e = Events()
    core = DecisionCore(Knobs(debug_hosts=1), "lab")
    # 08:00 team a's training run takes three whole hosts: the lowest ones, never the debug host
    out = run(core, [*_cluster(e), e.submit(0, "a-train", "lab/a", gpus=24, min_runtime_s=2 * 3600)])
    assert _started(out)["a-train"].nodes == ("lab-n000", "lab-n001", "lab-n002")  # type: ignore[attr-defined]
    # 08:01 free fill soaks the idle debug host
    out = run(core, [e.submit(1, "fill", "lab/b", gpus=8, min_runtime_s=0)])
    assert _started(out)["fill"].nodes == DEBUG_HOST  # type: ignore[attr-defined]
    assert "the debug host takes only allocated runs protected <= 15m on one host" in _reason(out, "fill")
    # 08:05 team b, first in the order, asks for a batch run: the only room is the debug host's, and
    # a batch run may neither start there nor preempt the fill there
    out = run(core, [e.submit(5, "b-batch", "lab/b", gpus=8, min_runtime_s=3600)])
    assert not of(out, ev.WorkloadStarted) and not of(out, ev.WorkloadPreempted)
    assert core.fair_share_order(ev.to_us(at(5)))[1:] == ["lab/b", "lab/a"]  # a stands last
    # 08:10 team a's 8-GPU debug run (protected 10 min): the fill makes way on the debug host at once
    out = run(core, [e.submit(10, "a-debug", "lab/a", gpus=8, min_runtime_s=600)])
    assert _started(out)["a-debug"].nodes == DEBUG_HOST  # type: ignore[attr-defined]
    [gone] = of(out, ev.WorkloadPreempted)
    assert gone.workload_id == "fill" and gone.preempted_by == "a-debug"  # type: ignore[attr-defined]
    assert "first debug run in the fair-share order that fits the debug partition" in _reason(out, "a-debug")
    assert "b-batch" in core.waiting()
    # 08:25 the debug run ends: the debug host frees, b's batch run still waits, the fill soaks it again
    out = run(core, [e.complete(25, "a-debug")])
    assert _started(out)["fill"].nodes == DEBUG_HOST  # type: ignore[attr-defined]
    assert "b-batch" in core.waiting() and "b-batch" not in _started(out)
    # 08:30 a debug run 16 GPUs wide (two hosts) is no debug run: it waits with the rest
    out = run(core, [e.submit(30, "a-wide-debug", "lab/a", gpus=16, min_runtime_s=600)])
    assert "a-wide-debug" in core.waiting() and not of(out, ev.WorkloadPreempted)


def test_a_run_wider_than_the_hosts_outside_the_partition_is_held_the_debug_host_too() -> None:
    e = Events()
    core = DecisionCore(Knobs(debug_hosts=1), "lab")
    run(core, [*_cluster(e), e.submit(0, "fill", "lab/b", gpus=8, min_runtime_s=0)])
    # the whole cluster: three hosts outside the partition cannot seat it, so its hold takes the debug host
    out = run(core, [e.submit(1, "whole", "lab/a", gpus=32, min_runtime_s=3600)])
    out += core.advance(ev.to_us(at(1)))
    [hold] = [d for d in of(out, ev.SchedulingDecision) if d.action == "hold"]  # type: ignore[attr-defined]
    assert set(hold.nodes) == {"lab-n000", "lab-n001", "lab-n002", "lab-n003"}  # type: ignore[attr-defined]
    assert len(_started(out)["whole"].nodes) == 4  # type: ignore[attr-defined]
    assert [p.workload_id for p in of(out, ev.WorkloadPreempted)] == ["fill"]  # type: ignore[attr-defined]


def test_the_partition_follows_the_cluster_size_and_never_takes_every_host() -> None:
    e = Events()
    core = DecisionCore(Knobs(debug_hosts=2), "lab")
    run(core, [*_cluster(e, gpus=16)])  # two hosts: one stays outside the partition
    assert core.hosts.lane_hosts == [1]
    run(core, [e.capacity(1, 48)])  # six hosts: the last two
    assert core.hosts.lane_hosts == [4, 5]
    out = run(core, [e.submit(2, "b-batch", "lab/b", gpus=8, min_runtime_s=3600)])
    assert _started(out)["b-batch"].nodes == ("lab-n000",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("hosts", "partition"), [(4, 0), (16, 0), (17, 1), (32, 1), (128, 4), (1024, 31)])
def test_by_default_the_partition_is_three_percent_of_the_live_hosts(hosts: int, partition: int) -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_cluster(e, gpus=8 * hosts)])
    assert core.hosts.lane_hosts == list(range(hosts - partition, hosts))
    assert debug_partition_size(None, hosts) == partition


def test_the_default_partition_follows_the_live_hosts_and_zero_turns_it_off() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_cluster(e, gpus=1024)])  # 128 hosts: the last 4
    assert core.hosts.lane_hosts == [124, 125, 126, 127]
    run(core, [e.capacity(1, 512)])  # 64 hosts: the last 2 (1.92, to the nearest host)
    assert core.hosts.lane_hosts == [62, 63]
    run(core, [e.capacity(2, 96)])  # 12 hosts: none
    assert core.hosts.lane_hosts == []
    off = DecisionCore(Knobs(debug_hosts=0), "lab")
    run(off, [*_cluster(Events(), gpus=1024)])
    assert off.hosts.lane_hosts == []


def test_the_knob_is_labelled_and_checked() -> None:
    assert "debug-hosts=2" in Knobs(debug_hosts=2).label()
    assert "debug-hosts=0" in Knobs(debug_hosts=0).label()
    assert "debug" not in Knobs().label()  # the default: 3 % of the hosts
    with pytest.raises(ConfigError, match="debug_hosts = -1"):
        Knobs(debug_hosts=-1)


@pytest.mark.parametrize(("flag", "knob"), [(None, None), ("auto", None), ("AUTO", None), ("0", 0), ("4", 4)])
def test_the_flag_takes_a_number_of_hosts_or_auto(flag: str | None, knob: int | None) -> None:
    assert knobs_from_args(_flags(flag)).debug_hosts == knob


@pytest.mark.parametrize("flag", ["-1", "3%", "two"])
def test_a_flag_that_is_no_number_of_hosts_is_refused_with_its_value(flag: str) -> None:
    with pytest.raises(ConfigError, match=f"--debug-hosts '{flag}': expected a whole number of hosts"):
        knobs_from_args(_flags(flag))


def _flags(debug_hosts: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_knob_arguments(parser)
    return parser.parse_args([] if debug_hosts is None else [f"--debug-hosts={debug_hosts}"])
