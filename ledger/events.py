"""Event models: frozen, typed, past tense; they mirror ``schemas/*.avsc`` field for field.

A test (tests/test_schemas.py) fails if a model and its Avro schema ever disagree.
Times are timezone-aware UTC datetimes at the edges; the decision core works in integer
microseconds (``to_us``/``from_us``) so GPU time is never accumulated in floats.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ledger.errors import EventValidationError

UTC = UTC
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)  # a fixed bound: validation must not read a clock
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

WorkloadKind = Literal["batch", "training", "debug", "interactive", "other"]
PreemptReason = Literal["fair_share", "host_drain", "host_failure", "user"]
Outcome = Literal["succeeded", "failed", "cancelled"]
HostState = Literal["healthy", "unhealthy", "failed"]
DecisionAction = Literal["start", "preempt", "requeue", "drain", "complete", "hold"]


def to_us(t: datetime) -> int:
    """Return a timezone-aware datetime as integer microseconds since the Unix epoch."""
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def from_us(us: int) -> datetime:
    """Return integer microseconds since the Unix epoch as a UTC datetime."""
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)


def _event_time(t: datetime) -> datetime:
    if t.tzinfo is not UTC:  # already UTC (nearly every event): astimezone would return t itself
        if t.tzinfo is None or t.utcoffset() is None:
            raise ValueError("must carry a time zone (UTC expected)")
        t = t.astimezone(UTC)
    if not EARLIEST <= t < LATEST:
        raise ValueError(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return t


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("must be a finite number")
    return x


EventTime = Annotated[datetime, AfterValidator(_event_time)]
Name = Annotated[str, Field(min_length=1)]
Path = Annotated[str, Field(min_length=1, pattern=r"^[^/\s]+(/[^/\s]+)*$")]
Share = Annotated[float, Field(ge=0.0), AfterValidator(_finite)]
# Avro "int" is 32-bit and "long" 64-bit while Python ints are unbounded, and fastavro writes an
# out-of-range "int" without complaint (other readers then fail): the bounds live in the types.
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
Int = Annotated[int, Field(ge=-(2**31), le=INT_MAX)]
Count = Annotated[int, Field(ge=0, le=INT_MAX)]
Gpus = Annotated[int, Field(ge=1, le=INT_MAX)]
Seconds = Annotated[int, Field(ge=0, le=LONG_MAX)]
# Avro decodes arrays as lists; accept them and freeze them into tuples.
Names = Annotated[tuple[Name, ...], Field(strict=False)]


class Event(BaseModel):
    """Fields every event carries; subclasses are the catalogue in ``EVENT_TYPES``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    SCHEMA_VERSION: ClassVar[int] = 1

    event_id: Name
    cluster: Name
    time: EventTime
    schema_version: Int = 1

    @property
    def type_name(self) -> str:
        """Return the Avro record name of this event."""
        return type(self).__name__


class BudgetNodeDefined(Event):
    SCHEMA_VERSION: ClassVar[int] = 2
    schema_version: Int = 2

    path: Path
    parent: Path | None = None
    share: Share
    managers: Names = ()
    set_by: Name
    level: Name | None = None
    team_level: Name | None = None


class AllocationChanged(Event):
    path: Path
    share: Share
    set_by: Name


class AllocationRefused(Event):
    path: Path
    share: Share
    set_by: Name
    refused_event_id: Name
    reason: str


class WorkloadSubmitted(Event):
    SCHEMA_VERSION: ClassVar[int] = 2
    schema_version: Int = 2

    workload_id: Name
    budget: Path
    user: Name
    gpus: Gpus
    nodes: Count = 0
    min_runtime_s: Seconds
    resumable: bool
    priority: Int = 0
    kind: WorkloadKind = "batch"
    work_s: Seconds | None = None
    checkpoint_interval_s: Seconds | None = None
    restart_s: Seconds | None = None


class WorkloadStarted(Event):
    workload_id: Name
    nodes: Annotated[Names, Field(min_length=1)]
    gpus: Gpus
    allocated: bool
    protected_until: EventTime
    attempt: Annotated[int, Field(ge=1, le=INT_MAX)] = 1


class CheckpointWritten(Event):
    workload_id: Name
    progress_s: Seconds


class WorkloadPreempted(Event):
    workload_id: Name
    reason: PreemptReason
    preempted_by: Name | None = None


class WorkloadRequeued(Event):
    workload_id: Name


class WorkloadCompleted(Event):
    workload_id: Name
    outcome: Outcome


class HostHealthChanged(Event):
    host: Name
    state: HostState
    reason: str | None = None


class ClusterCapacityChanged(Event):
    gpus: Count
    gpus_per_node: Gpus = 8


class SchedulingDecision(Event):
    SCHEMA_VERSION: ClassVar[int] = 2
    schema_version: Int = 2

    action: DecisionAction
    workload_id: Name
    nodes: Names = ()
    reason: str
    for_workload: Name | None = None
    budget_ratio: Annotated[float, AfterValidator(_finite)] | None = None
    queue_position: Annotated[int, Field(ge=1, le=INT_MAX)] | None = None
    effective_time: EventTime


EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        BudgetNodeDefined,
        AllocationChanged,
        AllocationRefused,
        WorkloadSubmitted,
        WorkloadStarted,
        CheckpointWritten,
        WorkloadPreempted,
        WorkloadRequeued,
        WorkloadCompleted,
        HostHealthChanged,
        ClusterCapacityChanged,
        SchedulingDecision,
    )
}


def parse_event(type_name: str, data: dict[str, Any], *, where: str | None = None) -> Event:
    """Validate ``data`` as an event of ``type_name``; raise EventValidationError naming field and value."""
    cls = EVENT_TYPES.get(type_name)
    if cls is None:
        raise EventValidationError(f"unknown event type {type_name!r}", field="type", value=type_name, where=where)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, type_name, where) from None


def _explain(exc: ValidationError, type_name: str, where: str | None) -> EventValidationError:
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err["loc"]) or type_name
    value = err.get("input")
    extra = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    shown = "missing" if err["type"] == "missing" else f"value {value!r}"
    return EventValidationError(
        f"{type_name}.{field}: {err['msg']}; {shown}{extra}", field=field, value=value, where=where
    )


E = TypeVar("E", bound=Event)


@cache
def _defaults(cls: type[Event]) -> dict[str, Any]:
    return {name: f.default for name, f in cls.model_fields.items() if not f.is_required()}


@cache
def _all_fields(cls: type[Event]) -> tuple[int, set[str]]:
    # one set shared by every complete event of a class: events are frozen, so nothing adds to it
    # (pydantic's copies copy it first)
    return len(cls.__pydantic_fields__), set(cls.__pydantic_fields__)


_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__  # the slots' own setters
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[E], values: dict[str, Any]) -> E:
    """Build an event from values already known to be valid, without re-validating them.

    For hot paths only (the core's outputs, the replay's simulated facts, records read back from
    our own log), where validation would cost as much as the work itself. It is what
    ``model_construct`` does, defaults filled in, minus its per-field Python loop; a complete
    ``values`` dict becomes the event's ``__dict__`` as it is. Tests re-validate such events with
    ``validated``, and the log validates every event again before writing it.
    """
    # Why not ``cls.model_construct(**values)``, the supported way: it loops over the fields in
    # Python and costs 3.2x as much per event (CheckpointWritten: 7.2 vs 23.1 µs on a loaded machine,
    # same __dict__ and fields set), and a replayed month builds ~730,000 events this way, where
    # this function is already ~3 % of the month. The slots set here are those model_construct sets
    # (pydantic 2.x; tests/test_schemas.py compares the two on every event type).
    count, every = _all_fields(cls)
    if len(values) == count:
        data, given = values, every
    else:
        data, given = {**_defaults(cls), **values}, set(values)
    event = object.__new__(cls)
    _set_dict(event, "__dict__", data)
    _set_fields_set(event, given)
    _set_extra(event, None)
    _set_private(event, None)
    return event


def validated(event: Event, *, where: str | None = None) -> Event:
    """Re-validate an event built elsewhere (e.g. with ``model_construct``); return it unchanged if valid."""
    return parse_event(event.type_name, dict(event.__dict__), where=where)


__all__ = [
    "EVENT_TYPES",
    "AllocationChanged",
    "AllocationRefused",
    "BudgetNodeDefined",
    "CheckpointWritten",
    "ClusterCapacityChanged",
    "Event",
    "HostHealthChanged",
    "SchedulingDecision",
    "WorkloadCompleted",
    "WorkloadPreempted",
    "WorkloadRequeued",
    "WorkloadStarted",
    "WorkloadSubmitted",
    "from_us",
    "parse_event",
    "to_us",
    "trusted",
    "validated",
]
