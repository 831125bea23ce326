"""Per-cluster checkpoints and per-partition marks in the compacted ``<app-id>-clusters-changelog`` topic.

Partition ``p`` of the checkpoint topic holds the checkpoints of the clusters read from partition ``p``
of the events topic (key = cluster, value = ``ClusterState`` bytes) and, written after them in the same
partition, the partition's mark (key ``\\x00mark/<p>``): the last input offset the checkpoints before it
reflect, a digest and the event id of the record at that offset, and the dead-letter offset from which
the partition's letters not yet covered may be found. A worker that is assigned ``p`` reads the partition
to its end, keeps the last value of each key, resumes at the mark's offset + 1, and first checks that
the record at the mark's offset is still the one the mark names (the resume check): a broker that lost
its log (restarted empty, topics re-created, offsets gone backwards) fails it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from streams.state import ClusterState

__all__ = ["MARK_PREFIX", "Mark", "digest", "latest_values", "mark_key", "occupancy_records"]

MARK_PREFIX = "\x00mark/"


def mark_key(partition: int) -> str:
    """Return the checkpoint-topic key of an input partition's mark."""
    return f"{MARK_PREFIX}{partition}"


def digest(value: bytes | None) -> str:
    """Return a short digest of an input record's bytes (what the resume check compares)."""
    return hashlib.blake2b(value or b"", digest_size=8).hexdigest()


@dataclass(frozen=True)
class Mark:
    """How far the durable checkpoints of one input partition reach, and the record they end on."""

    offset: int  # last input offset the partition's checkpoints reflect
    digest: str  # digest of that record's bytes
    event_id: str  # its event id ("" if it did not decode), for the operator's error message
    deadletters: int  # dead-letter offset from which this partition's later letters may be found

    def to_bytes(self) -> bytes:
        """Return the mark as JSON bytes."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Mark:
        """Read a mark written by ``to_bytes``."""
        raw = json.loads(data)
        return cls(int(raw["offset"]), str(raw["digest"]), str(raw["event_id"]), int(raw["deadletters"]))

    def check(self, found: Any, partition: int, topic: str) -> str | None:
        """Return why the record found at the mark's offset contradicts the mark, or None if it is the same."""
        if found is None:
            return (
                f"{topic}/{partition}: offset {self.offset}, the last input read (event {self.event_id or '?'}), "
                f"is no longer on the broker: its log was lost or truncated"
            )
        if digest(found.value) != self.digest:
            return (
                f"{topic}/{partition}: offset {self.offset} holds another record than the one read there "
                f"(event {self.event_id or '?'}): the topic was re-created or its offsets went backwards"
            )
        return None


def latest_values(records: list[Any]) -> tuple[dict[str, bytes], dict[int, Mark]]:
    """Return the last checkpoint of each cluster and the last mark of each partition in checkpoint records."""
    states: dict[str, bytes] = {}
    marks: dict[int, Mark] = {}
    for r in records:
        key = (r.key or b"").decode("utf-8", "replace")
        if r.value is None:
            continue
        if key.startswith(MARK_PREFIX):
            marks[int(key[len(MARK_PREFIX) :])] = Mark.from_bytes(r.value)
        else:
            states[key] = bytes(r.value)
    return states, marks


def occupancy_records(st: ClusterState) -> dict[str, bytes]:
    """Return the occupancy view of one cluster: ``cluster|path`` -> JSON of its window totals."""
    as_of = st.occupancy.now_us
    return {
        f"{st.cluster}|{path}": json.dumps(
            {"allocated_gpu_s": occ.allocated_gpu_s, "unallocated_gpu_s": occ.unallocated_gpu_s, "as_of_us": as_of}
        ).encode()
        for path, occ in st.occupancy.totals(as_of).items()
    }
