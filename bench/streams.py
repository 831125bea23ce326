"""Streaming benchmark: worker throughput against the service's own rate, decision latency, restart time.

1. Throughput: N ledger events (mostly checkpoints, as a busy cluster writes them) are put on the
   events topic; the same records are read by a bare aiokafka consumer (what the broker and client
   can deliver), by a bare aiokafka loop around the same service (no checkpoints or commits), and
   processed by a ``gpuledger worker`` (decode, validate, decide, emit, checkpoint, commit). Targets:
   the worker >= 10,000 events/s and >= 25 % of the decision service's own rate without Kafka
   (decode, validate, core, occupancy), measured in the same run.
2. Latency: with the worker running, submissions are published at 1,000 events/s; each starts at
   once on a large cluster, so its ``SchedulingDecision`` is the answer. Latency = arrival of the
   decision on the decisions topic - send time of the submission (one clock, loopback). Target
   p99 < 100 ms. Also at 250/s and 100/s.
3. Restart: a worker is killed (SIGKILL) or stopped (SIGTERM) mid-stream and started again; the time
   from the new process's start to its first record processed, and how many inputs were processed
   twice over the two processes. Target <= 3 s; nothing redone beyond the last checkpoint's batch.
4. Restore: the time a worker spends reading its checkpoints at an assignment when the checkpoint
   topic holds 1, 1,000 and 3,000 checkpoints of one busy cluster (compaction leaves the active segment
   alone, so superseded checkpoints stay there for up to a week).

Run: ``python -m bench streams`` (uses ``GPULEDGER_KAFKA_BOOTSTRAP`` or starts a local tansu broker).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.codec import decode, encode  # noqa: E402
from ledger.core import Knobs  # noqa: E402
from ledger.events import BudgetNodeDefined, ClusterCapacityChanged, Event, WorkloadSubmitted  # noqa: E402
from ledger.streams.checkpoints import Mark, digest, mark_key  # noqa: E402
from ledger.streams.occupancy import OccupancyProjection  # noqa: E402
from ledger.streams.publisher import event_record  # noqa: E402
from ledger.streams.service import DecisionService  # noqa: E402
from ledger.streams.testbroker import kafka_broker  # noqa: E402
from ledger.streams.topics import checkpoint_topic, ensure_topics_sync  # noqa: E402
from tests.streams.harness import WorkerProc, produce_events, running_worker, wait_for  # noqa: E402
from tests.streams.scenarios import checkpoint_heavy  # noqa: E402

N_THROUGHPUT = 20_000
RATE = 1_000
N_LATENCY = 5_000
N_CHECKPOINTS = (1, 1_000, 3_000)
FAST_GROUP = ["--session-timeout", "2", "--rebalance-timeout", "1", "--idle-clock-rate", "0"]


async def _raw_consume(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                         group_id=f"bench-raw-{time.monotonic_ns()}")
    await c.start()
    try:
        got = 0
        t0 = time.perf_counter()
        while got < n:
            batch = await c.getmany(timeout_ms=1000, max_records=5000)
            got += sum(len(v) for v in batch.values())
        return n / (time.perf_counter() - t0)
    finally:
        await c.stop()


async def _plain_loop(bootstrap: str, topic: str, out_topic: str, n: int) -> float:
    """Return events/s of a bare aiokafka loop around the same service: fetch, process a batch, send, await.

    No checkpoints, commits or timers: an upper bound for a plain aiokafka driver, not a worker.
    """
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from ledger.codec import encode

    svc = DecisionService(Knobs())
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=f"bench-plain-{time.monotonic_ns()}",
                                fetch_max_wait_ms=20)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    try:
        got = 0
        t0 = 0.0
        while got < n:
            batch = await consumer.getmany(timeout_ms=1000, max_records=1000)
            msgs = [m for part in batch.values() for m in part]
            if not msgs:
                continue
            if not got:
                t0 = time.perf_counter()
            got += len(msgs)
            outcomes = svc.process_batch([(m.value, m.key, m.partition, m.offset) for m in msgs])
            sends = [await producer.send(out_topic, encode(e), key=m.key, partition=m.partition)
                     for m, o in zip(msgs, outcomes, strict=True) for e in o.emit]
            await asyncio.gather(*sends)
        return n / (time.perf_counter() - t0)
    finally:
        await producer.stop()
        await consumer.stop()


def _offline(events: list[Event]) -> dict[str, float]:
    """Return events/s of the decision service and of the occupancy processor, without Kafka."""
    svc = DecisionService(Knobs())
    encoded = [encode(e) for e in events]
    t0 = time.perf_counter()
    outputs = [o for out in svc.process_batch([(v, b"busy", 0, i) for i, v in enumerate(encoded)]) for o in out.emit]
    service_s = time.perf_counter() - t0
    ledger = [*events, *outputs]  # the occupancy processor's input: inputs and what they caused
    proj = OccupancyProjection()
    t0 = time.perf_counter()
    for e in ledger:
        proj.apply(e)
    proj.totals()
    occupancy_s = time.perf_counter() - t0
    return {
        "service_only": len(events) / service_s,
        "service_outside_core": len(events) / (service_s - svc.core_s),
        "occupancy_only": len(ledger) / occupancy_s,
    }


def throughput(bootstrap: str, tmp: Path) -> dict[str, float]:
    """Return events/s of the raw consumer, the plain loop, the worker (whole, and its core apart), offline parts."""
    events = checkpoint_heavy().inputs[:N_THROUGHPUT]
    result = _offline(events)
    with running_worker(bootstrap, tmp, extra=FAST_GROUP) as worker:
        produce_events(bootstrap, worker.topics.events, events)
        result["raw_aiokafka"] = asyncio.run(_raw_consume(bootstrap, worker.topics.events, len(events)))
        plain_out = worker.topics.decisions + ".plain"  # not the worker's: it would find these outputs there
        ensure_topics_sync(bootstrap, {plain_out: 1})
        result["plain_loop"] = asyncio.run(_plain_loop(bootstrap, worker.topics.events, plain_out, len(events)))
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") > 0, timeout_s=60, every_s=0.01)
        first = worker.metric("gpuledger_worker_records_total")
        t0 = time.perf_counter()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= len(events), timeout_s=600, every_s=0.02)
        wall = time.perf_counter() - t0
        busy = worker.metric("gpuledger_worker_busy_seconds_total")
        core = worker.metric("gpuledger_worker_core_seconds_total")
    result["worker"] = (len(events) - first) / wall
    result["worker_busy_share"] = busy / wall
    # the worker's own work (decode, occupancy, emit, checkpoint), the core's share taken out
    result["worker_outside_core"] = len(events) / (busy - core)
    return result


def _big_cluster(n: int) -> tuple[list[Event], list[WorkloadSubmitted]]:
    day0 = datetime(2026, 3, 2, tzinfo=UTC)
    setup: list[Event] = [
        ClusterCapacityChanged(event_id="lat/capacity", cluster="lat", time=day0, gpus=8192, gpus_per_node=8),
        BudgetNodeDefined(event_id="lat/b/lab", cluster="lat", time=day0, path="lab", share=1.0, set_by="admin"),
        BudgetNodeDefined(event_id="lat/b/a", cluster="lat", time=day0, path="lab/a", parent="lab", share=1.0,
                          set_by="admin"),
    ]
    subs = [
        WorkloadSubmitted(event_id=f"lat/s{i}", cluster="lat", time=day0 + timedelta(seconds=1, milliseconds=i),
                          workload_id=f"w{i}", budget="lab/a", user="u", gpus=1, min_runtime_s=0, resumable=True)
        for i in range(n)
    ]
    return setup, subs


async def _latency_run(
    bootstrap: str, events_topic: str, decisions_topic: str, subs: list[WorkloadSubmitted], rate: int
) -> list[float]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(decisions_topic, bootstrap_servers=bootstrap, auto_offset_reset="latest",
                                enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    await consumer.getmany(timeout_ms=500)  # settle the assignment at the end of the topic
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    sent: dict[str, float] = {}
    arrived: dict[str, float] = {}

    async def collect() -> None:
        while len(arrived) < len(subs):
            batch = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for msgs in batch.values():
                for m in msgs:
                    e = decode(m.value)
                    if e.type_name == "SchedulingDecision" and e.workload_id not in arrived:
                        arrived[e.workload_id] = now

    reader = asyncio.create_task(collect())
    t0 = time.perf_counter()
    for i, s in enumerate(subs):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent[s.workload_id] = time.perf_counter()
        await producer.send(events_topic, encode(s), key=b"lat")
    await asyncio.wait_for(reader, timeout=120)
    await producer.stop()
    await consumer.stop()
    return sorted((arrived[w] - sent[w]) * 1000 for w in sent)


def _cpu_s(pid: int) -> float:
    """Return the CPU seconds (user + system) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(bootstrap: str, tmp: Path, rate: int, n: int) -> dict[str, float]:
    """Return p50/p99/max milliseconds from a submission's send to its decision's arrival, at ``rate`` events/s.

    Also the worker's CPU time per submission over the run (less sensitive than latency to what else
    the shared machine runs: a worker that gets less than that share of a core falls behind).
    """
    setup, subs = _big_cluster(n)
    with running_worker(bootstrap, tmp, extra=FAST_GROUP) as worker:
        produce_events(bootstrap, worker.topics.events, setup)
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= len(setup), timeout_s=60)
        assert worker.proc is not None
        cpu0 = _cpu_s(worker.proc.pid)
        ms = asyncio.run(_latency_run(bootstrap, worker.topics.events, worker.topics.decisions, subs, rate))
        cpu_us = (_cpu_s(worker.proc.pid) - cpu0) / n * 1e6
    p99 = ms[int(0.99 * (len(ms) - 1))]
    return {"p50_ms": statistics.median(ms), "p99_ms": p99, "max_ms": ms[-1], "cpu_us": cpu_us}


def _metric_or_zero(worker: WorkerProc, name: str) -> float:
    """Return a worker's metric, or 0 while its HTTP endpoint is not up yet."""
    try:
        return worker.metric(name)
    except OSError:
        return 0.0


async def _rejoin(bootstrap: str, topic: str) -> float:
    """Return seconds a plain aiokafka consumer takes to get its partitions back in a group another one just left."""
    from aiokafka import AIOKafkaConsumer

    group = f"bench-rejoin-{time.monotonic_ns()}"

    async def join() -> tuple[AIOKafkaConsumer, float]:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=2000,
                             heartbeat_interval_ms=666, rebalance_timeout_ms=1000)  # the worker's, as FAST_GROUP sets
        t0 = time.perf_counter()
        await c.start()
        while not c.assignment():
            await c.getmany(timeout_ms=10)
        return c, time.perf_counter() - t0

    first, _ = await join()
    await first.stop()  # leaves the group, as a worker stopped by SIGTERM does
    second, seconds = await join()
    await second.stop()
    return seconds


def restart(bootstrap: str, tmp: Path, signal_name: str) -> dict[str, float]:
    """Return seconds from a restarted worker's start to its first record, and inputs processed twice.

    Inputs processed twice: those the stopped process applied after its last durable checkpoint (what
    the restarted one resumes after), sampled just before the signal.
    """
    events = checkpoint_heavy().inputs[:N_THROUGHPUT]
    applied = 'gpuledger_worker_records_total{outcome="applied"}'
    checkpointed = "gpuledger_worker_checkpointed_offset"
    with running_worker(bootstrap, tmp, extra=FAST_GROUP) as worker:
        produce_events(bootstrap, worker.topics.events, events)
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric(applied) >= N_THROUGHPUT // 3, timeout_s=120, every_s=0.01)
        before, mark = worker.metric(applied), worker.metric(checkpointed)
        if signal_name == "SIGKILL":
            worker.kill()
        else:
            worker.stop()
        t0 = time.perf_counter()
        worker.start()
        wait_for(lambda: _metric_or_zero(worker, "gpuledger_worker_records_total") > 0, timeout_s=120, every_s=0.01)
        seconds = time.perf_counter() - t0
        resumed = worker.metric(checkpointed)  # the restored mark: the restart resumes at its offset + 1
    redone = before - (resumed + 1) if signal_name == "SIGKILL" else float("nan")
    return {"seconds": seconds, "redone": redone, "resumed": resumed, "mark_before": mark}


async def _fill_checkpoints(bootstrap: str, topic: str, cluster: str, blob: bytes, mark: Mark, n: int) -> None:
    """Write ``n`` checkpoints of one cluster, each followed by its mark, as a worker's checkpoints do."""
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=1024 * 1024,
                         max_request_size=16 * 1024 * 1024)
    await p.start()
    try:
        for _ in range(n):
            at = (await (await p.send(topic, blob, key=cluster.encode(), partition=0))).offset
            await p.send(topic, replace(mark, states={cluster: at}).to_bytes(), key=mark_key(0).encode(), partition=0)
        await p.flush()
    finally:
        await p.stop()


def restore(bootstrap: str, tmp: Path, n: int) -> dict[str, float]:
    """Return a worker's time to restore a partition whose checkpoint topic holds ``n`` checkpoints of its cluster.

    Compaction never touches the active segment of a topic, so a busy cluster's superseded checkpoints
    stay there (at one per 5 s: 720 an hour) until the segment rolls.
    """
    events = checkpoint_heavy().inputs[:N_THROUGHPUT]
    svc = DecisionService(Knobs())
    svc.process_batch([(encode(e), e.cluster.encode(), 0, i) for i, e in enumerate(events)])
    (st,) = svc.states.values()
    last = event_record(events[-1])[1]
    mark = Mark(len(events) - 1, digest(last), events[-1].event_id, 0)
    with running_worker(bootstrap, tmp, extra=FAST_GROUP) as worker:
        produce_events(bootstrap, worker.topics.events, events)
        asyncio.run(_fill_checkpoints(bootstrap, checkpoint_topic(worker.app_id), st.cluster, st.to_bytes(), mark, n))
        t0 = time.perf_counter()
        worker.start()
        worker.wait_ready()
        ready = time.perf_counter() - t0
        seconds = worker.metric("gpuledger_worker_restore_seconds_sum")
    return {"restore_s": seconds, "ready_s": ready, "blob_bytes": len(st.to_bytes())}


def main() -> None:
    """Run the measurements and print them."""
    with tempfile.TemporaryDirectory() as d, kafka_broker(Path(d)) as broker:
        tmp = Path(d)
        print(f"broker: {broker.kind} at {broker.bootstrap}")
        t = throughput(broker.bootstrap, tmp)
        raw = t["raw_aiokafka"]
        print(f"throughput ({N_THROUGHPUT} events of a busy 32-GPU cluster):")
        print(f"  raw aiokafka consumer         {raw:>9,.0f}/s  (baseline)")
        print(
            f"  gpuledger worker              {t['worker']:>9,.0f}/s  ({t['worker'] / t['service_only']:.0%} of the "
            f"service alone; targets >= 10,000/s and >= 25%; busy {t['worker_busy_share']:.0%} of the time)"
        )
        own = t["worker_outside_core"]
        print(f"  plain aiokafka loop, same service {t['plain_loop']:>5,.0f}/s  ({t['plain_loop'] / raw:.1%} of raw; "
              "bench only: no checkpoints or commits)")
        print(f"  worker's own work, core apart {own:>9,.0f}/s  (decode, occupancy, emit, checkpoint)")
        print(f"  decision service, no Kafka    {t['service_only']:>9,.0f}/s  "
              f"({t['service_outside_core']:,.0f}/s with the core apart)")
        print(f"  occupancy processor alone     {t['occupancy_only']:>9,.0f}/s  (ledger events: inputs and outputs)")
        with running_worker(broker.bootstrap, tmp) as w:
            rejoin = asyncio.run(_rejoin(broker.bootstrap, w.topics.events))
        print(f"group rejoin on this broker: {rejoin:.2f} s for a plain aiokafka consumer after another left "
              "(part of every restart below)")
        for sig in ("SIGKILL", "SIGTERM"):
            r = restart(broker.bootstrap, tmp, sig)
            print(f"restart after {sig}: first record {r['seconds']:.2f} s after the new process started "
                  f"(target <= 3 s); resumed after offset {r['resumed']:.0f} (last checkpoint seen before the "
                  f"signal: {r['mark_before']:.0f}); inputs processed twice: {r['redone']:.0f}")
        for n in N_CHECKPOINTS:
            r = restore(broker.bootstrap, tmp, n)
            print(f"restore with {n:,} checkpoints of {r['blob_bytes'] / 1000:.0f} kB on the partition: "
                  f"{r['restore_s']:.2f} s reading them at the assignment, ready {r['ready_s']:.2f} s after start")
        for rate, n in ((RATE, N_LATENCY), (RATE // 4, N_LATENCY // 2), (RATE // 10, N_LATENCY // 10)):
            lat = latency(broker.bootstrap, tmp, rate, n)
            print(
                f"latency at {rate}/s ({n} submissions): p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms, "
                f"max {lat['max_ms']:.1f} ms (target at 1000/s: p99 < 100 ms); "
                f"worker CPU {lat['cpu_us']:.0f} us per submission"
            )


if __name__ == "__main__":
    main()
