"""The wake-ups the decision core schedules for itself: its heap holds (time, seq, kind, workload id, epoch).

A workload's wake-up is stale (skipped) once the workload's epoch has moved on; the core's own
(``TIMED``) carry no workload.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CYCLE", "DRAIN", "EXIT", "HOLD", "PROTECT", "RECHECK", "SPARED", "START", "TIMED"]

PROTECT: Final = 0  # a protected window ends
EXIT: Final = 1  # a victim's grace period ends: it leaves
START: Final = 2  # a delayed start (after its victims' grace) is due
DRAIN: Final = 3  # a workload on a draining host has run out its protected window
CYCLE: Final = 4  # the next full preemption walk may run
SPARED: Final = 5  # a resumable run without a checkpoint is no longer spared
RECHECK: Final = 6  # a standing check (see ``progress.queue_recheck``)
HOLD: Final = 7  # a hold's time comes (see ``holds``)
TIMED: Final = (CYCLE, RECHECK, HOLD)  # the core's own wake-ups, not a workload's
