"""Check that Kafka and the worker decide what ``gpuledger replay`` decided for a run directory.

Publishes the run's inputs to fresh topics (a unique prefix, so nothing else on the broker is
touched), runs a worker on them in this process, reads its decisions back and compares them with
the run's outputs: counts, missing, duplicated, changed and unexpected decisions, and their order.
Exit code 0 when equivalent, 1 otherwise. Pass the knobs the run was replayed with (a knob whose
value differs from the run's ``replay.json`` is named on stderr first). ``--offline``
feeds the inputs through the worker's decision service in this process instead, batch by batch as
the worker takes them, with no broker: the same rule for the facts of an instant, without Kafka.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.core.knobs import Knobs


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    from ledger.commands._knobs import add_knob_arguments

    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (or event log) written by replay")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", metavar="HOST:PORT", help="Kafka bootstrap server(s)")
    where.add_argument("--offline", action="store_true", help="no broker: the worker's decision service alone")
    p.add_argument(
        "--idle-clock-rate", type=float, default=1e9,
        help="the worker's idle clock (default 1e9: history replay, every wake-up played; 0: none without an input)",
    )
    p.add_argument("--partitions", type=int, default=1, help="partitions of the check's topics (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the decisions (default 600)")
    add_knob_arguments(p)


def knobs_differing(knobs: Knobs, settings: dict[str, object]) -> str:
    """Return the knobs a run's ``replay.json`` settings name with other values than ``knobs`` ('' if none)."""
    given = asdict(knobs)
    return ", ".join(f"{name} {_shown(name, settings[name])} in the run, {_shown(name, value)} here"
                     for name, value in given.items() if name in settings and settings[name] != value)


def _shown(name: str, value: object) -> str:
    """Return a knob's value as its flag spells it (``debug_hosts`` None: auto, sized from the debug runs' demand)."""
    return "auto" if name == "debug_hosts" and value is None else repr(value)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._knobs import knobs_from_args
    from ledger.commands.explain import run_settings
    from ledger.errors import ConfigError
    from ledger.streams.equivalence import check, check_offline

    if not args.run_dir.exists():
        raise ConfigError(f"{args.run_dir}: no such run directory")
    knobs = knobs_from_args(args)
    differ = knobs_differing(knobs, run_settings(str(args.run_dir)))
    if differ:
        # the check runs the knobs it is given: say so before a difference is read as the stream path's
        print(f"note: {args.run_dir} was replayed with other knobs than this check's: {differ}; pass the run's "
              "knobs to check the stream path against it", file=sys.stderr)
    if args.offline:
        from ledger.streams.sources import read_events

        result = check_offline(read_events(args.run_dir), knobs=knobs, idle_clock_rate=args.idle_clock_rate)
    else:
        result = asyncio.run(
            check(args.run_dir, args.bootstrap, knobs=knobs, idle_clock_rate=args.idle_clock_rate,
                  partitions=args.partitions, timeout_s=args.timeout)
        )
    for line in result.lines():
        print(line)
    return 0 if result.equal else 1
