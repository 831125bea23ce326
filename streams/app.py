"""The faust app: topics, tables, the agent, the timer, rebalance signals and web pages, wired to the runtime.

No business logic lives here: the agent hands each batch to ``WorkerRuntime.on_batch``, the timer calls
``on_timer``, the rebalance signals ``on_assigned``/``on_revoked`` (``streams.runtime``), and the
runtime feeds the records to the decision service (``streams.service``).

Topics: ``gpuledger.events`` in; ``gpuledger.decisions`` (the core's outputs, same codec, key =
cluster, same partition as the input), ``gpuledger.deadletter`` (bad records, reason in headers)
out; two changelog-backed tables: ``clusters`` (one checkpoint per cluster) and ``occupancy``
(rolling allocated/unallocated GPU-seconds per budget node, a view for operators).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from streams.config import WorkerConfig
from streams.runtime import WorkerRuntime
from streams.topics import TopicNames

__all__ = ["build_app", "cap_fetch_wait", "run_worker"]


def build_app(cfg: WorkerConfig) -> tuple[Any, WorkerRuntime]:
    """Return the faust app and its runtime for ``cfg`` (topics must exist: ``streams.topics.ensure_topics``)."""
    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    data_dir = cfg.data_dir or Path(tempfile.mkdtemp(prefix="gpuledger-worker-"))
    app: Any = faust.App(
        cfg.app_id,
        broker=f"kafka://{cfg.bootstrap}",
        store="memory://",
        datadir=str(data_dir),
        topic_partitions=cfg.partitions,
        topic_allow_declare=False,
        topic_disable_leader=True,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=16 * 1024 * 1024,
        broker_session_timeout=cfg.session_timeout_s,
        broker_rebalance_timeout=cfg.rebalance_timeout_s,
        broker_heartbeat_interval=min(1.0, cfg.session_timeout_s / 3),
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        web_enabled=True,
        web_bind=cfg.http_host,
        web_host=cfg.http_host,
        web_port=cfg.http_port,
        **cfg.security.faust_settings(),
    )
    events = app.topic(TopicNames(cfg.topic_prefix).events, key_type=bytes, value_type=bytes, partitions=cfg.partitions)
    clusters = app.Table("clusters", default=None, partitions=cfg.partitions, key_type=str, value_type=bytes)
    occupancy = app.Table("occupancy", default=None, partitions=cfg.partitions, key_type=str, value_type=bytes)
    rt = WorkerRuntime(cfg, app, clusters, occupancy)

    async def decide(stream: Any) -> None:
        rt.stream = stream
        # batches: faust's per-record path is the worker's floor, so everything after it runs once per batch
        # a noack clone: noack_take alone turns acks off only while it runs, and a record acked by faust
        # itself would let the committed offset pass the last checkpoint
        async for events in stream.noack().noack_take(cfg.batch_max, within=cfg.batch_within_s):
            await rt.on_batch(events)

    async def tick() -> None:
        await rt.on_timer()

    async def on_revoked(_app: Any, revoked: Any = (), **_: Any) -> None:
        await rt.on_revoked({tp.partition for tp in revoked if tp.topic == rt.topics.events})

    async def on_assigned(_app: Any, assigned: Any = (), **_: Any) -> None:
        await rt.on_assigned({tp.partition for tp in assigned if tp.topic == rt.topics.events})

    async def producer_task() -> None:
        async with rt.lock:
            await rt.start_producer()

    async def healthz(web: Any, request: Any) -> Any:
        return web.text("ok\n")

    async def readyz(web: Any, request: Any) -> Any:
        return web.text("ready\n") if rt.ready else web.text("not ready\n", status=503)

    async def metrics(web: Any, request: Any) -> Any:
        return web.bytes(generate_latest(rt.metrics.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    async def occupancy_page(web: Any, request: Any) -> Any:
        return web.json(rt.occupancy_view())

    # registered with calls rather than decorators: faust's decorators are untyped
    app.agent(events, name="decide")(decide)
    app.timer(cfg.timer_interval_s)(tick)
    app.on_partitions_revoked.connect(on_revoked)
    app.on_partitions_assigned.connect(on_assigned)
    app.task(producer_task)
    pages = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics, "/occupancy": occupancy_page}
    for path, view in pages.items():
        app.page(path)(view)
    return app, rt


def cap_fetch_wait(ms: int) -> None:
    """Cap how long a fetch may wait at the broker (faust hard-codes 1,500 ms).

    A broker that answers a fetch only when its wait expires (tansu does, even when records arrive in
    the meantime) would otherwise add up to 1.5 s to every decision's latency; against Apache Kafka
    a short wait only costs a few idle polls per second.
    """
    from aiokafka import AIOKafkaConsumer

    original = AIOKafkaConsumer.__init__
    if getattr(original, "_gpuledger_capped", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["fetch_max_wait_ms"] = min(int(kwargs.get("fetch_max_wait_ms", 500)), ms)
        original(self, *args, **kwargs)

    init._gpuledger_capped = True  # type: ignore[attr-defined]
    AIOKafkaConsumer.__init__ = init


def run_worker(cfg: WorkerConfig) -> int:
    """Create the topics, then run the worker until SIGTERM/SIGINT; return the exit code."""
    import faust

    from streams.topics import ensure_topics_sync, worker_topics

    topics = worker_topics(cfg.partitions, cfg.app_id, cfg.topic_prefix)
    ensure_topics_sync(cfg.bootstrap, topics, replication_factor=cfg.replication_factor, security=cfg.security)
    # faust fetches in a thread and hands records to the event loop; with the default 5 ms GIL switch
    # interval every hand-over can stall the loop that long (measured: ~500 records/s instead of thousands).
    sys.setswitchinterval(0.0002)
    cap_fetch_wait(cfg.fetch_max_wait_ms)
    app, rt = build_app(cfg)

    async def on_shutdown(_app: Any, **_: Any) -> None:
        await rt.shutdown()

    app.on_before_shutdown.connect(on_shutdown)

    worker = faust.Worker(app, loglevel=cfg.loglevel, quiet=True)
    worker.execute_from_commandline()
    return 0

