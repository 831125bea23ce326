"""The knob flags shared by ``replay`` and ``compare``."""

from __future__ import annotations

import argparse

from ledger.core.knobs import CHARGES, POLICIES, Knobs, Policy, parse_duration
from ledger.errors import ConfigError


def _add_rule_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--swap-margin", action="store_true",
        help="anti-thrash: preempt allocated work only if the waiter's budget, charged its protected runtime, "
        "still ranks ahead (default: preempt as soon as the victim's budget ranks after the waiter's)",
    )
    p.add_argument(
        "--preempt-cycle", default="0s",
        help="run the full preemption walk at most once per cycle, e.g. 60s (default 0s: at every event)",
    )


def add_knob_arguments(p: argparse.ArgumentParser, *, many_policies: bool = False) -> None:
    """Register --policy, --window, --half-life, --max-min-runtime, --charge, --gpus-per-node, --grace.

    Also --swap-margin and --preempt-cycle (single values, applied to every combination).

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
        p.add_argument(
            "--swap-margin", nargs="?", const="on", default="off", metavar="on|off|off,on",
            help="anti-thrash swap margin: off (default), on (the flag alone), or off,on to compare both",
        )
        p.add_argument(
            "--preempt-cycle", default="0s", help="preemption walk cycle(s), e.g. 0s,60s (default 0s: at every event)"
        )
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
        "swap_margin": bool(getattr(args, "swap_margin", False)),
        "preempt_cycle_s": parse_duration(getattr(args, "preempt_cycle", None) or "0s"),
    }


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


_SWITCH = {"on": True, "yes": True, "true": True, "1": True, "off": False, "no": False, "false": False, "0": False}


def _switches(text: str, flag: str) -> list[bool]:
    """Return the on/off values of a boolean knob given as a comma list (``off,on`` compares both)."""
    values = []
    for part in _split(text):
        if part is None or part.lower() not in _SWITCH:
            raise ConfigError(f"{flag} {text!r}: expected on, off, or a comma list of them such as off,on")
        values.append(_SWITCH[part.lower()])
    return values


def _split(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    return [part.strip() for part in str(text).split(",") if part.strip()] or [None]


def knob_grid(args: argparse.Namespace, gpus_per_node: int = 8) -> list[Knobs]:
    """Return every combination the flags list: each knob may be a comma list (``--max-min-runtime 2h,4h,8h``).

    Policies come from repeated ``--policy`` flags (or comma lists); the order is policies, then windows,
    half-lives, caps, charges, graces, swap margins (``off,on``) and preemption cycles, each in the order given.
    """
    import itertools
    policies: list[str] = []
    for p in getattr(args, "policy", None) or ["fairshare"]:
        policies.extend(x for x in _split(p) if x)
    for policy in policies:
        if policy not in POLICIES:
            raise ConfigError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    swap = args.swap_margin
    swaps = [swap] if isinstance(swap, bool) else _switches(str(swap), "--swap-margin")
    combos = itertools.product(
        policies, _split(args.window), _split(args.half_life), _split(args.max_min_runtime), _split(args.charge),
        _split(args.grace), swaps, _split(getattr(args, "preempt_cycle", None) or "0s"),
    )
    return [
        Knobs(
            policy=policy,  # type: ignore[arg-type]
            window_s=parse_duration(window or "7d"),
            half_life_s=parse_duration(half_life) if half_life else None,
            max_min_runtime_s=parse_duration(cap or "8h"),
            charge=charge or "upfront",  # type: ignore[arg-type]
            gpus_per_node=args.gpus_per_node or gpus_per_node,
            grace_s=parse_duration(grace or "0s"),
            swap_margin=swap_on,
            preempt_cycle_s=parse_duration(cycle or "0s"),
        )
        for policy, window, half_life, cap, charge, grace, swap_on, cycle in combos
    ]
