"""The decision service without Kafka: records in, outputs and dead letters out; the worker only moves bytes.

``process`` takes one record of ``gpuledger.events`` (bytes, partition, offset) and returns what to
do with it. ``due`` is the timer: it closes instants whose inputs have all arrived and advances each
cluster's core to wake-ups that have fallen due.

The facts of one instant. The service applies the replay's rule (DESIGN.md, "Progress"), by the
same calls into the core: each input is applied with ``handle(event, decide=False)``, which leaves
its instant's wake-ups and scheduling pass pending; the pass of instant ``t`` runs once the service
knows no more input of ``t`` will come, and that is known in one of two ways:

- an input with a later time arrives (inputs of one cluster are ordered in its partition): the
  core closes every earlier instant before it applies that input, and those outputs ride with it;
- the timer finds the cluster idle: no input for ``idle_after_s`` of wall time while none is
  waiting on the broker for its partition (``hold``). The timer then closes the instant.

The price is latency: a decision follows the next input of a later instant (under load, one gap
between inputs), or ``idle_after_s`` plus up to one timer interval when the cluster falls silent.

Determinism. The core's outputs depend only on the inputs, in partition order, and on the
instants and wake-ups it was advanced to. The timer changes nothing for a stream whose inputs
arrive in time order: it only lets an instant close, or a wake-up happen, *earlier in wall time*
when no input comes. It advances to ``w`` only when ``w <= last input time + (idle wall time -
idle_after_s) * idle_clock_rate``: after ``idle_after_s`` of silence, event time is extrapolated from
the last input at ``idle_clock_rate`` event-seconds per wall-second (1.0 live; 0: the instant of the
last input closes, no later wake-up is played). It never advances beyond the due instant itself, so
what it emits is exactly what the next input would have made the core emit first. Only an input
that arrives later than that allowance (its time is before, or at, an instant the timer already
closed) can see a different history; the core applies such a late input at its own clock, and
``late_events`` counts them.

Routing. A cluster's inputs belong on the partition its key (the cluster's name) hashes to with
the producer's default partitioner. With ``partitions`` given, a valid record on any other
partition is dead-lettered alone: it neither creates nor touches the cluster's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ledger.codec import decode
from ledger.core import Knobs
from ledger.errors import LedgerError
from ledger.events import Event, to_us
from ledger.streams.state import ClusterState
from ledger.streams.topics import key_partition

__all__ = ["DecisionService", "Outcome", "Record", "Tick"]

Kind = Literal["applied", "duplicate", "replayed", "deadletter"]
Loader = Callable[[str], bytes | None]
Record = tuple[bytes | None, bytes | None, int, int]  # value, key, partition, offset


@dataclass
class Outcome:
    """What one input record produced: outputs to emit (already-emitted ones left out) or a dead-letter reason."""

    kind: Kind
    cluster: str | None = None
    emit: list[Event] = field(default_factory=list)
    reason: str | None = None
    late: bool = False


@dataclass
class Tick:
    """Outputs a timer advance produced for one cluster."""

    cluster: str
    partition: int
    emit: list[Event]


class DecisionService:
    """Per-cluster decision cores and occupancy projections, fed record by record."""

    def __init__(
        self,
        knobs: Knobs,
        *,
        loader: Loader | None = None,
        idle_clock_rate: float = 1.0,
        idle_after_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        partitions: int | None = None,
    ):
        self.knobs = knobs
        self.partitions = partitions
        self.loader = loader
        self.idle_clock_rate = idle_clock_rate
        self.idle_after_s = idle_after_s
        self.clock = clock
        self.states: dict[str, ClusterState] = {}
        self.dirty: set[str] = set()
        self._arrival: dict[str, float] = {}  # wall (monotonic) time of each cluster's last input
        self.core_s = 0.0  # seconds spent inside the decision core (handle/advance), for the benchmark

    # -- state -------------------------------------------------------------------------------
    def state(self, cluster: str, partition: int) -> ClusterState:
        """Return a cluster's state: in memory, else from its checkpoint, else new."""
        st = self.states.get(cluster)
        if st is None:
            blob = self.loader(cluster) if self.loader else None
            st = ClusterState.from_bytes(blob) if blob else ClusterState.new(cluster, self.knobs, partition)
            self.states[cluster] = st
            self._arrival[cluster] = self.clock()
        return st

    def hold(self, partitions: set[int]) -> None:
        """Restart the idle wait of clusters whose partitions still have inputs waiting on the broker."""
        now = self.clock()
        for cluster, st in self.states.items():
            if st.partition in partitions:
                self._arrival[cluster] = now

    def forget_partitions(self, partitions: set[int]) -> None:
        """Drop in-memory states of partitions this worker no longer owns (they live on in the table)."""
        for cluster in [c for c, s in self.states.items() if s.partition in partitions]:
            del self.states[cluster]
            self.dirty.discard(cluster)

    # -- inputs ------------------------------------------------------------------------------
    def process_batch(self, records: list[Record]) -> list[Outcome]:
        """Apply records in order; return one outcome each (what ``process`` returns for it)."""
        process = self.process
        return [process(value, key, partition, offset) for value, key, partition, offset in records]

    def process(self, value: bytes | None, key: bytes | None, partition: int, offset: int) -> Outcome:
        """Apply one record; never raises for bad input (it becomes a dead letter)."""
        try:
            if value is None:
                raise LedgerError("empty record (no value)")
            event = decode(value)
        except LedgerError as exc:
            return Outcome("deadletter", reason=f"{type(exc).__name__}: {exc}")
        cluster = event.cluster
        if key is not None and key != cluster.encode():
            reason = f"key {key!r} is not the event's cluster {cluster!r}"
            return Outcome("deadletter", cluster, reason=reason)
        st = self.states.get(cluster)
        if st is None:
            home = partition if self.partitions is None else key_partition(cluster, self.partitions)
            if home != partition:  # misrouted: the cluster's inputs are read from its key's partition only
                reason = f"cluster {cluster!r} belongs on partition {home} (its key's), not {partition}"
                return Outcome("deadletter", cluster, reason=reason)
            st = self.state(cluster, partition)
        if st.partition != partition:
            return Outcome(
                "deadletter", cluster,
                reason=f"cluster {cluster!r} is processed from partition {st.partition}, not {partition}",
            )
        # a record arrived, even one the checkpoint holds: while inputs still arrive the cluster is not idle
        self._arrival[cluster] = self.clock()
        if offset <= st.offset:
            return Outcome("replayed", cluster)  # already reflected by the restored checkpoint
        st.offset = offset
        self.dirty.add(cluster)
        if event.event_id in st.seen:
            return Outcome("duplicate", cluster)
        t = to_us(event.time)
        if t < st.dedupe_floor_us:
            reason = (
                f"{event.type_name} {event.event_id}: {(st.last_event_us - t) // 1_000_000} s older than the latest "
                f"input, past the {st.dedupe_horizon_s} s idempotency horizon (it may be a copy of one applied)"
            )
            return Outcome("deadletter", cluster, reason=reason)
        core = st.core
        late = t < core.now or t <= st.closed_us  # its instant's pass already ran
        t0 = time.perf_counter()
        try:
            # the instant's pass waits for the rest of its facts; earlier instants close first (their outputs)
            outputs = core.handle(event, False, t)
        except LedgerError as exc:
            return Outcome("deadletter", cluster, reason=f"rejected by the decision core: {exc}")
        finally:
            self.core_s += time.perf_counter() - t0
        st.seen[event.event_id] = t
        if t > st.last_event_us:
            st.last_event_us = t
        occupancy = st.occupancy
        for out in outputs:  # the embedded log's order: what earlier instants caused, then this input
            occupancy.apply(out)
        occupancy.apply(event)
        return Outcome("applied", cluster, self._unsent(st, outputs) if st.suppress else outputs, late=late)

    def _unsent(self, st: ClusterState, outputs: list[Event]) -> list[Event]:
        if not st.suppress:
            return outputs
        fresh = [o for o in outputs if o.event_id not in st.suppress]
        st.suppress.difference_update(o.event_id for o in outputs)
        return fresh

    # -- the timer ---------------------------------------------------------------------------
    def horizon_us(self, cluster: str, now: float | None = None) -> int | None:
        """Return the last instant whose inputs have all arrived by the idle rule, or None while inputs may still come.

        After ``idle_after_s`` of silence the last input's instant is complete; event time then runs on
        from it at ``idle_clock_rate``.
        """
        st = self.states[cluster]
        idle = (self.clock() if now is None else now) - self._arrival.get(cluster, 0.0)
        if idle < self.idle_after_s:
            return None
        extra = (idle - self.idle_after_s) * self.idle_clock_rate if self.idle_clock_rate else 0.0
        return st.last_event_us + int(min(extra, 3e9) * 1_000_000)  # capped: ~95 years is "forever"

    def due(self, now: float | None = None, budget_s: float | None = None) -> list[Tick]:
        """Close the instants and play the wake-ups that have fallen due in every cluster; return what they emitted.

        With ``budget_s``, a cluster's wake-ups are played for at most that much wall time per call (the
        rest on the next call, in the same order): the worker's loop must not stall on a long play-out.
        """
        ticks = []
        for cluster, st in self.states.items():
            if st.last_event_us == 0:
                continue
            horizon = self.horizon_us(cluster, now)
            if horizon is None:
                continue
            core = st.core
            if not (core.pending and core.now <= horizon) and not ((w := core.next_wakeup()) is not None
                                                                   and w <= horizon):
                continue
            t0 = time.perf_counter()
            # the pending pass, then each wake-up due, instant by instant (as the replay plays them); a
            # history play-out can span years of standing checks (a queue that never drains re-arms one)
            outputs = core.advance(core.now) if core.pending and core.now <= horizon else []
            while (w := core.next_wakeup()) is not None and w <= horizon:
                outputs += core.advance(w)
                if budget_s is not None and time.perf_counter() - t0 >= budget_s:
                    break
            self.core_s += time.perf_counter() - t0
            st.closed_us = core.now
            for out in outputs:
                st.occupancy.apply(out)
            st.occupancy.advance(core.now)
            self.dirty.add(cluster)
            emitted = self._unsent(st, outputs)
            if emitted:
                ticks.append(Tick(cluster, st.partition, emitted))
        return ticks

    # -- checkpoints -------------------------------------------------------------------------
    def take_dirty(self) -> list[ClusterState]:
        """Return the states changed since the last call (to checkpoint), and mark them clean."""
        out = [self.states[c] for c in sorted(self.dirty) if c in self.states]
        self.dirty.clear()
        for st in out:
            st.prune_seen()
        return out
