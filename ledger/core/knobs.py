"""Policy knobs shared by the decision core, the replay driver and the CLI."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from ledger.errors import ConfigError

Policy = Literal["fairshare", "priority", "fifo"]
Charge = Literal["upfront", "accrued"]
Strategy = Literal["final-share", "instant"]
STRATEGIES: tuple[Strategy, ...] = ("final-share", "instant")
POLICIES: tuple[Policy, ...] = ("fairshare", "priority", "fifo")
CHARGES: tuple[Charge, ...] = ("upfront", "accrued")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> int:
    """Return whole seconds for '90', '90s', '15m', '8h', '7d' or '1w'; raise ConfigError otherwise."""
    m = _DURATION.match(str(text))
    if not m:
        raise ConfigError(f"duration {text!r}: expected a number with an optional unit s, m, h, d or w (e.g. 8h, 7d)")
    seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds != int(seconds):
        raise ConfigError(f"duration {text!r} is not a whole number of seconds")
    return int(seconds)


@lru_cache(maxsize=4096)  # every start's reason spells its protected window: the same few values recur
def format_duration(seconds: int) -> str:
    """Return the shortest exact spelling of a duration, e.g. 28800 -> '8h'."""
    for unit in ("w", "d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


MAX_PREEMPTIONS = 1  # the default bound on preemptions for fair share before a workload settles
FILL_HEADROOM = 0.03  # the default share of the capacity kept free of new fill while allocated work runs or waits
# A debug run: allocated work protected at most this long (its minimum runtime, capped) on at most one host.
# The audit's debug bucket (queries/wait_by_size.sql) counts the same minimum runtimes, 1 s to 15 min.
DEBUG_RUNTIME_S = 15 * 60
@dataclass(frozen=True)
class Knobs:
    """Every setting a what-if replay can change; the defaults are the published design's."""

    policy: Policy = "fairshare"
    window_s: int = 7 * 86_400
    half_life_s: int | None = None  # when set, exponential decay replaces the sliding window
    max_min_runtime_s: int = 8 * 3600
    charge: Charge = "upfront"
    gpus_per_node: int = 8
    grace_s: int = 0  # a preemption's exit (and the waiter's start) is delayed this long
    # 0 (default): every event, and every protected window ending, is acted on at that instant.
    # A positive cycle runs the full preemption walk at most once per cycle (as a batch
    # scheduler's cycle); a new allocated submission is still tried at once.
    preempt_cycle_s: int = 0
    # When past-protection allocated work may be preempted for a waiter (see ``ledger.core.preemption``):
    # "final-share" (default): only if the waiter's branch, charged the waiter's protected runtime,
    # still ranks at or ahead of the victim's branch as charged now (the victim's side is charged
    # what it has used in the window up to this instant and nothing of the run it gives up), so two
    # budgets within a hair of each other do not trade GPUs back and forth; "instant": the literal
    # rule, as soon as the victim's branch ranks after the waiter's.
    preemption_strategy: Strategy = "final-share"
    # Progress: a workload preempted for fair share this many times is not preempted for fair share
    # again until its run writes a checkpoint (host failure and drains aside). 1 rather than 2: on
    # every measured month it cut discarded work (e.g. 18.6 % -> 11.6 % of delivered GPU-hours on a
    # month where half the batch work never checkpoints) at no cost in owed hours (docs/rules.md).
    max_preemptions: int = MAX_PREEMPTIONS
    # Progress: resumable allocated work is not preempted for fair share before its run has written a
    # checkpoint (host failure and drains aside): until then preempting it would throw away the whole
    # run, as for work that cannot resume. True restores the former rule (such a run is a victim past
    # its protected window, until ``max_preemptions``), for what-if comparisons. A run is spared so
    # for at most ``max_min_runtime_s`` from its start. On the measured months it cut discarded work
    # by 35-57 % (12.0 % -> 5.2 % of delivered GPU-hours on the month where half the batch work never
    # checkpoints) and left the demo month's log unchanged (docs/rules.md).
    preempt_uncheckpointed: bool = False
    # Standings drift with time alone: while allocated work waits and some running work could be a
    # victim, a scheduling pass runs at least this often (s) even with no event, so a swap the rules
    # allow is made within this long of becoming allowed. 0: passes only at events and wake-ups.
    standing_check_s: int = 60
    # Free fill (unallocated work) keeps its GPUs this long after it starts, doubled after every
    # preemption of the same workload, at most ``fill_protect_cap_s``: fill is not started into a
    # gap only to give it up seconds later.
    fill_protect_s: int = 0
    fill_protect_cap_s: int = 3600
    # Under fair share, free fill is not started into the last 3 % of the capacity left free while
    # allocated work runs or waits: the room the next allocated request takes (docs/rules.md).
    fill_headroom: float = FILL_HEADROOM
    # The debug partition (fair share; docs/rules.md, "Debug runs first"): the last ``debug_hosts``
    # hosts of the cluster start allocated work only if it is a debug run (protected at most
    # ``DEBUG_RUNTIME_S``, at most one host); free fill soaks them as any host. None (default): sized
    # from the debug runs submitted over the last day (``lanes.partition_hosts``); 0: no partition.
    debug_hosts: int | None = None
    # Debug runs start first, in fair-share order among them, on any room (``lanes``); False: only on the debug
    # partition, as before it (for what-if comparisons; docs/rules.md "Debug runs first").
    debug_first: bool = True

    @property
    def swap_margin(self) -> bool:
        """Return whether the final-share strategy is in force (the former swap margin)."""
        return self.preemption_strategy == "final-share"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"policy {self.policy!r}: expected one of {', '.join(POLICIES)}")
        if self.preemption_strategy not in STRATEGIES:
            raise ConfigError(
                f"preemption strategy {self.preemption_strategy!r}: expected one of {', '.join(STRATEGIES)}"
            )
        if self.charge not in CHARGES:
            raise ConfigError(f"charge {self.charge!r}: expected one of {', '.join(CHARGES)}")
        for name in (
            "window_s", "max_min_runtime_s", "gpus_per_node", "grace_s", "preempt_cycle_s", "max_preemptions",
            "fill_protect_s", "fill_protect_cap_s", "standing_check_s", "debug_hosts",
        ):
            value = getattr(self, name)
            if value is not None and value < (1 if name in ("window_s", "gpus_per_node") else 0):
                raise ConfigError(f"{name} = {value} is out of range")
        if self.max_min_runtime_s < 1:
            # the cap applies to each declared minimum runtime, and 0 makes work unallocated free fill
            raise ConfigError(
                f"max_min_runtime_s = {self.max_min_runtime_s}: the cap on the protected minimum runtime must be at "
                "least 1 s (0 would turn every workload into unallocated free fill)"
            )
        if not 0 <= self.fill_headroom < 1:
            raise ConfigError(f"fill_headroom = {self.fill_headroom} is out of range (a share of capacity, 0 to < 1)")
        if self.half_life_s is not None and self.half_life_s <= 0:
            raise ConfigError(f"half_life_s = {self.half_life_s} must be positive")

    def with_(self, **changes: object) -> Knobs:
        """Return a copy with some knobs changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def label(self) -> str:
        """Return a short human label, e.g. 'fairshare window=7d cap=8h charge=upfront'."""
        lookback = (
            f"half-life={format_duration(self.half_life_s)}"
            if self.half_life_s
            else f"window={format_duration(self.window_s)}"
        )
        text = f"{self.policy} {lookback} cap={format_duration(self.max_min_runtime_s)} charge={self.charge}"
        text += f" grace={format_duration(self.grace_s)}" if self.grace_s else ""
        text += f" cycle={format_duration(self.preempt_cycle_s)}" if self.preempt_cycle_s else ""
        text += f" max-preemptions={self.max_preemptions}" if self.max_preemptions != MAX_PREEMPTIONS else ""
        text += f" fill-headroom={self.fill_headroom * 100:g}%" if self.fill_headroom != FILL_HEADROOM else ""
        text += f" debug-hosts={self.debug_hosts}" if self.debug_hosts is not None else ""
        return text + ("" if self.preemption_strategy == "final-share" else f" {self.preemption_strategy}")
