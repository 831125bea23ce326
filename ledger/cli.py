"""The ``gpuledger`` console script: one subcommand per module in ``ledger.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from ledger.errors import AllRejectedError, LedgerError

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
    "stream-check": "stream_check",
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"ledger.commands.{COMMANDS[name]}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuledger")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="gpuledger",
        description="An event-sourced ledger for shared GPU clusters run on budgets instead of priorities.",
    )
    parser.add_argument("--version", action="version", version=f"gpuledger {_version()}")
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
    prefix = f"gpuledger {args.command}: error:"
    try:
        code: int = args._run(args)
    except AllRejectedError as exc:  # the command ran, but every record of its input was bad
        print(f"{prefix} {exc}", file=sys.stderr)
        return 1
    except LedgerError as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return 2
    # A path the checks before the run could not foresee (removed meanwhile, a full disk, a binary
    # file read as text deep in an adapter): still one line that names it, never a traceback.
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{prefix} {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"{prefix} an input is not UTF-8 text ({exc.reason} at byte {exc.start})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpuledger {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
