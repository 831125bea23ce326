"""The ``gpuledger`` console script: one subcommand per module in ``ledger.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from ledger.errors import LedgerError

# subcommand -> module in ledger.commands; each has add_arguments(parser) and run(args) -> int
COMMANDS = {
    "demo": "demo",
    "replay": "replay",
    "compare": "compare",
    "audit": "audit",
    "explain": "explain",
    "import": "import_",
    "budgets": "budgets",
    "publish": "publish",
    "worker": "worker",
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"ledger.commands.{COMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="gpuledger",
        description="An event-sourced ledger for shared GPU clusters run on budgets instead of priorities.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _module(name)
        doc = (module.__doc__ or "").strip().splitlines()[0]
        p = sub.add_parser(
            name, help=doc, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the console script; return the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args._run(args)
    except LedgerError as exc:
        print(f"gpuledger {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpuledger {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
