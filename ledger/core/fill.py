"""Free fill started on a room apart: the debug partition, or hosts held for a wide run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ledger.core.contract import Workload
from ledger.core.fairshare import Pick
from ledger.core.placement import Fits
from ledger.events import Event

if TYPE_CHECKING:
    from ledger.core.scheduler import DecisionCore

__all__ = ["fill_into"]


def fill_into(
    core: DecisionCore, t: int, out: list[Event], fitting: Callable[[], Fits],
    choose: Callable[[int], list[int] | None], words: Callable[[DecisionCore, Workload, Pick, list[int], int], str],
) -> None:
    """Start free fill, in the order's fill tiers, on a room apart (``fitting``: what fits, ``choose``: where)."""
    order = core.order
    nothing = Fits(core.hosts.per_node, 0, 0)  # no allocated work starts here
    while True:
        fits = fitting()
        if not fits.most:
            return
        pick = order.next_start(t, nothing, False, fits)
        if pick is None:
            return
        w = core.workloads[pick.key[2]]
        chosen = choose(w.size)
        assert chosen is not None
        core._start(w, chosen, t, pick.position, out, words(core, w, pick, chosen, t))
