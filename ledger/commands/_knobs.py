"""The knob flags shared by ``replay`` and ``compare``."""

from __future__ import annotations

import argparse

from ledger.core.knobs import (
    CHARGES,
    FILL_HEADROOM,
    MAX_PREEMPTIONS,
    POLICIES,
    STRATEGIES,
    Knobs,
    Policy,
    parse_duration,
)
from ledger.errors import ConfigError


def _add_rule_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preemption-strategy", choices=STRATEGIES, default=None,
        help="final-share (default): preempt past-protection allocated work only if the waiter's budget, charged "
        "its protected runtime, would still rank at or ahead of the victim's after the swap; instant: as soon as "
        "the victim's budget ranks after the waiter's",
    )
    p.add_argument(
        "--preempt-cycle", default="0s",
        help="run the full preemption walk at most once per cycle, e.g. 60s (default 0s: at every event)",
    )
    p.add_argument(
        "--max-preemptions", type=int, default=None,
        help="preemptions for fair share after which a workload keeps its GPUs until its run checkpoints (default 1)",
    )
    p.add_argument(
        "--fill-headroom", default=None,
        help="share of the capacity kept free of new free fill while allocated work runs or waits, e.g. 3%% or 0 "
        "(default 3%%)",
    )
    p.add_argument(
        "--preempt-uncheckpointed", nargs="?", const="yes", default=None, metavar="yes|no",
        help="let fair share preempt resumable work before its run has checkpointed (the former rule, for "
        "what-if runs; default no)",
    )
    p.add_argument(
        "--debug-hosts", default=None, metavar="N|auto",
        help="fair share: the last N hosts start only debug runs (allocated, protected <= 15 min, one host) and "
        "free fill; 0: no debug partition (default auto: the GPUs the last day's debug runs kept busy, in hosts)",
    )


def add_knob_arguments(p: argparse.ArgumentParser, *, many_policies: bool = False) -> None:
    """Register --policy, --window, --half-life, --max-min-runtime, --charge, --gpus-per-node, --grace.

    Also --preemption-strategy, --preempt-cycle, --max-preemptions, --fill-headroom,
    --preempt-uncheckpointed and --debug-hosts (single values, applied to every combination).

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
            "--preemption-strategy", default=None, metavar="final-share|instant",
            help="preemption strategy(ies): final-share (default), instant, or final-share,instant side by side",
        )
        p.add_argument("--preempt-cycle", default="0s", help="preemption walk cycle(s), e.g. 0s,60s (default 0s)")
        p.add_argument(
            "--max-preemptions", default=None,
            help="preemptions before a workload keeps its GPUs until it checkpoints, e.g. 1,2 (default 1)",
        )
        p.add_argument(
            "--fill-headroom", default=None,
            help="share(s) of the capacity kept free of new free fill, e.g. 0,3%%,5%% (default 3%%)",
        )
        p.add_argument(
            "--preempt-uncheckpointed", nargs="?", const="yes", default=None, metavar="no,yes",
            help="whether fair share may preempt resumable work before its run checkpoints: yes, no (default) "
            "or no,yes side by side",
        )
        p.add_argument(
            "--debug-hosts", default=None, metavar="N|auto",
            help="debug partition size(s) in hosts (debug runs and free fill only), e.g. 0,1,auto (default auto: "
            "sized from the last day's debug runs)",
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
    knobs: dict[str, object] = {
        "preemption_strategy": _strategy(args),
        "preempt_cycle_s": parse_duration(getattr(args, "preempt_cycle", None) or "0s"),
    }
    if getattr(args, "max_preemptions", None) is not None:
        knobs["max_preemptions"] = args.max_preemptions
    headroom = share_arg("--fill-headroom", getattr(args, "fill_headroom", None))
    if headroom is not None:
        knobs["fill_headroom"] = headroom
    uncheckpointed = getattr(args, "preempt_uncheckpointed", None)
    if uncheckpointed is not None:
        knobs["preempt_uncheckpointed"] = yes_no("--preempt-uncheckpointed", uncheckpointed)
    knobs["debug_hosts"] = _debug_hosts(getattr(args, "debug_hosts", None))
    return knobs


def yes_no(flag: str, text: str) -> bool:
    """Return a yes/no flag value as a bool; raise ConfigError naming the flag otherwise."""
    value = text.strip().lower()
    if value not in ("yes", "no"):
        raise ConfigError(f"{flag} {text!r}: expected yes or no")
    return value == "yes"


def share_arg(flag: str, text: str | None) -> float | None:
    """Return a share given as '3%' or '0.03' (None when not given); raise ConfigError naming the flag otherwise."""
    if text is None:
        return None
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected a share such as 3% or 0.03") from None
    if not 0 <= value < 1:
        raise ConfigError(f"{flag} {text!r}: must be at least 0 and less than 100%")
    return value


def _count(flag: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected a whole number, or a comma list of them") from None
    if value < 0:
        raise ConfigError(f"{flag} {value}: must be 0 or more")
    return value


def _debug_hosts(text: str | None) -> int | None:
    """Return ``--debug-hosts``' value: a number of hosts, or None to size it from demand ('auto' or not given)."""
    value = "auto" if text is None else text.strip().lower()
    if value == "auto":
        return None
    if not value.isdigit():
        raise ConfigError(f"--debug-hosts {text!r}: expected a whole number of hosts (0: no debug partition) or auto")
    return int(value)


def _strategy(args: argparse.Namespace) -> str:
    return str(getattr(args, "preemption_strategy", None) or "final-share")


def knobs_from_args(args: argparse.Namespace, policy: Policy | None = None, gpus_per_node: int = 8) -> Knobs:
    """Return the Knobs the flags describe (``policy`` overrides --policy)."""
    return Knobs(
        policy=policy or args.policy,
        window_s=parse_duration(args.window),
        half_life_s=parse_duration(args.half_life) if args.half_life else None,
        max_min_runtime_s=parse_duration(args.max_min_runtime),
        charge=args.charge,
        gpus_per_node=gpus_per_node if args.gpus_per_node is None else args.gpus_per_node,
        grace_s=parse_duration(args.grace),
        **_rule_knobs(args),  # type: ignore[arg-type]
    )


def _split(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    return [part.strip() for part in str(text).split(",") if part.strip()] or [None]


def _strategies(args: argparse.Namespace) -> list[str]:
    values = [x for x in _split(getattr(args, "preemption_strategy", None)) if x] or ["final-share"]
    for value in values:
        if value not in STRATEGIES:
            raise ConfigError(f"--preemption-strategy {value!r}: expected {' or '.join(STRATEGIES)}, or a comma list")
    return values


def knob_grid(args: argparse.Namespace, gpus_per_node: int = 8) -> list[Knobs]:
    """Return every combination the flags list: each knob may be a comma list (``--max-min-runtime 2h,4h,8h``).

    Policies come from repeated ``--policy`` flags (or comma lists); the order is policies, then windows,
    half-lives, caps, charges, graces, preemption strategies (``final-share,instant``), preemption cycles,
    preemption bounds (``--max-preemptions 1,2``), fill headrooms (``--fill-headroom 0,3%``),
    ``--preempt-uncheckpointed no,yes`` and debug partitions (``--debug-hosts 0,1``), each in the order given.
    """
    import itertools

    policies: list[str] = []
    for p in getattr(args, "policy", None) or ["fairshare"]:
        policies.extend(x for x in _split(p) if x)
    for policy in policies:
        if policy not in POLICIES:
            raise ConfigError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    combos = itertools.product(
        policies, _split(args.window), _split(args.half_life), _split(args.max_min_runtime), _split(args.charge),
        _split(args.grace), _strategies(args), _split(getattr(args, "preempt_cycle", None) or "0s"),
        [_count("--max-preemptions", x) for x in _split(getattr(args, "max_preemptions", None))],
        # the last three as one list of triples (typing covers product() of at most 10 iterables)
        list(itertools.product(
            [share_arg("--fill-headroom", x) for x in _split(getattr(args, "fill_headroom", None))],
            [x is not None and yes_no("--preempt-uncheckpointed", x)
             for x in _split(getattr(args, "preempt_uncheckpointed", None))],
            [_debug_hosts(x) for x in _split(getattr(args, "debug_hosts", None))],
        )),
    )
    return [
        Knobs(
            policy=policy,  # type: ignore[arg-type]
            window_s=parse_duration(window or "7d"),
            half_life_s=parse_duration(half_life) if half_life else None,
            max_min_runtime_s=parse_duration(cap or "8h"),
            charge=charge or "upfront",  # type: ignore[arg-type]
            gpus_per_node=gpus_per_node if args.gpus_per_node is None else args.gpus_per_node,
            grace_s=parse_duration(grace or "0s"),
            preemption_strategy=strategy,  # type: ignore[arg-type]
            preempt_cycle_s=parse_duration(cycle or "0s"),
            max_preemptions=MAX_PREEMPTIONS if most is None else most,
            fill_headroom=FILL_HEADROOM if headroom is None else headroom,
            preempt_uncheckpointed=uncheckpointed,
            debug_hosts=debug_hosts,
        )
        for policy, window, half_life, cap, charge, grace, strategy, cycle, most, (
            headroom, uncheckpointed, debug_hosts,
        ) in combos
    ]
