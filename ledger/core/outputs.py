"""The events the core emits: ids from a counter (``f"{cluster}/d{n}"``) and one datetime per instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.events import LATEST, Event, to_us, trusted

__all__ = ["EPOCH", "LAST_US", "Outputs"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Event times lie before 2100 (the schema's bound): a protected window or a grace period that
# would end later is told as ending at the last instant an event can hold (nothing later happens)
LAST_US = to_us(LATEST) - 1
_SCHEMA_VERSION: dict[type[Event], int] = {}  # the version each output type is written with


class Outputs:
    """The decision counter and the last instant converted to a datetime, for the events the core builds."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.n = 0  # decisions emitted: ids are f"{cluster}/d{n}"
        self.clock: tuple[int, Any] = (-1, None)  # last (µs, datetime) converted for outputs

    def snapshot(self) -> dict[str, object]:
        """Return the outputs' state for a snapshot."""
        return {"n": self.n, "clock": self.clock}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        n, clock = state["n"], state["clock"]
        assert isinstance(n, int) and isinstance(clock, tuple)
        self.n, self.clock = n, clock

    def seen(self, t: int, when: datetime) -> None:
        """Take an input's own datetime (equal to a conversion of ``t``) for the outputs of its instant."""
        self.clock = (t, when)

    def at(self, t: int) -> Any:
        """Return ``t`` as a datetime; the outputs of one instant share one conversion (and one object)."""
        clock = self.clock
        if clock[0] != t:
            clock = self.clock = (t, EPOCH + timedelta(0, 0, t))  # == from_us(t); positional: cheaper
        return clock[1]

    def new(self, cls: type[Event], t: int, fields: dict[str, Any]) -> Any:
        """Return a new output event of ``cls`` at ``t`` with the next id and every other field given."""
        self.n += 1
        when = self.at(t)
        eid = f"{self.cluster}/d{self.n}"
        version = _SCHEMA_VERSION.get(cls)
        if version is None:
            version = _SCHEMA_VERSION[cls] = cls.model_fields["schema_version"].default
        # every field given: ``trusted`` takes the dict as it is (no defaults merged in)
        return trusted(
            cls, {"event_id": eid, "cluster": self.cluster, "time": when, "schema_version": version, **fields}
        )
