"""Per-cluster checkpoints and per-partition marks in the compacted ``<app-id>-clusters-changelog`` topic.

Partition ``p`` of the checkpoint topic holds the checkpoints of the clusters read from partition ``p``
of the events topic (key = cluster, value = ``ClusterState`` bytes) and, written after them in the same
partition, the partition's mark (key ``\\x00mark/<p>``): the last input offset the checkpoints reflect, a
digest and the event id of the record at that offset, the dead-letter offset from which the partition's
letters not yet covered may be found, and the checkpoint-topic offset of each of the partition's
clusters' latest checkpoint. A worker that is assigned ``p`` reads the partition's last mark (the tail
of the partition) and the checkpoints it names, not the whole partition: compaction never touches a
topic's active segment (up to a week or a gigabyte by default), and reading thousands of superseded
checkpoints took seconds. It resumes at the mark's offset + 1 once the record at the mark's offset is
checked to be still the one the mark names (the resume check): a broker that lost its log (restarted
empty, topics re-created, offsets gone backwards) fails it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from ledger.errors import BrokerError
from ledger.streams.reader import PartitionReader
from ledger.streams.state import ClusterState

__all__ = ["MARK_PREFIX", "Mark", "digest", "last_mark", "latest_values", "mark_key", "occupancy_records",
           "read_states"]

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
    states: dict[str, int] | None = None  # cluster -> checkpoint-topic offset of its latest checkpoint (older: None)

    def to_bytes(self) -> bytes:
        """Return the mark as JSON bytes."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Mark:
        """Read a mark written by ``to_bytes``."""
        raw = json.loads(data)
        states = raw.get("states")
        return cls(
            int(raw["offset"]), str(raw["digest"]), str(raw["event_id"]), int(raw["deadletters"]),
            None if states is None else {str(k): int(v) for k, v in states.items()},
        )

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


async def last_mark(reader: PartitionReader, topic: str, partition: int) -> Mark | None:
    """Return the last mark of a checkpoint-topic partition, reading back from its end only as far as needed."""
    key = mark_key(partition).encode()
    latest = await reader.latest(topic, partition)
    back = 1
    while True:
        start = max(0, latest - back)
        found = [r for r in await reader.read(topic, partition, start) if r.key == key and r.value is not None]
        if found or start == 0:
            return Mark.from_bytes(found[-1].value) if found else None
        back *= 16  # a checkpoint interrupted before its mark left states after it: look further back


async def read_states(reader: PartitionReader, topic: str, partition: int, mark: Mark) -> dict[str, bytes]:
    """Return the checkpoints a mark names (cluster -> bytes); a mark of an older worker: the partition's last ones."""
    if mark.states is None:
        return latest_values(await reader.read(topic, partition, 0))[0]
    states: dict[str, bytes] = {}
    for cluster, at in sorted(mark.states.items(), key=lambda kv: kv[1]):
        found = await reader.read(topic, partition, at, at + 1)
        if not found or found[0].key != cluster.encode() or found[0].value is None:
            raise BrokerError(f"{topic}/{partition}: offset {at} does not hold the checkpoint of {cluster} "
                              f"the mark of input offset {mark.offset} names")
        states[cluster] = bytes(found[0].value)
    return states


def occupancy_records(st: ClusterState) -> dict[str, bytes]:
    """Return the occupancy view of one cluster: ``cluster|path`` -> JSON of its window totals."""
    as_of = st.occupancy.now_us
    return {
        f"{st.cluster}|{path}": json.dumps(
            {"allocated_gpu_s": occ.allocated_gpu_s, "unallocated_gpu_s": occ.unallocated_gpu_s, "as_of_us": as_of}
        ).encode()
        for path, occ in st.occupancy.totals(as_of).items()
    }
