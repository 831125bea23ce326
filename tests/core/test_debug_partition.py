"""Debug runs first: the debug partition's day, and the partition sized from the debug runs' demand.

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
from ledger.core.lanes import RESIZE_S, partition_hosts
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


def _debug_day(e: Events, core: DecisionCore, runs: int, gpus: int, start: float = 1.0) -> None:
    """Submit ``runs`` debug runs of ``gpus`` GPUs, each protected 15 min, spread over a day from ``start``."""
    every = 24 * 60 / runs
    run(core, [e.submit(start + k * every, f"d{start:g}-{k}", "lab/a", gpus=gpus, min_runtime_s=900)
               for k in range(runs)])


def test_with_no_debug_run_in_the_last_day_there_is_no_partition() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_cluster(e, gpus=1024), e.submit(1, "batch", "lab/b", gpus=8, min_runtime_s=3600)])
    assert core.hosts.lane_hosts == []


def test_the_partition_holds_the_gpus_the_last_days_debug_runs_kept_busy_rounded_up_to_hosts() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_cluster(e, gpus=1024)])  # 128 hosts
    # 192 debug runs of 8 GPUs protected 15 min over a day: 192 x 8 x 900 GPU-s / 86,400 s = 16 GPUs busy
    _debug_day(e, core, 192, 8)
    run(core, [e.submit(24 * 60 + 30, "later", "lab/b", gpus=1, min_runtime_s=3600)])  # a pass sizes it again
    assert len(core.hosts.lane_hosts) == 2 and core.hosts.lane_hosts[-1] == 127
    assert [size for _, size in core.debug_demand.sizes][-1] == 2


def test_the_partition_follows_the_demand_at_most_every_ten_minutes_and_its_hosts_keep_their_work() -> None:
    e = Events()
    core = DecisionCore(Knobs(), "lab")
    run(core, [*_cluster(e, gpus=128)])  # 16 hosts, sized at 08:00 from no demand: none
    # twelve 8-GPU debug runs, each protected 15 min: 12 x 8 x 900 GPU-s, one GPU busy over a day
    out = run(core, [e.submit(1, f"d{k}", "lab/a", gpus=8, min_runtime_s=900) for k in range(12)])
    assert core.hosts.lane_hosts == [] and len(_started(out)) == 12
    # ten minutes on, a pass sizes it: one host, the last; the debug run there runs on
    run(core, [e.complete(5, "d11"), e.submit(6, "fill", "lab/b", gpus=8, min_runtime_s=0)])
    out = run(core, [e.submit(RESIZE_S / 60 + 1, "b-batch", "lab/b", gpus=8, min_runtime_s=3600)])
    assert core.hosts.lane_hosts == [15] and not of(out, ev.WorkloadPreempted)
    assert core.running()["b-batch"] != ("lab-n015",)  # a batch run is no debug run: never on the partition
    # a day and a sizing interval after the debug runs, no other came: the host leaves the partition
    out = run(core, [e.submit(24 * 60 + RESIZE_S / 60 + 2, "batch", "lab/b", gpus=8, min_runtime_s=3600)])
    assert core.hosts.lane_hosts == [] and not of(out, ev.WorkloadPreempted)
    assert [size for _, size in core.debug_demand.sizes] == [1, 0]


@pytest.mark.parametrize(("mean_gpus", "live", "hosts"), [(0.0, 128, 0), (0.1, 128, 1), (1.0, 128, 1), (8.0, 128, 1),
                                                         (8.5, 128, 2),
                                                         (100.0, 128, 13), (400.0, 128, 32), (5.0, 3, 0)])
def test_partition_hosts_round_the_mean_up_to_whole_hosts_and_take_at_most_a_quarter(
    mean_gpus: float, live: int, hosts: int
) -> None:
    assert partition_hosts(mean_gpus, 8, live) == hosts


def test_a_fixed_number_of_hosts_is_kept_whatever_the_demand_and_zero_turns_it_off() -> None:
    e = Events()
    fixed = DecisionCore(Knobs(debug_hosts=3), "lab")
    run(fixed, [*_cluster(e, gpus=1024)])
    assert fixed.hosts.lane_hosts == [125, 126, 127]
    off = DecisionCore(Knobs(debug_hosts=0), "lab")
    e = Events()
    run(off, [*_cluster(e, gpus=1024)])
    _debug_day(e, off, 96, 8)
    assert off.hosts.lane_hosts == []


def test_a_debug_run_starts_before_the_fair_share_order_on_any_free_room() -> None:
    e = Events()
    core = DecisionCore(Knobs(debug_hosts=0), "lab")
    run(core, [*_cluster(e), e.submit(0, "a-train", "lab/a", gpus=16, min_runtime_s=4 * 3600)])
    # b has used nothing and waits with a one-host batch run; a's debug run arrives in the same instant
    out = run(core, [e.submit(1, "b-batch", "lab/b", gpus=8, min_runtime_s=3600, priority=0),
                     e.submit(1, "a-debug", "lab/a", gpus=8, min_runtime_s=600)])
    started = _started(out)
    assert "b-batch" in started and "a-debug" in started  # two free hosts: both start
    out = run(core, [e.submit(2, "b-batch2", "lab/b", gpus=8, min_runtime_s=3600),
                     e.submit(2, "a-debug2", "lab/a", gpus=8, min_runtime_s=600)])
    assert not of(out, ev.WorkloadStarted)
    # a host frees: b stands first in the order, yet a's debug run takes it
    out = run(core, [e.complete(20, "a-debug")])
    assert list(_started(out)) == ["a-debug2"]
    assert "debug runs start before other work" in _reason(out, "a-debug2")
    assert core.fair_share_order(ev.to_us(at(20)))[1:] == ["lab/b", "lab/a"]


def test_without_debug_first_the_order_serves_the_freed_host() -> None:
    e = Events()
    core = DecisionCore(Knobs(debug_hosts=0, debug_first=False), "lab")
    run(core, [*_cluster(e), e.submit(0, "a-train", "lab/a", gpus=16, min_runtime_s=4 * 3600),
               e.submit(1, "b-batch", "lab/b", gpus=8, min_runtime_s=3600),
               e.submit(1, "a-debug", "lab/a", gpus=8, min_runtime_s=600),
               e.submit(2, "b-batch2", "lab/b", gpus=8, min_runtime_s=3600),
               e.submit(2, "a-debug2", "lab/a", gpus=8, min_runtime_s=600)])
    out = run(core, [e.complete(20, "a-debug")])
    assert list(_started(out)) == ["b-batch2"]


def test_the_knob_is_labelled_and_checked() -> None:
    assert "debug-hosts=2" in Knobs(debug_hosts=2).label()
    assert "debug-hosts=0" in Knobs(debug_hosts=0).label()
    assert "debug" not in Knobs().label()  # the default: sized from the debug runs' demand
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
