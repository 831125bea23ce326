"""The replay driver: a simulated clock that jumps from one moment that matters to the next.

The moments are the next input (a submission, an allocation or host change), the next simulated
fact of a running workload (its next checkpoint or its completion), and the decision core's own
``next_wakeup()`` (a protected window ending, a grace period running out). The clock never ticks:
nothing can change between two of those moments, so nothing is computed there.

Order at one instant: every fact of instant t (simulated checkpoints and completions first, then
trace inputs, each group in the order it was scheduled) is applied before the core's wake-ups at t
and before the one scheduling pass of t (``handle(..., decide=False)`` then ``advance(t)``): a
workload that completes at the very instant its protected window ends has completed, and is never
preempted at that instant. The inputs, known in advance, are one list sorted once (by time, then
the order they were fed); only the simulated facts, a few per running workload, are kept in a heap,
and the two are merged as they are taken: a heap of the whole month's inputs (100,000 entries)
cost seventeen levels of comparisons at every push and pop.

A replay always ends: at ``until_us`` when given, else once nothing is left to happen, with a
safety stop ``LIMIT_AFTER_LAST_INPUT_S`` past the last input and the time the smallest capacity fed
needs to run all the work submitted (Σ GPUs × (work + restart) ÷ GPUs: a backlog of months is
replayed to its end), and at ``LAST_US`` (the end of 2099: no event can be told later). When it
stops at a limit with work left, or runs out of things to happen while some work still waits (work
that can never start), ``ReplayStats.unfinished`` names each unfinished workload and how often it
was preempted.

Execution is simulated from the submission's hints: a started workload pays ``restart_s`` on every
attempt after its first, then writes a checkpoint every ``checkpoint_interval_s`` of productive time
and completes once ``work_s`` of productive work is done. A preemption cancels what was pending; a
resumable workload resumes from its last checkpoint (0 if it never wrote one).
"""

from __future__ import annotations

import heapq
import time as wallclock
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, cast

from ledger.errors import LedgerError
from ledger.events import (
    LATEST,
    CheckpointWritten,
    ClusterCapacityChanged,
    Event,
    WorkloadCompleted,
    WorkloadStarted,
    WorkloadSubmitted,
    from_us,
    to_us,
    trusted,
)

_US = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHECKPOINT, _COMPLETE = 0, 1
LIMIT_AFTER_LAST_INPUT_S = 90 * 86_400  # safety margin past the work's own span: the rules' progress bound ends
# replays long before
LAST_US = to_us(LATEST) - 1  # the last instant an event can carry (times lie before 2100): the clock stops there


class Core(Protocol):
    """What the driver needs from ``ledger.core.DecisionCore``."""

    def handle(self, event: Event, decide: bool = True, t_us: int | None = None) -> list[Event]: ...
    def advance(self, until_us: int) -> list[Event]: ...
    def next_wakeup(self) -> int | None: ...


@dataclass(slots=True)
class _Execution:
    """What the simulator knows of one workload: its hints and how far it has got."""

    workload_id: str
    gpus: int
    work_s: int
    interval_s: int
    restart_s: int
    resumable: bool
    progress_s: int = 0  # productive seconds saved by the last checkpoint
    starts: int = 0
    generation: int = 0  # bumped on every start and stop; pending entries of older generations are void
    checkpoints: int = 0  # checkpoints written so far (for their ids)
    attempt_origin_us: int = 0  # the moment this attempt's productive work began, minus progress_s at start
    running: bool = False
    done: bool = False
    counted_done: bool = False


@dataclass
class ReplayStats:
    """Counts and times of one replay."""

    events: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    moments: int = 0  # clock jumps: distinct steps of the loop
    first_us: int | None = None
    last_us: int | None = None
    wall_s: float = 0.0
    demand_gpu_us: int = 0  # ∫ GPUs of workloads submitted and not yet finished (waiting or running) dt
    stopped_at: int | None = None  # µs: the limit the replay stopped at with work left (None: it ran out)
    # workload -> preemptions: the work left when stopped at a limit, or when nothing was left to happen
    # while some work still waited (work that could never start)
    unfinished: dict[str, int] = field(default_factory=dict)
    not_submitted: int = 0  # workloads whose submission lies after the limit, when stopped at one
    # (from, µs; hosts): the debug partition's size whenever it changed, when sized from demand (``lanes``)
    debug_partition: list[tuple[int, int]] = field(default_factory=list)

    def demand_ratio(self, capacity_gpus: int) -> float:
        """Return mean demand (GPUs waiting or running) over capacity across the simulated span."""
        span = (self.last_us or 0) - (self.first_us or 0)
        return self.demand_gpu_us / (capacity_gpus * span) if span > 0 and capacity_gpus else 0.0

    @property
    def simulated_s(self) -> float:
        """Return the simulated span in seconds."""
        return 0.0 if self.first_us is None or self.last_us is None else (self.last_us - self.first_us) / _US


Progress = Callable[[int, int, int], None]  # (first_us, now_us, last_input_us)
Sink = Callable[[list[Event]], object]  # takes each batch of events, in order


class BatchWriter(Protocol):
    """A sink that is told which events of a batch came from outside (fed inputs) and which were made here."""

    def write(self, events: list[Event], outside: list[int]) -> object:
        """Take one batch in order; ``outside`` lists the positions of the fed inputs in it."""
        ...


class ReplayDriver:
    """Feed inputs and simulated execution facts to a decision core in time order; collect every event."""

    def __init__(self, core: Core, cluster: str, sink: Sink | BatchWriter, *, batch: int = 20_000):
        self.core = core
        self.cluster = cluster
        # A BatchWriter (``ledger.replay.logwriter.LogWriter``) learns which events came from outside,
        # so that only those are validated again; a plain sink just takes the events.
        write: Callable[[list[Event], list[int]], object] | None = getattr(sink, "write", None)
        if write is None:
            plain = cast(Sink, sink)
            write = lambda events, _outside: plain(events)  # noqa: E731
        self._write = write
        self._batch = batch
        self._out: list[Event] = []
        self._counts: dict[type[Event], int] = {}  # events emitted, by class
        self._outside: list[int] = []  # positions in _out of events fed from outside
        # simulated facts: (time µs, seq, kind, workload id, generation); the seq keeps the order they were scheduled
        self._heap: list[tuple[int, int, int, str, int]] = []
        self._inputs: list[tuple[int, int, Event]] = []  # (time µs, seq, event): sorted by run() once fed
        self._next_input = 0  # index in _inputs of the next input to apply
        self._unsorted = False  # inputs were fed since _inputs was last sorted
        self._seq = 0
        self._runs: dict[str, _Execution] = {}
        self._preempted: dict[str, int] = {}  # preemptions per workload
        self._last_input_us = 0
        self._gpu_work_s = 0  # Σ GPUs × (work + restart) of the submissions fed
        self._least_gpus = 0  # the smallest capacity fed (0: none yet)
        self._active_gpus = 0
        self._time_obj: object = None  # the last event time converted, and its microseconds
        self._time_us = 0
        self._clock: tuple[int, datetime] | None = None  # the last simulated instant and its datetime
        self.stats = ReplayStats()

    # -- inputs ---------------------------------------------------------------------------------
    def feed(self, events: Iterable[Event]) -> None:
        """Queue input events (setup, submissions, allocation and host changes) for the replay."""
        for event in events:
            t = to_us(event.time)
            if isinstance(event, WorkloadSubmitted):
                if event.work_s is None:
                    raise LedgerError(f"{event.workload_id}: the submission carries no work_s hint to simulate")
                self._runs[event.workload_id] = _Execution(
                    event.workload_id,
                    event.gpus,
                    event.work_s,
                    event.checkpoint_interval_s or 0,
                    event.restart_s or 0,
                    event.resumable,
                )
                self._gpu_work_s += event.gpus * (event.work_s + (event.restart_s or 0))
            elif isinstance(event, ClusterCapacityChanged) and event.gpus > 0:
                self._least_gpus = event.gpus if not self._least_gpus else min(self._least_gpus, event.gpus)
            self._seq += 1
            self._inputs.append((t, self._seq, event))
            self._last_input_us = max(self._last_input_us, t)
        self._unsorted = True

    def _push(self, t: int, kind: int, wid: str, gen: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, wid, gen))

    # -- the loop -------------------------------------------------------------------------------
    def run(self, *, progress: Progress | None = None, until_us: int | None = None) -> ReplayStats:
        """Run until nothing is left to happen (or ``until_us``); return the stats."""
        started = wallclock.perf_counter()
        heap, core = self._heap, self.core
        if self._unsorted:
            # (time, seq) is unique: the sort never compares events, and keeps the fed order within an instant
            self._inputs = sorted(self._inputs[self._next_input :])
            self._next_input, self._unsorted = 0, False
        inputs, i = self._inputs, self._next_input
        n_inputs = len(inputs)
        if self.stats.first_us is None and (heap or i < n_inputs):
            self.stats.first_us = min(heap[0][0] if heap else LAST_US, inputs[i][0] if i < n_inputs else LAST_US)
        next_report = 0.0
        limit = until_us
        if limit is None and self._last_input_us:
            # the work's own span at full use of the cluster, then the margin: only a replay that stops
            # progressing reaches it
            span_s = -(-self._gpu_work_s // self._least_gpus) if self._least_gpus else 0
            limit = self._last_input_us + (LIMIT_AFTER_LAST_INPUT_S + span_s) * _US
        limit = LAST_US if limit is None else min(limit, LAST_US)
        stopped: int | None = None
        while True:
            wake = core.next_wakeup()
            # the next fact: the earlier of the next simulated one and the next input (the simulated one at a tie)
            t_next = heap[0][0] if heap else None
            if i < n_inputs and (t_next is None or inputs[i][0] < t_next):
                t_next = inputs[i][0]
            if wake is not None and (t_next is None or wake < t_next):
                if limit is not None and wake > limit:
                    stopped = limit
                    break
                self.stats.moments += 1
                self._absorb(core.advance(wake))
                after = core.next_wakeup()
                if after is not None and after <= wake:
                    raise LedgerError(f"decision core asked to wake at {from_us(wake)} again after advancing to it")
                now = wake
            elif t_next is not None:
                if limit is not None and t_next > limit:
                    stopped = limit
                    break
                now = t_next
                self.stats.moments += 1
                # every fact of this instant first (simulated ones before inputs, each in the order they were
                # scheduled or fed), then its wake-ups and one scheduling pass
                while True:
                    if heap and (i >= n_inputs or heap[0][0] <= inputs[i][0]):
                        if heap[0][0] != now:
                            break
                        _t, _seq, kind, wid, gen = heapq.heappop(heap)
                        run = self._runs[wid]
                        if gen != run.generation:
                            continue  # cancelled by a preemption
                        fact = self._checkpoint(run, now) if kind == _CHECKPOINT else self._complete(run, now)
                        self._emit(fact)
                        outputs = core.handle(fact, False, now)
                    elif i < n_inputs and inputs[i][0] == now:
                        event = inputs[i][2]
                        i += 1
                        self._next_input = i
                        self._outside.append(len(self._out))  # its position once emitted
                        self._time_obj, self._time_us = event.time, now  # converted when fed
                        self._emit(event)
                        outputs = core.handle(event, False, now)
                    else:
                        break
                    if outputs:  # most facts decide nothing: no call for an empty list
                        self._absorb(outputs)
                outputs = core.advance(now)
                if outputs:
                    self._absorb(outputs)
            else:
                break
            if progress is not None and self.stats.moments % 512 == 0:
                elapsed = wallclock.perf_counter() - started
                if elapsed >= next_report:
                    next_report = elapsed + 0.2
                    progress(self.stats.first_us or now, now, self._last_input_us)
        if stopped is not None:
            # a submission still queued lies past the limit: that workload was never submitted, not left unfinished
            later = {e.workload_id for _t, _seq, e in inputs[i:] if isinstance(e, WorkloadSubmitted)}
            left = {
                wid: self._preempted.get(wid, 0) for wid, run in self._runs.items() if not run.done and wid not in later
            }
            if left or later:
                self.stats.stopped_at = stopped
                self.stats.unfinished = left
                self.stats.not_submitted = len(later)
        else:
            # nothing is left to happen: work still waiting now can never start (say, wider than the
            # cluster has become), and the replay must not pass for one whose work was all done
            preempted = self._preempted
            self.stats.unfinished = {wid: preempted.get(wid, 0) for wid, run in self._runs.items() if not run.done}
        self._flush()
        self.stats.by_type = {cls.__name__: n for cls, n in self._counts.items()}
        self.stats.wall_s = wallclock.perf_counter() - started
        return self.stats

    # -- simulated execution --------------------------------------------------------------------
    def _checkpoint(self, run: _Execution, now: int) -> CheckpointWritten:
        run.progress_s += run.interval_s
        run.checkpoints += 1
        self._schedule_next(run)
        return trusted(
            CheckpointWritten,
            {
                "event_id": f"{self.cluster}/{run.workload_id}/ckpt{run.checkpoints}",
                "cluster": self.cluster,
                "time": self._at(now),
                "schema_version": 1,
                "workload_id": run.workload_id,
                "progress_s": run.progress_s,
            },
        )

    def _complete(self, run: _Execution, now: int) -> WorkloadCompleted:
        run.running, run.done = False, True
        run.generation += 1
        return trusted(
            WorkloadCompleted,
            {
                "event_id": f"{self.cluster}/{run.workload_id}/done",
                "cluster": self.cluster,
                "time": self._at(now),
                "schema_version": 1,
                "workload_id": run.workload_id,
                "outcome": "succeeded",
            },
        )

    def _at(self, now: int) -> datetime:
        """Return ``now`` as a datetime, converted once per simulated instant."""
        clock = self._clock
        if clock is None or clock[0] != now:
            clock = self._clock = (now, _EPOCH + timedelta(0, 0, now))  # == from_us(now); positional: cheaper
            self._time_obj, self._time_us = clock[1], now  # what _emit would convert it back to
        return clock[1]

    def _schedule_next(self, run: _Execution) -> None:
        # The next thing this attempt will do: its next checkpoint, or its completion.
        if run.interval_s and run.progress_s + run.interval_s < run.work_s:
            t = run.attempt_origin_us + (run.progress_s + run.interval_s) * _US
            self._push(t, _CHECKPOINT, run.workload_id, run.generation)
        else:
            t = run.attempt_origin_us + run.work_s * _US
            self._push(t, _COMPLETE, run.workload_id, run.generation)

    def _started(self, event: WorkloadStarted, t: int) -> None:
        run = self._runs.get(event.workload_id)
        if run is None or run.done:
            return
        run.starts += 1
        run.generation += 1
        run.running = True
        if not run.resumable:
            run.progress_s = 0
        restart = run.restart_s if run.starts > 1 else 0
        # origin + progress = when productive work resumes, so every later moment is origin + progress
        run.attempt_origin_us = t + restart * _US - run.progress_s * _US
        self._schedule_next(run)

    def _stopped(self, workload_id: str, *, final: bool) -> None:
        run = self._runs.get(workload_id)
        if run is None:
            return
        run.generation += 1
        run.running = False
        run.done = run.done or final

    # -- output ---------------------------------------------------------------------------------
    def _absorb(self, outputs: Sequence[Event]) -> None:
        emit = self._emit
        for event in outputs:
            emit(event)
            name = type(event).__name__  # exact types: the core emits no subclasses
            if name == "WorkloadStarted":
                self._started(event, self._time_us)  # type: ignore[arg-type]  # its time, as _emit converted it
            elif name == "WorkloadPreempted":
                wid = event.workload_id  # type: ignore[attr-defined]
                self._preempted[wid] = self._preempted.get(wid, 0) + 1
                self._stopped(wid, final=False)
            elif name == "WorkloadCompleted":
                self._stopped(event.workload_id, final=True)  # type: ignore[attr-defined]

    def _emit(self, event: Event) -> None:
        # O(1) per event. The core's outputs of one instant share one datetime object, so its
        # microseconds are converted once per instant (an identity check, not a conversion).
        stats = self.stats
        stats.events += 1
        cls = type(event)
        counts = self._counts  # by class; stats.by_type gets the names when run() returns
        counts[cls] = counts.get(cls, 0) + 1
        when = event.time
        if when is self._time_obj:
            t = self._time_us
        else:
            t = self._time_us = to_us(when)
            self._time_obj = when
        last = stats.last_us
        if last is None or t > last:
            if last is not None:
                stats.demand_gpu_us += self._active_gpus * (t - last)
            else:
                stats.first_us = stats.first_us if stats.first_us is not None else t
            stats.last_us = t
        if cls is WorkloadSubmitted:
            self._active_gpus += event.gpus  # type: ignore[attr-defined]
        elif cls is WorkloadCompleted:
            run = self._runs.get(event.workload_id)  # type: ignore[attr-defined]
            if run is not None and not run.counted_done:
                run.counted_done = True
                self._active_gpus -= run.gpus
        out = self._out
        out.append(event)
        if len(out) >= self._batch:
            self._flush()

    def _flush(self) -> None:
        if self._out:
            self._write(self._out, self._outside)
            self._out = []
            self._outside = []


__all__ = ["BatchWriter", "Core", "Progress", "ReplayDriver", "ReplayStats", "Sink"]
