"""Run the streaming processors and the decision service against Kafka."""

from __future__ import annotations

import argparse

from ledger.errors import LedgerError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    raise LedgerError("not built yet (issue 6)")
