"""One cluster's worker state and its checkpoint bytes (what the ``clusters`` changelog table holds).

A checkpoint is the decision core's snapshot plus everything needed to resume exactly where it
stopped: the input partition and the last input offset it reflects, the decisions-topic offset
after the last output it emitted, the event ids applied recently (idempotency), and the occupancy
projection. Format: ``GLCK2`` + u32 length + zlib(pickled header) + zlib(core snapshot).

Idempotency is bounded. ``seen`` holds the ids of the inputs applied whose event time lies within
``dedupe_horizon_s`` (default: the occupancy window, 7 days) of the latest input; older ids are dropped
at checkpoints. An input older than that horizon cannot be told apart from a copy of one already
applied, so the service refuses it (a dead letter) rather than risk counting it twice.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ledger.core import DecisionCore, Knobs
from ledger.core.scheduler import SNAPSHOT_MAGIC
from ledger.errors import LedgerError
from ledger.streams.occupancy import OccupancyProjection

__all__ = ["CHECKPOINT_MAGIC", "ClusterState"]

CHECKPOINT_MAGIC = b"GLCK2"
_LEN = struct.Struct("<I")
_US = 1_000_000


@dataclass
class ClusterState:
    """Decision core, occupancy projection and bookkeeping of one cluster inside a worker."""

    cluster: str
    core: DecisionCore
    occupancy: OccupancyProjection
    partition: int
    offset: int = -1  # last input offset of ``partition`` this state reflects
    decisions_next: int = 0  # decisions-topic offset (same partition) after the last output known emitted
    last_event_us: int = 0  # latest input event time applied
    seen: dict[str, int] = field(default_factory=dict)  # event id -> event time (us) of inputs applied recently
    dedupe_horizon_s: int = 7 * 86_400
    suppress: set[str] = field(default_factory=set)  # output ids already on the decisions topic (after a restart)

    @classmethod
    def new(cls, cluster: str, knobs: Knobs, partition: int) -> ClusterState:
        """Return the empty state of a cluster first seen on ``partition``."""
        return cls(
            cluster, DecisionCore(knobs, cluster), OccupancyProjection(knobs.window_s), partition,
            dedupe_horizon_s=knobs.window_s,
        )

    @property
    def dedupe_floor_us(self) -> int:
        """Return the event time before which an input's id may no longer be remembered."""
        return self.last_event_us - self.dedupe_horizon_s * _US

    def prune_seen(self) -> None:
        """Forget the ids of inputs older than the idempotency horizon."""
        floor = self.dedupe_floor_us
        if self.seen and min(self.seen.values()) < floor:
            self.seen = {eid: t for eid, t in self.seen.items() if t >= floor}

    def to_bytes(self) -> bytes:
        """Serialise the state (restorable; not byte-normalised: see ``_core_snapshot``)."""
        header: dict[str, Any] = {
            "cluster": self.cluster,
            "partition": self.partition,
            "offset": self.offset,
            "decisions_next": self.decisions_next,
            "last_event_us": self.last_event_us,
            "seen": self.seen,
            "dedupe_horizon_s": self.dedupe_horizon_s,
            "occupancy": self.occupancy.to_dict(),
        }
        # pickled, not JSON: a 5,000-workload cluster's header took ~70 ms as sorted JSON, ~7 ms pickled
        head = zlib.compress(pickle.dumps(header, protocol=5), 1)
        return CHECKPOINT_MAGIC + _LEN.pack(len(head)) + head + zlib.compress(_core_snapshot(self.core), 1)

    @staticmethod
    def partition_of(data: bytes) -> int:
        """Return the input partition a checkpoint belongs to, reading its header alone."""
        magic = data[: len(CHECKPOINT_MAGIC)]
        if magic != CHECKPOINT_MAGIC:
            raise LedgerError("not a worker checkpoint: bad header")
        at = len(CHECKPOINT_MAGIC)
        (n,) = _LEN.unpack_from(data, at)
        raw = zlib.decompress(data[at + _LEN.size : at + _LEN.size + n])
        header = pickle.loads(raw)
        partition: int = header["partition"]
        return partition

    @classmethod
    def from_bytes(cls, data: bytes) -> ClusterState:
        """Rebuild a state from ``to_bytes`` output; raise LedgerError if the bytes are not a checkpoint."""
        magic = data[: len(CHECKPOINT_MAGIC)]
        if magic != CHECKPOINT_MAGIC:
            raise LedgerError("not a worker checkpoint: bad header")
        at = len(CHECKPOINT_MAGIC)
        (n,) = _LEN.unpack_from(data, at)
        at += _LEN.size
        raw = zlib.decompress(data[at : at + n])
        header = pickle.loads(raw)  # our own changelog (trusted)
        core = DecisionCore.restore(zlib.decompress(data[at + n :]))
        return cls(
            cluster=header["cluster"],
            core=core,
            occupancy=OccupancyProjection.from_dict(header["occupancy"]),
            partition=header["partition"],
            offset=header["offset"],
            decisions_next=header["decisions_next"],
            last_event_us=header["last_event_us"],
            seen=header["seen"],
            dedupe_horizon_s=header["dedupe_horizon_s"],
        )


def _core_snapshot(core: DecisionCore) -> bytes:
    """Return a snapshot ``DecisionCore.restore`` reads, in one pickling pass.

    ``DecisionCore.snapshot()`` pickles three times so that equal states give equal bytes; a checkpoint
    only has to restore, and the worker holds its event loop while it serialises, so it skips that
    normalisation (measured on a 5,000-workload cluster: 0.29 s -> about a third).
    """
    return SNAPSHOT_MAGIC + pickle.dumps(core.state(), protocol=5)
