"""The knob flags shared by ``replay`` and ``compare``."""

from __future__ import annotations

import argparse

from ledger.core.knobs import CHARGES, POLICIES, Knobs, Policy, parse_duration


def add_knob_arguments(p: argparse.ArgumentParser, *, many_policies: bool = False) -> None:
    """Register --policy, --window, --half-life, --max-min-runtime, --charge, --gpus-per-node, --grace."""
    if many_policies:
        p.add_argument("--policy", action="append", choices=POLICIES, help="a policy to compare (repeat the flag)")
    else:
        p.add_argument("--policy", choices=POLICIES, default="fairshare", help="scheduling policy (default fairshare)")
    p.add_argument("--window", default="7d", help="fair-share lookback window (default 7d)")
    p.add_argument("--half-life", default=None, help="exponential decay half-life instead of a window, e.g. 7d")
    p.add_argument("--max-min-runtime", default="8h", help="cap on the protected minimum runtime (default 8h)")
    p.add_argument("--charge", choices=CHARGES, default="upfront", help="entry charge: upfront (default) or accrued")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per host (default: the budgets file, else 8)")
    p.add_argument("--grace", default="0s", help="grace period before a preempted workload exits (default 0s)")


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
    )
