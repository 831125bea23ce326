"""The standing hold (the *No starvation* rule, ``holds``): hosts kept for one waiter until its room is free."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core.contract import Workload
from ledger.core.pickling import rebuilt_from_fields
from ledger.core.placement import Hosts

__all__ = ["Hold", "Holds"]


@dataclass(slots=True)
class Hold:
    """Hosts held for one waiter until ``until`` (µs), granted at ``since``."""

    wid: str
    hosts: list[int] = field(default_factory=list)
    until: int = 0
    since: int = 0
    gpus: int = 0

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)


class Holds:
    """The standing hold (one at most) and when a grant may next be looked for; ``Hosts`` marks the held hosts."""

    def __init__(self) -> None:
        self.hold: Hold | None = None  # hosts held for the head of the fair-share order
        self.retry = 0  # µs: no grant is looked for before this

    def snapshot(self) -> dict[str, object]:
        """Return the holds' state for a snapshot."""
        return {"hold": self.hold, "retry": self.retry}

    def restore(self, state: dict[str, object]) -> None:
        """Take the state ``snapshot`` returned."""
        hold, retry = state["hold"], state["retry"]
        assert (hold is None or isinstance(hold, Hold)) and isinstance(retry, int)
        self.hold, self.retry = hold, retry

    def due(self, t: int) -> bool:
        """Return whether a hold stands whose time has come by ``t``."""
        hold = self.hold
        return hold is not None and hold.until <= t

    def may_grant(self, t: int) -> bool:
        """Return whether a grant may be looked for at ``t``: no hold stands, and none was looked for in vain lately."""
        return self.hold is None and t >= self.retry

    def retry_after(self, t: int) -> None:
        """Look for a grant again no sooner than ``t`` (or the next drop)."""
        self.retry = t

    def grant(self, hold: Hold, hosts: Hosts) -> None:
        """Stand ``hold``: its hosts are out of the free room every other start sees."""
        self.hold = hold
        for i in hold.hosts:
            hosts.set_held(i, True)

    def drop(self, hosts: Hosts) -> None:
        """Drop the standing hold (if any): its hosts take any work again."""
        hold = self.hold
        if hold is None:
            return
        self.hold = None
        self.retry = 0
        for i in hold.hosts:
            hosts.set_held(i, False)

    def clip(self, w: Workload, until: int, hosts: Hosts) -> int:
        """Return ``until`` cut to the hold's time when ``w`` (not the holder) runs on a held host."""
        hold = self.hold
        if hold is None or w.wid == hold.wid or until <= hold.until:
            return until
        return hold.until if hosts.any_held(w.hosts) else until
