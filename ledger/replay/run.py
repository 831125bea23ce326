"""Replay inputs under some knobs into a run directory: ``DIR/events/`` (an embedded event log).

The log is built in a temporary directory beside ``DIR/events`` and moved into place only when the
replay finished, so a failed or interrupted replay never leaves a half-written run behind.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

from ledger.budgets import load_budgets
from ledger.core.knobs import Knobs
from ledger.errors import AllRejectedError, ConfigError, InputError, LedgerError
from ledger.events import ClusterCapacityChanged, Event, to_us
from ledger.gcpause import paused_gc
from ledger.replay.driver import BatchWriter, Progress, ReplayDriver, ReplayStats
from ledger.replay.inputs import ReplayInputs, inputs_from_budgets
from ledger.replay.trace import listed, read_trace


def on_hosts_of(inputs: ReplayInputs, per_node: int) -> ReplayInputs:
    """Return the inputs on hosts of ``per_node`` GPUs (``--gpus-per-node``); raise ConfigError if a capacity cannot be.

    The knob reshapes the cluster the inputs describe: every capacity they set is split into
    hosts of that width, which must divide it (as a budgets file's ``gpus_per_node`` must).
    """
    if per_node == inputs.gpus_per_node and all(
        e.gpus_per_node == per_node for e in (*inputs.setup, *inputs.inputs) if isinstance(e, ClusterCapacityChanged)
    ):
        return inputs

    def reshaped(events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for e in events:
            if isinstance(e, ClusterCapacityChanged):
                if e.gpus % per_node:
                    raise ConfigError(
                        f"--gpus-per-node {per_node}: the cluster's {e.gpus} GPUs are not a whole number of "
                        f"{per_node}-GPU hosts"
                    )
                e = e.model_copy(update={"gpus_per_node": per_node})
            out.append(e)
        return out

    return replace(inputs, gpus_per_node=per_node, setup=reshaped(inputs.setup), inputs=reshaped(inputs.inputs))


def load_trace(trace: str | Path, budgets_file: str | Path, *, strict: bool = False) -> ReplayInputs:
    """Read a workload trace and a budgets file into ReplayInputs (bad rows set aside, or refused)."""
    budgets = load_budgets(budgets_file)
    t = read_trace(trace, budgets.cluster, strict=strict, budgets=budgets.paths, max_gpus=budgets.gpus)
    if not t.submissions:
        if not t.rejected:
            raise InputError(f"{trace}: holds no workload (an empty trace)")
        rows = listed(t.rejected).rstrip()
        raise AllRejectedError(f"{trace}: every row was rejected ({len(t.rejected)} bad row(s)):\n{rows}")
    result = inputs_from_budgets(budgets, list(t.submissions))
    result.rejected = t.rejected
    result.source = str(trace)
    return result


def load_inputs(source: str | Path, budgets_file: str | Path | None, *, strict: bool = False) -> ReplayInputs:
    """Load a workload trace, an ITP raw trace (``ledger.replay.itp``), or an event log / run directory."""
    path = Path(source)
    if path.is_dir():
        from ledger.replay.fromlog import load_log  # the log reader is only needed for log inputs

        return load_log(path, budgets_file)
    from ledger.replay.itp import is_itp_trace, load_itp

    if is_itp_trace(path):
        return load_itp(path, budgets_file)
    if budgets_file is None:
        raise InputError(f"{source}: a workload trace needs --budgets FILE (the budget tree and cluster size)")
    return load_trace(path, budgets_file, strict=strict)


def replay(
    inputs: ReplayInputs,
    knobs: Knobs,
    out_dir: str | Path,
    *,
    progress: Progress | None = None,
    until: datetime | None = None,
    follower: Follower | None = None,
) -> ReplayStats:
    """Replay ``inputs`` under ``knobs`` and write every event, in time order, to ``out_dir/events``.

    ``follower`` is handed each batch of events the log took whole; if the log ever skips some
    (as repeats), nothing more is handed over and ``follower.whole`` is set False: what it got
    is exactly the log, or it says it is not.
    """
    from ledger.core import DecisionCore
    from ledger.log import EventLog
    from ledger.replay.logwriter import LogWriter

    inputs = on_hosts_of(inputs, knobs.gpus_per_node)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    final = out / "events"
    building = out / ".events.building"
    shutil.rmtree(building, ignore_errors=True)
    log = EventLog(building)
    core = DecisionCore(knobs, inputs.cluster)
    writer = LogWriter(log)
    driver = ReplayDriver(core, inputs.cluster, writer if follower is None else Teed(writer, follower))
    try:
        # The core makes no reference cycles as it decides (its hot paths use small classes, not
        # closures, which compiled form cycles), so the collector would only rescan the growing
        # state: paused, the full month takes ~7 % less CPU and the same memory. Feeding the inputs
        # (a record and a queue entry per submission, none in a cycle) is paused too: there the
        # collector rescanned the month's inputs again and again as the records piled up.
        with paused_gc():
            driver.feed(inputs.setup)
            driver.feed(inputs.inputs)
            stats = driver.run(progress=progress, until_us=to_us(until) if until else None)
        stats.debug_partition = list(core.debug_demand.sizes)
    except BaseException:
        log.close()
        shutil.rmtree(building, ignore_errors=True)
        raise
    log.close()
    if final.exists():
        if not (final.is_dir() and (not any(final.iterdir()) or _looks_like_log(final))):
            shutil.rmtree(building, ignore_errors=True)
            raise LedgerError(f"{final} exists and is not an event log; choose another --out")
        shutil.rmtree(final)
    building.rename(final)
    return stats


class Follower(Protocol):
    """What follows a replay's log as it is written (``ledger.queries.projection.Loader``)."""

    whole: bool

    def add_events(self, events: list[Event]) -> None:
        """Take the next batch of events the log took."""
        ...


class Teed:
    """A batch writer that writes to the log, then hands the batch to a follower while the log took all of it."""

    def __init__(self, writer: BatchWriter, follower: Follower) -> None:
        self.writer = writer
        self.follower = follower

    def write(self, events: list[Event], outside: list[int]) -> object:
        """Write one batch to the log; hand it on if the log took every event of it (and of every batch before)."""
        written = self.writer.write(events, outside)
        if self.follower.whole and written == len(events):
            self.follower.add_events(events)
        else:
            self.follower.whole = False
        return written


def _looks_like_log(path: Path) -> bool:
    # a previous replay's log: only segment files and the log's own bookkeeping, no subdirectories
    return all(p.is_file() for p in path.iterdir())


__all__ = [
    "Follower", "ReplayInputs", "Teed", "inputs_from_budgets", "load_inputs", "load_trace", "on_hosts_of", "replay",
]
