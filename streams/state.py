"""One cluster's worker state and its checkpoint bytes (what the ``clusters`` changelog table holds).

A checkpoint is the decision core's snapshot plus everything needed to resume exactly where it
stopped: the input partition and the last input offset it reflects, the decisions-topic offset
after the last output it emitted, the event ids already applied (idempotency), and the occupancy
projection. Format: ``GLCK1`` + u32 length + zlib(JSON header) + zlib(core snapshot).
"""

from __future__ import annotations

import json
import pickle
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ledger.core import DecisionCore, Knobs
from ledger.core.scheduler import SNAPSHOT_MAGIC
from ledger.errors import LedgerError
from streams.occupancy import OccupancyProjection

__all__ = ["CHECKPOINT_MAGIC", "ClusterState"]

CHECKPOINT_MAGIC = b"GLCK1"
_LEN = struct.Struct("<I")


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
    seen: set[str] = field(default_factory=set)  # event ids applied (inputs are idempotent by event_id)
    suppress: set[str] = field(default_factory=set)  # output ids already on the decisions topic (after a restart)

    @classmethod
    def new(cls, cluster: str, knobs: Knobs, partition: int) -> ClusterState:
        """Return the empty state of a cluster first seen on ``partition``."""
        return cls(cluster, DecisionCore(knobs, cluster), OccupancyProjection(knobs.window_s), partition)

    def to_bytes(self) -> bytes:
        """Serialise the state (restorable; not byte-normalised: see ``_core_snapshot``)."""
        header: dict[str, Any] = {
            "cluster": self.cluster,
            "partition": self.partition,
            "offset": self.offset,
            "decisions_next": self.decisions_next,
            "last_event_us": self.last_event_us,
            "seen": sorted(self.seen),
            "occupancy": self.occupancy.to_dict(),
        }
        head = zlib.compress(json.dumps(header, sort_keys=True, separators=(",", ":")).encode(), 3)
        return CHECKPOINT_MAGIC + _LEN.pack(len(head)) + head + zlib.compress(_core_snapshot(self.core), 1)

    @classmethod
    def from_bytes(cls, data: bytes) -> ClusterState:
        """Rebuild a state from ``to_bytes`` output; raise LedgerError if the bytes are not a checkpoint."""
        if not data.startswith(CHECKPOINT_MAGIC):
            raise LedgerError("not a worker checkpoint: bad header")
        at = len(CHECKPOINT_MAGIC)
        (n,) = _LEN.unpack_from(data, at)
        at += _LEN.size
        header = json.loads(zlib.decompress(data[at : at + n]))
        core = DecisionCore.restore(zlib.decompress(data[at + n :]))
        return cls(
            cluster=header["cluster"],
            core=core,
            occupancy=OccupancyProjection.from_dict(header["occupancy"]),
            partition=header["partition"],
            offset=header["offset"],
            decisions_next=header["decisions_next"],
            last_event_us=header["last_event_us"],
            seen=set(header["seen"]),
        )


def _core_snapshot(core: DecisionCore) -> bytes:
    """Return a snapshot ``DecisionCore.restore`` reads, in one pickling pass.

    ``DecisionCore.snapshot()`` pickles three times so that equal states give equal bytes; a checkpoint
    only has to restore, and the worker holds its event loop while it serialises, so it skips that
    normalisation (measured on a 5,000-workload cluster: 0.29 s -> about a third).
    """
    return SNAPSHOT_MAGIC + pickle.dumps(core.__dict__, protocol=5)
