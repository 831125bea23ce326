"""Turn an event log (embedded log, run directory, or a Kafka dump in the embedded format) into replay inputs.

What is replayed: the facts from outside the scheduler — cluster capacity, the budget tree and its
allocation changes, host health changes, and every submission. What is recomputed: every decision,
start, checkpoint, preemption, requeue and completion.

Submissions that carry the hints (``work_s``, ``checkpoint_interval_s``, ``restart_s``) keep them.
For the others the hints are derived from what the log saw happen to that workload:

- ``checkpoint_interval_s``: the median step between successive ``progress_s`` values of its
  checkpoints (the first step counted from 0); 0 when it never checkpointed.
- ``restart_s``: over the attempts after the first that wrote a checkpoint, the median of (time
  from the start to that checkpoint) minus (progress it added since the checkpoint it resumed
  from); 0 when no such attempt exists.
- ``work_s``: for a workload that completed (whatever the outcome), the progress it resumed from
  at its last start (0 if not resumable or never checkpointed) plus the time from that start to
  the completion, less ``restart_s`` when that start was not its first. A workload still running
  when the log ends gets the most it was seen to achieve by then (so the replay runs it at least
  that long); one that never started gets its minimum runtime (one hour when that is 0).

With a budgets file the tree, capacity and cluster name are the file's: submissions and host health
changes move to its cluster (a host named after the log's cluster, ``lab-n001``, is renamed after
the file's, ``lab2-n001``).

A submission wider than the cluster ever is (the log's largest capacity, or the budgets file's) could
never start: it is set aside as a rejected row naming the log and its place in it (``LOG:N``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ledger.budgets import load_budgets
from ledger.errors import AllRejectedError, InputError
from ledger.events import (
    AllocationChanged,
    BudgetNodeDefined,
    CheckpointWritten,
    ClusterCapacityChanged,
    Event,
    HostHealthChanged,
    WorkloadCompleted,
    WorkloadPreempted,
    WorkloadStarted,
    WorkloadSubmitted,
    to_us,
)
from ledger.replay.inputs import ReplayInputs
from ledger.replay.trace import RejectedRow, listed

_US = 1_000_000
_INPUT_TYPES = (AllocationChanged, HostHealthChanged)


@dataclass
class _Seen:
    starts: list[int] = field(default_factory=list)
    checkpoints: list[tuple[int, int]] = field(default_factory=list)  # (time_us, progress_s)
    stops: list[int] = field(default_factory=list)
    completed: int | None = None


def _median(values: list[int]) -> int:
    return int(statistics.median(values)) if values else 0


def derive_hints(sub: WorkloadSubmitted, seen: _Seen, log_end_us: int) -> tuple[int, int, int]:
    """Return (work_s, checkpoint_interval_s, restart_s) for a submission, derived by the module's rules."""
    ckpts = sorted(seen.checkpoints)
    progress = [p for _, p in ckpts]
    steps = [b - a for a, b in zip([0, *progress], progress, strict=False) if b > a]
    interval = sub.checkpoint_interval_s if sub.checkpoint_interval_s is not None else _median(steps)
    starts = sorted(seen.starts)
    bounds = [*starts[1:], log_end_us + 1]

    def resumed_from(start: int) -> int:
        before = [p for t, p in ckpts if t <= start]
        return max(before) if before and sub.resumable else 0

    if sub.restart_s is not None:
        restart = sub.restart_s
    else:
        samples = []
        for start, nxt in zip(starts[1:], bounds[1:], strict=False):
            after = [(t, p) for t, p in ckpts if start < t < nxt]
            if after:
                t, p = after[0]
                samples.append(max(0, (t - start) // _US - (p - resumed_from(start))))
        restart = _median(samples)
    if sub.work_s is not None:
        work = sub.work_s
    elif not starts:
        work = sub.min_runtime_s or 3600
    else:
        last = starts[-1]
        paid = restart if len(starts) > 1 else 0
        base = resumed_from(last)
        if seen.completed is not None and seen.completed >= last:
            work = base + max(0, (seen.completed - last) // _US - paid)
        else:
            end = min([t for t in seen.stops if t >= last], default=log_end_us)
            work = max(max(progress, default=0), base + max(0, (end - last) // _US - paid))
    return max(work, 1), interval, restart


def _moved(event: HostHealthChanged, old: str | None, cluster: str) -> HostHealthChanged:
    """Return a host change of the log's cluster ``old`` as one of ``cluster``, its host renamed the same way."""
    if event.cluster == cluster:
        return event
    host = event.host
    if old is not None and host.startswith(f"{old}-n"):
        host = f"{cluster}-n{host[len(old) + 2:]}"
    return event.model_copy(update={"cluster": cluster, "host": host})


def load_log(source: str | Path, budgets_file: str | Path | None = None) -> ReplayInputs:
    """Read a log or run directory into ReplayInputs; a budgets file, if given, replaces the log's tree."""
    from ledger.log import open_log

    log = open_log(source)
    setup: list[Event] = []
    inputs: list[Event] = []
    subs: list[WorkloadSubmitted] = []
    where: dict[str, int] = {}  # event id of a submission -> its place in the log (1-based), to name it
    seen: dict[str, _Seen] = defaultdict(_Seen)
    cluster, gpus, per_node = None, 0, 8
    last = 0
    for place, event in enumerate(log, start=1):
        t = to_us(event.time)
        last = max(last, t)
        cluster = cluster or event.cluster
        if isinstance(event, ClusterCapacityChanged):
            if not setup and not inputs:
                gpus, per_node = event.gpus, event.gpus_per_node
                setup.append(event)
            else:
                inputs.append(event)
        elif isinstance(event, BudgetNodeDefined):
            (setup if not subs else inputs).append(event)
        elif isinstance(event, _INPUT_TYPES):
            inputs.append(event)
        elif isinstance(event, WorkloadSubmitted):
            subs.append(event)
            where[event.event_id] = place
        elif isinstance(event, WorkloadStarted):
            seen[event.workload_id].starts.append(t)
        elif isinstance(event, CheckpointWritten):
            seen[event.workload_id].checkpoints.append((t, event.progress_s))
        elif isinstance(event, WorkloadPreempted):
            seen[event.workload_id].stops.append(t)
        elif isinstance(event, WorkloadCompleted):
            seen[event.workload_id].completed = t
    if not subs:
        raise InputError(f"{source}: the log holds no WorkloadSubmitted events to replay")
    derived = 0
    for i, sub in enumerate(subs):
        if sub.work_s is None or sub.checkpoint_interval_s is None or sub.restart_s is None:
            work, interval, restart = derive_hints(sub, seen[sub.workload_id], last)
            subs[i] = sub.model_copy(update={"work_s": work, "checkpoint_interval_s": interval, "restart_s": restart})
            derived += 1
    notes = [f"{derived} of {len(subs)} submissions had their work, checkpoint and restart hints derived from the log"]
    if budgets_file is not None:
        budgets = load_budgets(budgets_file)
        first = min(s.time for s in subs)
        setup = list(budgets.events(first))
        replaced = BudgetNodeDefined | AllocationChanged | ClusterCapacityChanged
        inputs = [e for e in inputs if not isinstance(e, replaced)]
        old = cluster
        cluster, gpus, per_node = budgets.cluster, budgets.gpus, budgets.gpus_per_node
        subs = [s.model_copy(update={"cluster": cluster}) for s in subs] if subs[0].cluster != cluster else subs
        # host changes move to the file's cluster too, a host named as the log's cluster names its hosts
        # ("lab-n001") renamed as the replayed cluster names the same host ("lab2-n001")
        inputs = [_moved(e, old, cluster) if isinstance(e, HostHealthChanged) else e for e in inputs]
        notes.append(f"budget tree and capacity from {budgets_file}, not from the log")
    elif not gpus:
        raise InputError(f"{source}: the log has no ClusterCapacityChanged event; pass --budgets FILE")
    # as for a trace row: a workload wider than the cluster ever is could never start (on another
    # cluster's budgets file, or after the log's cluster shrank); it is set aside, named, not left to wait
    most = max([gpus, *(e.gpus for e in inputs if isinstance(e, ClusterCapacityChanged))])
    rejected = [
        RejectedRow(str(source), where[s.event_id], "gpus", s.gpus,
                    f"the cluster has only {most} GPUs, so {s.workload_id} could never start")
        for s in subs if s.gpus > most
    ]
    if rejected:
        subs = [s for s in subs if s.gpus <= most]
        if not subs:
            rows = listed(rejected).rstrip()
            raise AllRejectedError(f"{source}: every submission was set aside ({len(rejected)}):\n{rows}")
    all_inputs: list[Event] = [*inputs, *subs]
    all_inputs.sort(key=lambda e: e.time)
    assert cluster is not None
    return ReplayInputs(cluster, gpus, per_node, setup, all_inputs, rejected, str(source), notes)


__all__ = ["derive_hints", "load_log"]
