"""Policy knobs shared by the decision core, the replay driver and the CLI."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from ledger.errors import ConfigError

Policy = Literal["fairshare", "priority", "fifo"]
Charge = Literal["upfront", "accrued"]
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


def format_duration(seconds: int) -> str:
    """Return the shortest exact spelling of a duration, e.g. 28800 -> '8h'."""
    for unit in ("w", "d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


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
    # Anti-thrash margin (opt-in): an allocated victim past its protection is preempted only if
    # the waiter's branch, charged the waiter's protected runtime, would still rank ahead of the
    # victim's. Off by default: the rule is that work keeps running while its allocation ranks
    # ahead of what waits; churn is otherwise bounded by the protected window of each new start.
    swap_margin: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"policy {self.policy!r}: expected one of {', '.join(POLICIES)}")
        if self.charge not in CHARGES:
            raise ConfigError(f"charge {self.charge!r}: expected one of {', '.join(CHARGES)}")
        for name in ("window_s", "max_min_runtime_s", "gpus_per_node", "grace_s", "preempt_cycle_s"):
            if getattr(self, name) < (1 if name in ("window_s", "gpus_per_node") else 0):
                raise ConfigError(f"{name} = {getattr(self, name)} is out of range")
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
        return text + (" swap-margin" if self.swap_margin else "")
