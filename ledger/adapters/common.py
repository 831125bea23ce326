"""What every adapter shares: the import result and summary, rejected lines, times, budget paths."""

from __future__ import annotations

import gc
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from operator import attrgetter
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger import events as ev
from ledger.errors import ConfigError, InputError

__all__ = [
    "ImportResult",
    "Rejection",
    "RowError",
    "budget_path",
    "check_time",
    "parse_local_time",
    "parse_zone",
    "paused_gc",
]


class RowError(ValueError):
    """One record is malformed; the adapter turns it into a ``Rejection`` naming file and line."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A malformed record: where it is and why it was refused."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ImportResult:
    """The events one file stands for, and the account of how they were read."""

    kind: str
    file: str
    events: list[ev.Event] = field(default_factory=list)
    rows_read: int = 0
    workloads: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def events_by_type(self) -> Counter[str]:
        """Return how many events of each type the file yields."""
        return Counter(type(e).__name__ for e in self.events)

    def reject(self, line: int, reason: str) -> None:
        """Record a malformed record at ``line``."""
        self.rejected.append(Rejection(self.file, line, reason))

    def raise_if_rejected(self) -> None:
        """Raise InputError listing the rejected lines (the --strict rule: the whole file is refused)."""
        if self.rejected:
            shown = "\n  ".join(str(r) for r in self.rejected[:20])
            more = f"\n  ... and {len(self.rejected) - 20} more" if len(self.rejected) > 20 else ""
            raise InputError(
                f"{self.file}: {len(self.rejected)} malformed record(s), nothing imported (--strict):\n  {shown}{more}"
            )

    def sort_events(self) -> None:
        """Order events by time; a stable sort keeps each workload's own order at equal times."""
        self.events.sort(key=_TIME)

    def render(self, max_rejected: int = 20) -> str:
        """Return the human-readable import summary."""
        lines = [
            f"{self.kind} import of {self.file}",
            f"  rows read:   {self.rows_read}",
            f"  workloads:   {self.workloads}",
            f"  events:      {len(self.events)}",
        ]
        lines += [f"    {name:<20} {n}" for name, n in sorted(self.events_by_type().items())]
        lines.append(f"  skipped:     {sum(self.skipped.values())}")
        lines += [f"    {reason:<40} {n}" for reason, n in sorted(self.skipped.items())]
        lines.append(f"  rejected:    {len(self.rejected)}")
        lines += [f"    {r}" for r in self.rejected[:max_rejected]]
        if len(self.rejected) > max_rejected:
            lines.append(f"    ... and {len(self.rejected) - max_rejected} more")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while an import builds its events.

    An import allocates a few objects per event and none of them form cycles, but the collector
    would still rescan the growing heap again and again: pausing it halves the import time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_TIME = attrgetter("time")


def parse_zone(name: str) -> tzinfo:
    """Return the time zone named by an IANA name ('UTC', 'America/Los_Angeles'); ConfigError if unknown."""
    if name.upper() in ("UTC", "Z", "GMT"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"time zone {name!r}: not an IANA zone name (e.g. UTC, America/Los_Angeles)") from None


def check_time(t: datetime, what: str) -> datetime:
    """Return ``t`` if the ledger accepts it (aware, 2000..2100); raise RowError naming ``what`` otherwise."""
    if not ev.EARLIEST <= t < ev.LATEST:
        raise RowError(f"{what} {t.isoformat()} lies outside {ev.EARLIEST:%Y}..{ev.LATEST:%Y}")
    return t


def parse_local_time(text: str, zone: tzinfo, what: str) -> datetime:
    """Parse an ISO 8601 time; one without an offset is read in ``zone``. Return it in UTC.

    A wall time that occurs twice (the autumn clock change) is read as the first of the two,
    one that never occurs (the spring gap) as if the clock had not moved: ``zoneinfo``'s fold=0.
    """
    try:
        # the common case, fast: with the offset appended fromisoformat returns an aware UTC time
        t = datetime.fromisoformat(text + "+00:00" if zone is UTC and len(text) == 19 else text)
    except ValueError:
        raise RowError(f"{what} {text!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=zone)
        if zone is not UTC:
            t = t.astimezone(UTC)
    elif t.utcoffset():
        t = t.astimezone(UTC)
    return check_time(t, what)


_UNSAFE = re.compile(r"[/\s]+")


@lru_cache(maxsize=65_536)
def budget_path(*parts: str) -> str:
    """Join parts into a budget path; '/' and whitespace inside a part become '_', an empty part 'unknown'."""
    return "/".join(_UNSAFE.sub("_", p.strip()) or "unknown" for p in parts)
