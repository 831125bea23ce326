"""What every adapter shares: the import result and summary, rejected lines, times, budget paths.

The file adapters produce checked workload histories (``ledger.adapters.history``), not event
objects: every value has been checked by the adapter's own row checks (each field parsed once,
with an error naming file, line, field and value), which is what lets the import command hand
their events to the log without a second validation pass, as Avro bytes written directly
(``ImportResult.wire``, ``EventLog.append_encoded``). ``ImportResult.records`` gives the same
events as ``(type name, record)`` pairs whose times are integer microseconds since the epoch
(UTC), and ``ImportResult.events`` as event objects, both made on demand.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from operator import itemgetter
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger import events as ev
from ledger.errors import ConfigError, InputError
from ledger.gcpause import paused_gc

__all__ = [
    "EARLIEST_US",
    "INT_MAX",
    "LATEST_US",
    "LONG_MAX",
    "UTF8_BOM",
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
    """The events one file stands for, and the account of how they were read.

    The file adapters add checked ``History`` objects (``add_history``), not records: the records
    (``records``) and their Avro bytes for the log (``wire``) are both made from them on first
    use, so an import into the log never builds a dict per event. Events added whole
    (``add_event``, the Kueue adapter) are kept as records and come after those of histories.
    """

    kind: str
    file: str
    rows_read: int = 0
    workloads: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    histories: list[tuple[Any, str, str]] = field(default_factory=list)
    """(History, cluster, source) in the order they were read; each already checked against the schema's bounds."""
    batches: list[Any] = field(default_factory=list)
    """``HistoryBatch`` objects: workloads the fast path read column-wise (see ``add_batches``)."""
    places: list[tuple[int, int]] = field(default_factory=list)
    """(line, sub) of each of ``histories`` when there are batches: where it sits among all workloads."""
    _columns: tuple[list[int], list[str], list[str], list[bytes]] | None = field(default=None, repr=False)
    _added: list[Record] = field(default_factory=list, repr=False)
    _sorted: bool = field(default=False, repr=False)
    _records: list[Record] | None = field(default=None, repr=False)
    _wire: list[Any] | None = field(default=None, repr=False)
    _wire_made: bool = field(default=False, repr=False)

    @property
    def records(self) -> list[Record]:
        """Return the (type name, record) pairs of every event, in time order once ``sort_events`` was called."""
        if self._records is None:
            from ledger.adapters.history import history_records

            out: list[Record] = []
            with paused_gc():
                for h, cluster, source in self._ordered_histories():
                    history_records(h, cluster, source, out)
            out += self._added
            if self._sorted:
                out.sort(key=_time_of)
            self._records = out
        return self._records

    def wire(self) -> list[Any] | None:
        """Return (time, type name, event_id, Avro bytes) of every event, ordered as ``records``; None if unavailable.

        The bytes are each record as a branch of the log's union, what ``EventLog.append_encoded``
        takes. None when some record cannot be written directly (text UTF-8 cannot hold, or a
        schema the direct writer does not know): the log's encoder then gets ``records`` and says why.
        """
        if not self._wire_made and self.batches:
            columns = self.wire_columns()
            self._wire = None if columns is None else list(zip(*columns, strict=True))
            self._wire_made = True
        if not self._wire_made:
            from ledger.adapters.wire import wire_items

            with paused_gc():  # many small objects, no cycles: see paused_gc
                items = wire_items(self.histories)
            if items is not None and self._added:
                extra = _encoded_records(self._added)
                items = None if extra is None else items + extra
            if items is not None and self._sorted:
                items.sort(key=itemgetter(0))  # by time alone, stable: C, no Python call per item
            self._wire, self._wire_made = items, True
        return self._wire

    def wire_columns(self) -> tuple[list[int], list[str], list[str], list[bytes]] | None:
        """Return ``wire`` as four lists (times, type names, ids, bytes); None if unavailable, as for ``wire``."""
        if self._columns is None and self.batches:
            from ledger.adapters.batch import added_columns, history_columns, merge, wire_columns

            with paused_gc():
                rows = history_columns(self.histories, self.places)
                batches = [wire_columns(b) for b in self.batches]
                extra = _encoded_records(self._added) if self._added else []
                if rows is not None and extra is not None and all(b is not None for b in batches):
                    parts = [rows, *(c for cols in batches if cols is not None for c in cols)]
                    if extra:  # after every history's events, as ``wire`` orders them
                        parts.append(added_columns(extra))
                    self._columns = merge(parts, by_time=self._sorted)
            return self._columns
        if self._columns is None:
            items = self.wire()
            if items is None:
                return None
            self._columns = (
                [t for t, _, _, _ in items],
                [name for _, name, _, _ in items],
                [eid for _, _, eid, _ in items],
                [data for *_, data in items],
            )
        return self._columns

    def _ordered_histories(self) -> list[tuple[Any, str, str]]:
        """Return every history (with cluster and source) in the order the per-row reader makes them."""
        if not self.batches:
            return self.histories
        placed = list(zip(self.places, self.histories, strict=True))
        for b in self.batches:
            for i in range(len(b)):
                h, cluster = b.history(i)
                placed.append(((int(b.line[i]), 0), (h, cluster, b.source)))
        placed.sort(key=itemgetter(0))
        return [entry for _, entry in placed]

    def add_batches(
        self, batches: list[Any], histories: list[tuple[Any, str, str]], places: list[tuple[int, int]]
    ) -> None:
        """Add workloads read column-wise and those read row by row, each row-read one at its (line, sub)."""
        self.batches += batches
        self.histories += histories
        self.places += places
        self._changed()

    def _changed(self) -> None:
        self._records, self._wire, self._wire_made, self._columns = None, None, False, None

    def add_history(self, history: Any, cluster: str, source: str) -> None:
        """Add the events of a checked history (see ``ledger.adapters.history.add_history``, which checks it)."""
        self.histories.append((history, cluster, source))
        self._changed()

    def add_histories(self, histories: list[tuple[Any, str, str]]) -> None:
        """Add the events of checked (history, cluster, source) triples, in order."""
        self.histories += histories
        self._changed()

    @property
    def events(self) -> list[ev.Event]:
        """Return the records as event objects (built anew on each call; the import itself never needs them)."""
        return [record_event(name, record) for name, record in self.records]

    def add_event(self, event: ev.Event) -> None:
        """Add an event built elsewhere, validating it fully (for adapters that do not check field by field)."""
        ev.validated(event, where=self.file)
        record = dict(event.__dict__)
        for name in _TIME_FIELDS:
            if isinstance(record.get(name), datetime):
                record[name] = ev.to_us(record[name])
        self._added.append((event.type_name, record))
        self._changed()

    def type_names(self) -> list[str]:
        """Return the type name of every event, in order."""
        columns = self.wire_columns()
        if columns is not None:
            return columns[1]
        return [name for name, _ in self.records]

    def events_by_type(self) -> Counter[str]:
        """Return how many events of each type the file yields."""
        return Counter(self.type_names())

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
        self._sorted = True
        self._changed()

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


def _time_of(item: Record) -> int:
    time: int = item[1]["time"]
    return time


def _encoded_records(records: list[Record]) -> list[Any] | None:
    """Return (time, type name, event_id, bytes) of records encoded by the log's compiled encoder; None if one fails."""
    from ledger.codec import union_schema
    from ledger.log.avro_encode import union_encoder
    from ledger.log.checks import FULL_NAMES

    encoder = union_encoder(union_schema())  # type: ignore[arg-type]  # the log's schema is a union (a list)
    try:
        return [(r["time"], name, r["event_id"], encoder.encode(FULL_NAMES[name], r)) for name, r in records]
    except ValueError:  # UnencodableValue: the log's own append names the value
        return None


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
