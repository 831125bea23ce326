"""The knob flags shared by ``replay`` and ``compare``."""

from __future__ import annotations

import argparse

from ledger.core.knobs import CHARGES, POLICIES, STRATEGIES, Knobs, Policy, parse_duration
from ledger.errors import ConfigError


def _add_rule_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preemption-strategy", choices=STRATEGIES, default=None,
        help="final-share (default): preempt past-protection allocated work only if the waiter's budget, charged "
        "its protected runtime, would still rank at or ahead of the victim's after the swap; instant: as soon as "
        "the victim's budget ranks after the waiter's",
    )
    p.add_argument(
        "--swap-margin", action="store_true",
        help="the final-share strategy (kept for older scripts; the default)",
    )
    p.add_argument(
        "--preempt-cycle", default="0s",
        help="run the full preemption walk at most once per cycle, e.g. 60s (default 0s: at every event)",
    )


def add_knob_arguments(p: argparse.ArgumentParser, *, many_policies: bool = False) -> None:
    """Register --policy, --window, --half-life, --max-min-runtime, --charge, --gpus-per-node, --grace.

    Also --preemption-strategy (--swap-margin) and --preempt-cycle (single values, applied to every combination).

    With ``many_policies`` (compare), --policy repeats and every knob takes a comma list of values.
    """
    if many_policies:
        p.add_argument(
            "--policy", action="append", help=f"a policy to compare: {', '.join(POLICIES)} (repeat, or comma list)"
        )
        p.add_argument("--window", default="7d", help="lookback window(s), e.g. 3d,7d (default 7d)")
        p.add_argument("--half-life", default=None, help="exponential half-life(s) instead of a window, e.g. 7d")
        p.add_argument("--max-min-runtime", default="8h", help="protected-runtime cap(s), e.g. 1h,2h,4h,8h,16h")
        p.add_argument("--charge", default="upfront", help="entry charge(s): upfront, accrued, or upfront,accrued")
        p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per host (default: the budgets file)")
        p.add_argument("--grace", default="0s", help="grace period(s) before a preempted workload exits")
        _add_rule_flags(p)
        return
    else:
        p.add_argument("--policy", choices=POLICIES, default="fairshare", help="scheduling policy (default fairshare)")
    p.add_argument("--window", default="7d", help="fair-share lookback window (default 7d)")
    p.add_argument("--half-life", default=None, help="exponential decay half-life instead of a window, e.g. 7d")
    p.add_argument("--max-min-runtime", default="8h", help="cap on the protected minimum runtime (default 8h)")
    p.add_argument("--charge", choices=CHARGES, default="upfront", help="entry charge: upfront (default) or accrued")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per host (default: the budgets file, else 8)")
    p.add_argument("--grace", default="0s", help="grace period before a preempted workload exits (default 0s)")
    _add_rule_flags(p)


def _rule_knobs(args: argparse.Namespace) -> dict[str, object]:
    return {
        "preemption_strategy": _strategy(args),
        "preempt_cycle_s": parse_duration(getattr(args, "preempt_cycle", None) or "0s"),
    }


def _strategy(args: argparse.Namespace) -> str:
    chosen = getattr(args, "preemption_strategy", None)
    if chosen == "instant" and getattr(args, "swap_margin", False):
        raise ConfigError(
            "--swap-margin is the final-share strategy: it cannot be combined with --preemption-strategy instant"
        )
    return str(chosen or "final-share")


def knobs_from_args(args: argparse.Namespace, policy: Policy | None = None, gpus_per_node: int = 8) -> Knobs:
    """Return the Knobs the flags describe (``policy`` overrides --policy)."""
    return Knobs(
        policy=policy or args.policy,
        window_s=parse_duration(args.window),
        half_life_s=parse_duration(args.half_life) if args.half_life else None,
        max_min_runtime_s=parse_duration(args.max_min_runtime),
        charge=args.charge,
        gpus_per_node=args.gpus_per_node or gpus_per_node,
        grace_s=parse_duration(args.grace),
        **_rule_knobs(args),  # type: ignore[arg-type]
    )


def _split(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    return [part.strip() for part in str(text).split(",") if part.strip()] or [None]


def knob_grid(args: argparse.Namespace, gpus_per_node: int = 8) -> list[Knobs]:
    """Return every combination the flags list: each knob may be a comma list (``--max-min-runtime 2h,4h,8h``).

    Policies come from repeated ``--policy`` flags (or comma lists); the order is policies, then windows,
    half-lives, caps, charges and graces, each in the order given.
    """
    policies: list[str] = []
    for p in getattr(args, "policy", None) or ["fairshare"]:
        policies.extend(x for x in _split(p) if x)
    grid: list[Knobs] = []
    for policy in policies:
        if policy not in POLICIES:
            raise ConfigError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
        for window in _split(args.window):
            for half_life in _split(args.half_life):
                for cap in _split(args.max_min_runtime):
                    for charge in _split(args.charge):
                        for grace in _split(args.grace):
                            grid.append(
                                Knobs(
                                    policy=policy,
                                    window_s=parse_duration(window or "7d"),
                                    half_life_s=parse_duration(half_life) if half_life else None,
                                    max_min_runtime_s=parse_duration(cap or "8h"),
                                    charge=charge or "upfront",  # type: ignore[arg-type]
                                    gpus_per_node=args.gpus_per_node or gpus_per_node,
                                    grace_s=parse_duration(grace or "0s"),
                                    **_rule_knobs(args),  # type: ignore[arg-type]
                                )
                            )
    return grid
