"""Send events to Kafka; spool them locally and resend when the broker is down.

Every event is first written (fsynced) to the spool directory, then sent to ``gpuledger.events``
keyed by cluster with acks=all. If the broker cannot be reached, the events stay spooled and
``publish`` keeps retrying for ``--wait``; whatever is still spooled then is sent by the next
``publish`` (with or without a SOURCE). The exit code is non-zero only when events could not
even be spooled.
"""

from __future__ import annotations

import argparse
import logging
import sys

from ledger.core.knobs import parse_duration


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("source", nargs="?", help="event log, run directory or .jsonl of events (omit to resend the spool)")
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="Kafka bootstrap server(s)")
    p.add_argument("--spool", default=".gpuledger-spool", metavar="DIR", help="spool (default .gpuledger-spool)")
    p.add_argument("--topic", default="gpuledger.events", help="topic (default gpuledger.events)")
    p.add_argument("--wait", default="5m", help="how long to keep retrying an unreachable broker (default 5m)")
    p.add_argument(
        "--inputs-only", action="store_true",
        help="leave out the decision core's own outputs (ids CLUSTER/dN), e.g. to drive a worker from a replayed run",
    )
    p.add_argument("--timeout", default="10s", help="per-request broker timeout (default 10s)")


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.streams.publisher import Publisher
    from ledger.streams.sources import read_events, without_core_outputs

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # connection retries are reported below, once
    wait_s = parse_duration(args.wait)
    with Publisher(args.bootstrap, args.spool, topic=args.topic, request_timeout_s=parse_duration(args.timeout)) as pub:
        spooled = 0
        if args.source:
            source = read_events(args.source)
            # validate everything first: a bad line spools nothing
            events = list(without_core_outputs(source) if args.inputs_only else source)
            spooled = pub.enqueue(events)
        result = pub.flush(wait_s)
    if result.spooled:
        print(
            f"gpuledger publish: broker {args.bootstrap} unreachable ({result.error}); sent {result.sent}, "
            f"{result.spooled} event(s) kept in {args.spool} and resent by the next publish",
            file=sys.stderr,
        )
    else:
        print(f"published {result.sent} event(s) to {args.topic} ({spooled} read from the source)")
    return 0
