"""What every adapter shares: the import result and summary, rejected lines, times, budget paths.

The file adapters produce checked workload histories as columns (``ledger.adapters.history``),
not event objects: every value has been checked by the adapter's own row checks (each field
parsed once, with an error naming file, line, field and value), which is what lets the import
command hand their events to the log without a second validation pass (an ``EventBatch``, which
the log appends with ``EventLog.append_batch``). An ``ImportResult`` sends the events to the
batch of its ``Destination`` as they are made, a file's chunk at a time, or keeps them:
``ImportResult.records`` gives them as ``(type name, record)`` pairs whose times are integer
microseconds since the epoch (UTC), and ``ImportResult.events`` as event objects.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from ledger import events as ev
from ledger.errors import ConfigError, InputError, LedgerError
from ledger.log.avro_columns import column_value

if TYPE_CHECKING:
    from ledger.adapters.charging import Charge
    from ledger.adapters.history import EventPart, Histories
    from ledger.log.batch import EventBatch

__all__ = [
    "EARLIEST_US",
    "INT_MAX",
    "LATEST_US",
    "LONG_MAX",
    "UTF8_BOM",
    "Destination",
    "ImportResult",
    "Record",
    "Rejection",
    "RowError",
    "WallClock",
    "budget_path",
    "check_time",
    "level_names",
    "parse_local_time",
    "parse_zone",
    "record_event",
]

Record = tuple[str, dict[str, Any]]
"""(event type name, Avro-ready record with times in integer microseconds): what adapters produce."""

EARLIEST_US = ev.to_us(ev.EARLIEST)
LATEST_US = ev.to_us(ev.LATEST)
INT_MAX = ev.INT_MAX
LONG_MAX = ev.LONG_MAX
UTF8_BOM = b"\xef\xbb\xbf"  # a byte-order mark some editors and spreadsheets write before a file's first line
_TIME_FIELDS = ("time", "protected_until", "effective_time")
_ARRAY_FIELDS = ("nodes", "managers")
_ADDED = 1 << 62  # the rank of events added whole: after every history's (``ImportResult.records``)


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
class Destination:
    """Where an import's events go as they are made.

    ``batch``: the log batch that takes them (sorted by ``section``, then time: the import command
    gives each file a section of one batch, the budget tree the first). Without one, the result
    keeps them (``keep``; ``ImportResult.records``) or only counts them (a dry run). ``charge``
    charges each workload to its node of a budget tree on the way (``ledger.adapters.charging``).
    """

    batch: EventBatch | None = None
    section: int = 0
    keep: bool = True
    charge: Charge | None = None


@dataclass
class ImportResult:
    """The events one file stands for, and the account of how they were read.

    The file adapters add checked ``Histories`` (``add_histories``), a chunk of the file at a time;
    events added whole (``add_event``: the Kueue adapter, the budget tree) are kept as records
    until ``finish``. Either way they go to the ``Destination``'s batch, or are kept here.
    """

    kind: str
    file: str
    rows_read: int = 0
    workloads: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    to: Destination = field(default_factory=Destination)
    counts: Counter[str] = field(default_factory=Counter)
    """Events by type."""
    first_us: int | None = None
    """The time of the earliest event (µs), None while there is none."""
    clusters: set[str] = field(default_factory=set)
    parts: list[EventPart] = field(default_factory=list)
    """The events made, as columns, when the destination keeps them."""
    added: list[Record] = field(default_factory=list)
    """Records of events added whole (``add_event``), validated when added, until ``finish`` hands them on."""
    handed: int = 0
    """Events added whole that ``finish`` handed on so far."""

    def add_histories(self, histories: Histories, source: str) -> None:
        """Add the events of checked histories (``ledger.adapters.history``): to the batch, or kept."""
        from ledger.adapters.history import events  # history imports this module

        if not len(histories):
            return
        if self.to.charge is not None:
            histories.budget = self.to.charge.budgets(source, histories.budget, histories.workload_id, histories.rank)
        for code in np.unique(np.asarray(histories.cluster.codes)).tolist():
            self.clusters.add(histories.cluster.values[code])
        for part in events(histories, source):
            self._take(part)

    def _take(self, part: EventPart) -> None:
        self.counts[part.type_name] += part.n
        first = int(part.keys[0].min())
        self.first_us = first if self.first_us is None else min(self.first_us, first)
        if self.to.batch is not None:
            _add_part(self.to.batch, self.to.section, part)
        elif self.to.keep:
            self.parts.append(part)

    def add_to(self, batch: EventBatch, section: int) -> None:
        """Add the events kept to ``batch`` as its section ``section`` (as the import command's files go as read)."""
        self.finish()
        for part in self.parts:
            _add_part(batch, section, part)

    def add_event(self, event: ev.Event) -> None:
        """Add an event built elsewhere, validating it fully (for adapters that do not check field by field)."""
        ev.validated(event, where=self.file)
        record = dict(event.__dict__)
        for name in _TIME_FIELDS:
            if isinstance(record.get(name), datetime):
                record[name] = ev.to_us(record[name])
        self.added.append((event.type_name, record))

    def finish(self) -> None:
        """Hand the events added whole to the destination (charged to the tree first, when it charges)."""
        from ledger.adapters.history import EventPart

        added, self.added = self.added, []
        if self.to.charge is not None:
            added = self.to.charge.records(self.kind, added)
        by_type: dict[str, list[int]] = {}
        for k, (name, record) in enumerate(added):
            by_type.setdefault(name, []).append(k)
            self.clusters.add(str(record["cluster"]))
        start, self.handed = self.handed, self.handed + len(added)
        for name, rows in by_type.items():
            records = [added[k][1] for k in rows]
            columns = {f: _objects([r[f] for r in records]) for f in records[0]}
            times = np.array([r["time"] for r in records], np.int64)
            rank = _ADDED + start + np.array(rows, np.int64)  # after every history's events, as added
            self._take(EventPart(name, columns, len(rows), (times, rank, np.zeros(len(rows), np.int64))))

    @property
    def records(self) -> list[Record]:
        """Return the (type name, record) pairs of every event kept, in time order (a workload's in its order)."""
        if self.to.batch is not None or not self.to.keep:
            raise LedgerError(f"{self.file}: the import's events went to {'the log' if self.to.batch else 'no one'}")
        self.finish()
        keyed: list[tuple[tuple[int, int, int], Record]] = []
        for part in self.parts:
            names = list(part.columns)
            keys = zip(*(k.tolist() for k in part.keys), strict=True)
            for row, key in enumerate(keys):
                values = {f: column_value(part.columns[f], row) for f in names}
                keyed.append((key, (part.type_name, values)))
        keyed.sort(key=_key)
        return [r for _, r in keyed]

    @property
    def events(self) -> list[ev.Event]:
        """Return the records as event objects (built anew on each call; the import itself never needs them)."""
        return [record_event(name, record) for name, record in self.records]

    def events_by_type(self) -> Counter[str]:
        """Return how many events of each type the file yields."""
        counts = self.counts.copy()
        counts.update(name for name, _ in self.added)
        return +counts

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

    def render(self, max_rejected: int = 20) -> str:
        """Return the human-readable import summary."""
        lines = [
            f"{self.kind} import of {self.file}",
            f"  rows read:   {self.rows_read}",
            f"  workloads:   {self.workloads}",
        ]
        counts = self.events_by_type()
        lines.append(f"  events:      {sum(counts.values())}")
        lines += [f"    {name:<20} {n}" for name, n in sorted(counts.items())]
        lines.append(f"  skipped:     {sum(self.skipped.values())}")
        lines += [f"    {reason:<40} {n}" for reason, n in sorted(self.skipped.items())]
        lines.append(f"  rejected:    {len(self.rejected)}")
        lines += [f"    {r}" for r in self.rejected[:max_rejected]]
        if len(self.rejected) > max_rejected:
            lines.append(f"    ... and {len(self.rejected) - max_rejected} more")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _add_part(batch: EventBatch, section: int, part: EventPart) -> None:
    """Add events to an import's batch, sorted by section and time, then the workload's rank and story.

    The section and the time make one key: the ledger's times span less than 2**52 µs.
    """
    time, rank, story = part.keys
    if part.n and (int(time.min()) < EARLIEST_US or int(time.max()) >= LATEST_US):
        raise ValueError("an event time outside the ledger's range reached an import batch")
    batch.add(part.type_name, part.columns, part.n, ((section << 52) + (time - EARLIEST_US), rank, story))


def _objects(values: list[Any]) -> Any:
    """Return values as a column of Python objects (written value by value by the log's field encoders)."""
    out = np.empty(len(values), dtype=object)
    for k, value in enumerate(values):  # one by one: a tuple must stay one value, not become a row of a matrix
        out[k] = value
    return out


def _key(item: tuple[tuple[int, int, int], Record]) -> tuple[int, int, int]:
    return item[0]


def record_event(name: str, record: dict[str, Any]) -> ev.Event:
    """Build the event a record stands for (times back to UTC datetimes, arrays to tuples); no validation."""
    data = dict(record)
    for key in _TIME_FIELDS:
        value = data.get(key)
        if isinstance(value, int):
            data[key] = ev.from_us(value)
    for key in _ARRAY_FIELDS:
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    return ev.trusted(ev.EVENT_TYPES[name], data)


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
    try:
        if t.tzinfo is None:
            t = t.replace(tzinfo=zone)
            if zone is not UTC:
                t = t.astimezone(UTC)
        elif t.utcoffset():
            t = t.astimezone(UTC)
    except OverflowError:  # a wall time in year 1 or 9999 whose UTC instant falls outside datetime's range
        raise RowError(f"{what} {text!r} lies outside {ev.EARLIEST:%Y}..{ev.LATEST:%Y}") from None
    return check_time(t, what)


_UNSAFE = re.compile(r"[/\s]+")


@lru_cache(maxsize=65_536)
def budget_path(*parts: str) -> str:
    """Join parts into a budget path; '/' and whitespace inside a part become '_', an empty part 'unknown'."""
    return "/".join(_UNSAFE.sub("_", p.strip()) or "unknown" for p in parts)


def level_names(kinds: list[set[str]], inner: str, leaf: str) -> tuple[str, ...]:
    """Return names for a tree's levels from the kinds of node at each depth, root first.

    ``inner`` nodes (Slurm accounts, Kueue cohorts) stand above ``leaf`` ones (users, ClusterQueues):
    a depth of inner nodes only is ``inner``, then ``<inner>2``, ``<inner>3``...; of leaves only,
    ``leaf``; of both (a ragged tree), ``<inner name>-or-<leaf>``.
    """
    out: list[str] = []
    k = 0  # inner depths named so far
    for here in kinds:
        inner_name = inner if k == 0 else f"{inner}{k + 1}"
        if here == {leaf}:
            out.append(leaf)
            continue
        out.append(inner_name if here == {inner} else f"{inner_name}-or-{leaf}")
        k += 1
    return tuple(out)


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


def _timedelta_us(d: timedelta) -> int:
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


class WallClock:
    """Read times as integer microseconds since the Unix epoch (UTC); a time without an offset is read in ``zone``.

    The common form, ``YYYY-MM-DD HH:MM:SS`` or ``YYYY-MM-DDTHH:MM:SS`` (sacct, Philly and most
    exports), costs two dictionary look-ups and an addition: the day and the time of day are each
    parsed (and checked) once and remembered, and a zone's offset is remembered per wall-clock
    minute (no zone changes its offset inside a minute). Every other form goes through
    ``parse_local_time``. Wall times are read as ``parse_local_time`` reads them (fold=0).
    """

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self._utc = zone is UTC
        self._days: dict[str, int] = {}
        self._clock: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        self.us = self._reader()

    def _reader(self) -> Callable[[str, str], int]:
        """Return ``us``: a closure over the caches, called a few times per row (no attribute look-ups on the way)."""
        days, tods, offsets, utc, zone = self._days, self._clock, self._offsets, self._utc, self.zone
        learn, offset_of, earliest, latest = self._learn, self._offset, EARLIEST_US, LATEST_US

        def us(text: str, what: str) -> int:
            """Return ``text`` as µs since the epoch; RowError naming ``what`` and the value if it is no time."""
            if len(text) == 19 and (text[10] == "T" or text[10] == " "):
                day = days.get(text[:10])
                tod = tods.get(text[11:])
                if day is None or tod is None:
                    return learn(text, what)
                t = day + tod
                if not utc:
                    offset = offsets.get(text[:16])
                    t -= offset_of(text) if offset is None else offset
                if not earliest <= t < latest:
                    parse_local_time(text, zone, what)  # raises the error naming the instant in UTC
                return t
            return ev.to_us(parse_local_time(text, zone, what))

        return us

    def _learn(self, text: str, what: str) -> int:
        """Parse a time whose day or time of day is new, remember both parts, and return it."""
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            raise RowError(f"{what} {text!r} is not an ISO 8601 time") from None
        if t.tzinfo is None:
            self._days[text[:10]] = (t.toordinal() - _EPOCH_ORDINAL) * _DAY_US
            self._clock[text[11:]] = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
            return self.us(text, what)  # both parts are known now
        return ev.to_us(parse_local_time(text, self.zone, what))

    def _offset(self, text: str) -> int:
        wall = datetime.fromisoformat(text[:16].replace(" ", "T", 1))
        delta = wall.replace(tzinfo=self.zone).utcoffset()
        offset = _timedelta_us(delta) if delta is not None else 0
        self._offsets[text[:16]] = offset
        return offset
