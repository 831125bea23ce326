"""Run the streaming processors and the decision service against Kafka.

Consumes ``gpuledger.events`` as a consumer group, feeds each cluster's decision core, emits its
outputs to ``gpuledger.decisions`` and bad records to ``gpuledger.deadletter``; checkpoints every
cluster and its rolling occupancy per budget node in compacted topics. Serves ``/healthz``,
``/readyz``, ``/metrics`` (Prometheus) and ``/occupancy`` over HTTP. Stop it with SIGTERM or
Ctrl-C; it is also safe to kill.
"""

from __future__ import annotations

import argparse
import os


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    from ledger.commands._knobs import add_knob_arguments

    env = os.environ.get
    p.add_argument(
        "--bootstrap", default=env("GPULEDGER_BOOTSTRAP"), metavar="HOST:PORT",
        help="Kafka bootstrap server(s) (default $GPULEDGER_BOOTSTRAP)",
    )  # fmt: skip
    p.add_argument(
        "--partitions", type=int, default=env("GPULEDGER_PARTITIONS", "4"),
        help="partitions of the worker's topics (default $GPULEDGER_PARTITIONS, else 4)",
    )  # fmt: skip
    p.add_argument(
        "--app-id", default=env("GPULEDGER_APP_ID", "gpuledger-worker"),
        help="consumer group and changelog prefix (default $GPULEDGER_APP_ID, else gpuledger-worker)",
    )  # fmt: skip
    p.add_argument(
        "--replication-factor", type=int, default=env("GPULEDGER_REPLICATION_FACTOR", "1"),
        help="replicas of the topics the worker creates when missing (default $GPULEDGER_REPLICATION_FACTOR, else 1)",
    )  # fmt: skip
    p.add_argument("--topic-prefix", default="", help="prefix of the three data topics (default none)")
    p.add_argument("--http", default="127.0.0.1:6066", metavar="HOST:PORT", help="metrics and health endpoint")
    p.add_argument("--checkpoint-every", type=int, default=5000, help="inputs between checkpoints (default 5000)")
    p.add_argument("--checkpoint-interval", type=float, default=5.0, help="seconds between checkpoints (default 5)")
    p.add_argument(
        "--idle-clock-rate", type=float, default=1.0,
        help="event seconds per wall second to extrapolate when no input arrives (default 1.0: live)",
    )
    p.add_argument("--idle-after", type=float, default=1.0, help="wall seconds of silence before the timer acts")
    p.add_argument("--session-timeout", type=float, default=6.0, help="consumer group session timeout in seconds")
    p.add_argument("--rebalance-timeout", type=float, default=3.0, help="how long a rebalance waits for members")
    p.add_argument("--fetch-max-wait", type=int, default=20, metavar="MS", help="broker fetch wait cap (default 20)")
    p.add_argument(
        "--checkpoint-in-loop", action="store_true",
        help="serialise checkpoints on the event loop instead of in a forked child (it then holds the loop)",
    )
    p.add_argument("--batch-max", type=int, default=1000, help="most input records processed as one batch")
    p.add_argument(
        "--instance-id", default=env("GPULEDGER_INSTANCE_ID"),
        help="static group member id (e.g. the pod name): a restarted worker takes its partitions back at once",
    )
    p.add_argument("--log-level", default="WARNING", help="log level (default WARNING)")
    add_knob_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from ledger.commands._knobs import knobs_from_args
    from ledger.errors import ConfigError
    from ledger.streams.config import WorkerConfig
    from ledger.streams.run import run_worker
    from ledger.streams.security import KafkaSecurity

    if not args.bootstrap:
        raise ConfigError("--bootstrap: not given and GPULEDGER_BOOTSTRAP is not set")
    host, _, port = args.http.rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"--http {args.http!r}: expected HOST:PORT")
    if args.partitions < 1:
        raise ConfigError(f"--partitions {args.partitions}: must be at least 1")
    if args.batch_max < 1:
        raise ConfigError(f"--batch-max {args.batch_max}: must be positive")
    if args.replication_factor < 1:
        raise ConfigError(f"--replication-factor {args.replication_factor}: must be at least 1")
    cfg = WorkerConfig(
        bootstrap=args.bootstrap,
        knobs=knobs_from_args(args),
        partitions=args.partitions,
        app_id=args.app_id,
        topic_prefix=args.topic_prefix,
        http_host=host or "127.0.0.1",
        http_port=int(port),
        checkpoint_every=args.checkpoint_every,
        checkpoint_interval_s=args.checkpoint_interval,
        checkpoint_fork=not args.checkpoint_in_loop,
        idle_clock_rate=args.idle_clock_rate,
        idle_after_s=args.idle_after,
        session_timeout_s=args.session_timeout,
        fetch_max_wait_ms=args.fetch_max_wait,
        batch_max=args.batch_max,
        rebalance_timeout_s=args.rebalance_timeout,
        loglevel=args.log_level,
        instance_id=args.instance_id or None,
        replication_factor=args.replication_factor,
        security=KafkaSecurity.from_env(),
    )
    return run_worker(cfg)
