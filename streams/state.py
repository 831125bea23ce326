"""One cluster's worker state and its checkpoint bytes (what the ``clusters`` changelog table holds).

A checkpoint is the decision core's snapshot plus everything needed to resume exactly where it
stopped: the input partition and the last input offset it reflects, the decisions-topic offset
after the last output it emitted, the event ids already applied (idempotency), and the occupancy
projection. Format: ``GLCK1`` + u32 length + zlib(JSON header) + zlib(core snapshot).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ledger.core import DecisionCore, Knobs
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
        """Serialise the state (deterministic: same state, same bytes)."""
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
        return CHECKPOINT_MAGIC + _LEN.pack(len(head)) + head + zlib.compress(self.core.snapshot(), 3)

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
