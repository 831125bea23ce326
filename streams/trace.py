"""Offset trace: what the worker applied, checkpointed, acked and committed, per input partition.

With ``gpuledger worker --trace-offsets`` the worker writes one log line per event below, on the
``gpuledger.offsets`` logger, as ``offsets <kind> key=value ...``:

- ``restored``: a cluster's checkpoint loaded (``state`` = the last input offset it reflects);
- ``applied``: input offsets a batch applied to a cluster's state (ranges ``a-b,c``), and ``replayed``
  ones it skipped because the state already reflects them;
- ``dropped``: records taken from faust but not processed (a seek back is under way);
- ``checkpoint``: a checkpoint made durable (``state`` = its offset) and the input offsets then acked;
- ``commit``: an input offset faust committed to the group (the next offset to read).

``check_trace`` reads such a log back (several worker processes appended to one file) and returns
what contradicts an uninterrupted run: an input applied to no state of the chain of checkpoints, or
applied twice to it, and a committed offset beyond what the durable checkpoints reflect.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["OffsetTrace", "check_trace", "parse_ranges", "ranges"]

log = logging.getLogger("gpuledger.offsets")


def ranges(offsets: Iterable[int]) -> str:
    """Return sorted offsets as compact ranges: ``3-7,9``."""
    out: list[str] = []
    start = prev = None
    for o in sorted(offsets):
        if prev is not None and o == prev + 1:
            prev = o
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = o
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(out) or "-"


def parse_ranges(text: str) -> list[int]:
    """Return the offsets of a ``ranges`` string."""
    out: list[int] = []
    for part in text.split(","):
        if part in ("", "-"):
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


class OffsetTrace:
    """Log offsets as the worker moves them (a no-op unless enabled)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def emit(self, kind: str, **fields: object) -> None:
        """Write one trace line."""
        if self.enabled:
            log.warning("offsets %s %s", kind, " ".join(f"{k}={v}" for k, v in fields.items()))


_LINE = re.compile(r"\[(?P<pid>\d+)\] \[WARNING\] offsets (?P<kind>\w+) (?P<rest>.*?)\s*$")


def check_trace(lines: Iterable[str], *, commits: bool = True) -> list[str]:
    """Return the contradictions an offset trace shows (empty when the runs chain up like one uninterrupted run).

    The chain: each worker process resumes a cluster at the state of its last durable checkpoint (or
    from nothing) and must then apply the next offsets of the cluster's records; what it applied
    after its last durable checkpoint is lost with it and applied again by the next process.
    A cluster's records are assumed to be the only ones on its partition (as in the fault tests).
    ``commits=False`` leaves out commits past the checkpoints: faust makes those itself (it counts
    offsets it never delivered as acknowledged), and the worker copes with them when it resumes.
    """
    problems: list[str] = []
    durable: dict[str, int] = {}  # cluster -> offset of the newest durable checkpoint so far
    partition_of: dict[str, int] = {}
    expect: dict[tuple[str, str], int] = {}  # (pid, cluster) -> next offset to apply
    for line in lines:
        m = _LINE.search(line)
        if m is None:
            continue
        pid, kind = m["pid"], m["kind"]
        f = dict(kv.split("=", 1) for kv in m["rest"].split() if "=" in kv)
        if kind == "restored":
            cluster, state = f["cluster"], int(f["state"])
            # newer is possible: a checkpoint can be durable when its writer dies, before its trace line
            if state < durable.get(cluster, -1):
                problems.append(
                    f"pid {pid} cluster {cluster}: restored state at offset {state}, "
                    f"but the last durable checkpoint reflects {durable.get(cluster, -1)}"
                )
            durable[cluster] = max(durable.get(cluster, -1), state)
            expect.setdefault((pid, cluster), state + 1)
        elif kind == "applied":
            cluster = f["cluster"]
            partition_of[cluster] = int(f["partition"])
            nxt = expect.get((pid, cluster), durable.get(cluster, -1) + 1)
            for o in parse_ranges(f["offsets"]):
                if o > nxt:
                    problems.append(f"pid {pid} cluster {cluster}: offsets {ranges(range(nxt, o))} never applied")
                elif o < nxt:
                    problems.append(f"pid {pid} cluster {cluster}: offset {o} applied twice")
                nxt = max(nxt, o + 1)
            expect[(pid, cluster)] = nxt
        elif kind == "checkpoint":
            cluster = f["cluster"]
            durable[cluster] = max(durable.get(cluster, -1), int(f["state"]))
        elif kind == "commit":
            partition, offset = int(f["partition"]), int(f["offset"])
            reach = max((s for c, s in durable.items() if partition_of.get(c) == partition), default=-1)
            if commits and offset > reach + 1:
                problems.append(f"pid {pid} partition {partition}: committed {offset}, past the checkpoints' {reach}")
    return problems
