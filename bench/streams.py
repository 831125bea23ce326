"""Streaming benchmark: worker throughput against the service's own rate, decision latency, restart time.

1. Throughput: N ledger events (mostly checkpoints, as a busy cluster writes them) are put on the
   events topic; the same records are read by a bare aiokafka consumer (what the broker and client
   can deliver), by a bare aiokafka loop around the same service (no checkpoints or commits), and
   processed by a ``gpuledger worker`` (decode, validate, decide, emit, checkpoint, commit). Targets:
   the worker >= 10,000 events/s and >= 25 % of the decision service's own rate without Kafka
   (decode, validate, core, occupancy), measured in the same run; then the same on the demo month
   (every input of the fairshare replay of ``generate(7)``).
2. Latency: with the worker running, submissions are published at 1,000 events/s; each starts at
   once on a large cluster, so its ``SchedulingDecision`` is the answer. Latency = arrival of the
   decision on the decisions topic - send time of the submission (one clock, loopback). Target
   p99 < 100 ms in each of 5 runs. Also at 250/s and 100/s.
3. Restart: a worker is killed (SIGKILL) or stopped (SIGTERM) mid-stream and started again, as a
   dynamic and as a static group member (``--instance-id``); the time from the new process's start
   to its first record processed, and how many inputs were processed twice over the two processes.
   The floor, in the same run: a plain aiokafka consumer process in the same kind of group, killed or
   stopped the same way, and a new one's time from its start to its first record (the broker's own
   hand-back). Targets <= 3 s and <= 1.5x the floor; nothing redone beyond the last checkpoint's batch.
4. Restore: the time a worker spends reading its checkpoints at an assignment when the checkpoint
   topic holds 1, 1,000 and 3,000 checkpoints of one busy cluster (compaction leaves the active segment
   alone, so superseded checkpoints stay there for up to a week).
5. A leader's broker dies: on three nodes (replication factor 3, min.insync.replicas 2), submissions
   go in at 200/s while the node leading the events partition is SIGKILLed; the time from the kill
   until decisions flow again, and whether every submission was decided exactly once.

Run: ``python -m bench streams`` (Apache Kafka: ``GPULEDGER_KAFKA_BOOTSTRAP``, else a node started
from the pinned jars; the leader test always starts three nodes). ``BENCH_STREAMS=throughput,demo,
equivalence,restart,restore,latency,leader`` picks sections.

6. Equivalence: ``gpuledger stream-check`` on the demo month's fairshare run, through the broker and a
   worker and offline through the worker's decision service, in both clock modes (idle clock off and
   history replay). Target: 0 missing, 0 mismatched, 0 unexpected.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
from ledger.streams.testbroker import KafkaCluster, kafka_broker  # noqa: E402
from ledger.streams.topics import checkpoint_topic, ensure_topics_sync  # noqa: E402
from tests.streams.harness import WorkerProc, produce_events, running_worker, wait_for  # noqa: E402
from tests.streams.scenarios import checkpoint_heavy  # noqa: E402

N_THROUGHPUT = 20_000
RATE = 1_000
N_LATENCY = 5_000
N_CHECKPOINTS = (1, 1_000, 3_000)
SESSION_S = 6  # the shortest session Apache Kafka accepts (group.min.session.timeout.ms)
FAST_GROUP = ["--session-timeout", str(SESSION_S), "--rebalance-timeout", "1", "--idle-clock-rate", "0"]
LATENCY_RUNS = 5
SECTIONS = ("throughput", "demo", "equivalence", "restart", "restore", "latency", "leader")


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
    records = [(*reversed(event_record(e)), 0, i) for i, e in enumerate(events)]
    t0 = time.perf_counter()
    outputs = [o for out in svc.process_batch(records) for o in out.emit]  # type: ignore[arg-type]
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


def demo_month() -> list[Event]:
    """Return every input of the demo month's fairshare replay (``generate(7)``, the demo mix), in order."""
    from ledger.log import open_log
    from ledger.replay.demo_month import generate
    from ledger.replay.run import inputs_from_budgets, replay
    from ledger.streams.sources import is_core_output

    demo = generate(7)
    with tempfile.TemporaryDirectory() as d:
        replay(inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start), Knobs(), d, until=demo.end)
        return [e for e in open_log(d) if not is_core_output(e)]


def equivalence(bootstrap: str, tmp: Path) -> list[str]:
    """Return one line per check of the demo month's run: through the broker, then offline, in both clock modes."""
    from collections import Counter

    from ledger.events import to_us
    from ledger.log import open_log
    from ledger.replay.demo_month import generate
    from ledger.replay.run import inputs_from_budgets, replay
    from ledger.streams.equivalence import check, check_offline
    from ledger.streams.sources import is_core_output

    demo = generate(7)
    run = tmp / "demo-run"
    replay(inputs_from_budgets(demo.budgets, list(demo.submissions), start=demo.start), Knobs(), run, until=demo.end)
    events = list(open_log(run))
    times = Counter(to_us(e.time) for e in events if not is_core_output(e))
    lines = [f"stream-check, the demo month ({sum(times.values()):,} inputs, "
             f"{sum(1 for n in times.values() if n > 1):,} instants holding more than one):"]
    for rate, mode in ((0.0, "idle clock off"), (1e9, "history replay")):
        for where in ("broker + worker", "service offline"):
            t0 = time.perf_counter()
            if where == "service offline":
                r = check_offline(events, knobs=Knobs(), idle_clock_rate=rate)
            else:
                r = asyncio.run(check(run, bootstrap, knobs=Knobs(), idle_clock_rate=rate))
            lines.append(
                f"  {where}, {mode}: expected {r.expected:,}, got {r.got:,}; missing {len(r.missing)}, mismatched "
                f"{len(r.mismatched)}, unexpected {len(r.unexpected)}, duplicated {len(r.duplicated)}: "
                f"{'equivalent' if r.equal else 'NOT equivalent'} ({time.perf_counter() - t0:.0f} s)"
            )
    return lines


def throughput(bootstrap: str, tmp: Path, events: list[Event], baselines: bool = True) -> dict[str, float]:
    """Return events/s of the raw consumer, the plain loop, the worker (whole, and its core apart), offline parts."""
    result = _offline(events)
    with running_worker(bootstrap, tmp, extra=FAST_GROUP) as worker:
        produce_events(bootstrap, worker.topics.events, events)
        if baselines:
            result["raw_aiokafka"] = asyncio.run(_raw_consume(bootstrap, worker.topics.events, len(events)))
            plain_out = worker.topics.decisions + ".plain"  # not the worker's: it would find these outputs there
            ensure_topics_sync(bootstrap, {plain_out: 1})
            result["plain_loop"] = asyncio.run(_plain_loop(bootstrap, worker.topics.events, plain_out, len(events)))
        worker.start()
        worker.wait_ready()
        # a worker deep in a batch may answer /metrics late: a poll that times out counts as "not yet"
        wait_for(lambda: _metric_or_zero(worker, "gpuledger_worker_records_total") > 0, timeout_s=60, every_s=0.01)
        first = worker.metric("gpuledger_worker_records_total")
        t0 = time.perf_counter()
        wait_for(lambda: _metric_or_zero(worker, "gpuledger_worker_records_total") >= len(events), timeout_s=600,
                 every_s=0.02)
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


async def _paced_run(
    bootstrap: str, events_topic: str, decisions_topic: str, subs: list[WorkloadSubmitted], rate: int,
    kill_after_s: float | None = None, kill: Callable[[], None] | None = None,
) -> tuple[dict[str, float], dict[str, float], float | None]:
    """Send submissions at ``rate``/s and time each one's decision; optionally call ``kill`` after a while.

    Return (send time per workload, decision arrival time per workload, when ``kill`` returned).
    """
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(decisions_topic, bootstrap_servers=bootstrap, auto_offset_reset="latest",
                                enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    await consumer.getmany(timeout_ms=500)  # settle the assignment at the end of the topic
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, enable_idempotence=True)
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
    loop = asyncio.get_running_loop()
    killed_at = None
    acks = []
    t0 = time.perf_counter()
    for i, s in enumerate(subs):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if kill is not None and killed_at is None and time.perf_counter() - t0 >= (kill_after_s or 0.0):
            await loop.run_in_executor(None, kill)
            killed_at = time.perf_counter()
        sent[s.workload_id] = time.perf_counter()
        acks.append(await producer.send(events_topic, encode(s), key=b"lat"))
    await asyncio.gather(*acks)
    with contextlib.suppress(TimeoutError):  # what never arrived is counted by the caller
        await asyncio.wait_for(reader, timeout=120)
    await producer.stop()
    await consumer.stop()
    return sent, arrived, killed_at


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
        sent, arrived, _ = asyncio.run(_paced_run(bootstrap, worker.topics.events, worker.topics.decisions, subs, rate))
        if len(arrived) < len(sent):
            raise SystemExit(f"bench.streams: {len(sent) - len(arrived)} of {len(sent)} submissions got no decision")
        ms = sorted((arrived[w] - sent[w]) * 1000 for w in sent)
        cpu_us = (_cpu_s(worker.proc.pid) - cpu0) / n * 1e6
    p99 = ms[int(0.99 * (len(ms) - 1))]
    return {"p50_ms": statistics.median(ms), "p99_ms": p99, "max_ms": ms[-1], "cpu_us": cpu_us}


def _metric_or_zero(worker: WorkerProc, name: str) -> float:
    """Return a worker's metric, or 0 while its HTTP endpoint is not up yet."""
    try:
        return worker.metric(name)
    except OSError:
        return 0.0


_PLAIN_CONSUMER = """
import asyncio, signal, sys
from aiokafka import AIOKafkaConsumer

async def consume() -> None:
    bootstrap, topic, group, instance, session_ms = sys.argv[1:6]
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance or None,
                         session_timeout_ms=int(session_ms), heartbeat_interval_ms=1000, rebalance_timeout_ms=1000,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await c.start()
    while not any((await c.getmany(timeout_ms=20)).values()):
        pass
    print("first", flush=True)
    await stop.wait()
    await c.stop()

asyncio.run(consume())
"""


def _plain_first_record(cmd: list[str]) -> tuple[subprocess.Popen[str], float]:
    """Start a plain consumer process; return it and the seconds from its start to its first record."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "first":
        proc.kill()
        raise RuntimeError("the plain consumer exited before its first record")
    return proc, time.perf_counter() - t0


def hand_back(bootstrap: str, topic: str, signal_name: str, static: bool) -> float:
    """Return the floor: a plain aiokafka consumer process's seconds from start to first record after another left.

    The previous member, the same kind of process in the same group (static or not), was just killed
    or stopped with ``signal_name``.
    """
    group = f"bench-floor-{time.monotonic_ns()}"
    cmd = [sys.executable, "-c", _PLAIN_CONSUMER, bootstrap, topic, group, "floor-0" if static else "",
           str(SESSION_S * 1000)]
    first, _ = _plain_first_record(cmd)
    first.send_signal(signal.SIGKILL if signal_name == "SIGKILL" else signal.SIGTERM)
    first.wait(timeout=30)
    second, seconds = _plain_first_record(cmd)
    second.terminate()
    second.wait(timeout=30)
    return seconds


def restart(bootstrap: str, tmp: Path, signal_name: str, static: bool) -> dict[str, float]:
    """Return seconds from a restarted worker's start to its first record, the floor, and inputs processed twice.

    Inputs processed twice: those the stopped process applied after its last durable checkpoint (what
    the restarted one resumes after), sampled just before the signal.
    """
    events = checkpoint_heavy().inputs[:N_THROUGHPUT]
    applied = 'gpuledger_worker_records_total{outcome="applied"}'
    checkpointed = "gpuledger_worker_checkpointed_offset"
    extra = [*FAST_GROUP, *(["--instance-id", f"bench-{time.monotonic_ns()}"] if static else [])]
    with running_worker(bootstrap, tmp, extra=extra) as worker:
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
        floor = hand_back(bootstrap, worker.topics.events, signal_name, static)
    redone = before - (resumed + 1) if signal_name == "SIGKILL" else float("nan")
    return {"seconds": seconds, "floor": floor, "redone": redone, "resumed": resumed, "mark_before": mark}


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


def leader_death(tmp: Path, rate: int = 200, seconds: float = 25.0, kill_after_s: float = 5.0) -> dict[str, float]:
    """Return how long decisions stop after the events partition's leader dies, on three nodes, and what was lost."""
    from tests.streams.harness import decoded, namespace, read_topic

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # a dead leader is the point: no retry warnings
    with kafka_broker(tmp / "three-nodes", 3, use_env=False) as handle:
        cluster: KafkaCluster | None = handle.cluster
        assert cluster is not None
        setup, subs = _big_cluster(int(rate * seconds))
        prefix, app_id = namespace()
        worker = WorkerProc(handle.bootstrap, prefix, app_id, 1, FAST_GROUP, tmp / f"{app_id}.log",
                            replication_factor=3)
        worker.create_topics()
        try:
            produce_events(handle.bootstrap, worker.topics.events, setup)
            worker.start()
            worker.wait_ready()
            wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= len(setup), timeout_s=60)
            victim = cluster.leader(worker.topics.events, 0)
            sent, arrived, killed_at = asyncio.run(_paced_run(
                handle.bootstrap, worker.topics.events, worker.topics.decisions, subs, rate, kill_after_s, victim.kill
            ))
            records = decoded(read_topic(handle.bootstrap, worker.topics.decisions, idle_s=3, timeout_s=120))
        finally:
            worker.stop()
    assert killed_at is not None
    after = [arrived[w] for w, t in sent.items() if t >= killed_at and w in arrived]
    times = sorted(arrived.values())
    r = {
        "flowing_after_s": min(after) - killed_at if after else float("nan"),
        "max_gap_s": max((b - a for a, b in itertools.pairwise(times)), default=0.0),
    }
    decided = [e.workload_id for e in records if e.type_name == "SchedulingDecision"]
    r["lost"] = len({s.workload_id for s in subs} - set(decided))
    r["twice"] = len(decided) - len(set(decided))
    r["submissions"] = len(subs)
    return r


def _sections() -> list[str]:
    chosen = [x.strip() for x in os.environ.get("BENCH_STREAMS", ",".join(SECTIONS)).split(",") if x.strip()]
    unknown = [x for x in chosen if x not in SECTIONS]
    if unknown:
        raise SystemExit(f"BENCH_STREAMS: unknown section(s) {unknown} (expected some of {', '.join(SECTIONS)})")
    return chosen


def _print_throughput(title: str, t: dict[str, float]) -> None:
    print(f"throughput ({title}):")
    if "raw_aiokafka" in t:
        print(f"  raw aiokafka consumer         {t['raw_aiokafka']:>9,.0f}/s  (baseline)")
    print(
        f"  gpuledger worker              {t['worker']:>9,.0f}/s  ({t['worker'] / t['service_only']:.0%} of the "
        f"service alone; targets >= 10,000/s and >= 25%; busy {t['worker_busy_share']:.0%} of the time)"
    )
    if "plain_loop" in t:
        print(f"  plain aiokafka loop, same service {t['plain_loop']:>5,.0f}/s  "
              f"({t['plain_loop'] / t['raw_aiokafka']:.1%} of raw; bench only: no checkpoints or commits)")
    print(f"  worker's own work, core apart {t['worker_outside_core']:>9,.0f}/s  (decode, occupancy, emit, checkpoint)")
    print(f"  decision service, no Kafka    {t['service_only']:>9,.0f}/s  "
          f"({t['service_outside_core']:,.0f}/s with the core apart)")
    print(f"  occupancy processor alone     {t['occupancy_only']:>9,.0f}/s  (ledger events: inputs and outputs)")


def main() -> None:
    """Run the measurements and print them."""
    sections = _sections()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as d, kafka_broker(Path(d) / "one-node") as broker:
        tmp = Path(d)
        print(f"broker: {broker.kind} at {broker.bootstrap}")
        if "throughput" in sections:
            events = checkpoint_heavy().inputs[:N_THROUGHPUT]
            _print_throughput(f"{len(events):,} events of a busy 32-GPU cluster",
                              throughput(broker.bootstrap, tmp, events))
        if "demo" in sections:
            events = demo_month()
            _print_throughput(f"the demo month, {len(events):,} inputs",
                              throughput(broker.bootstrap, tmp, events, baselines=False))
        if "equivalence" in sections:
            print("\n".join(equivalence(broker.bootstrap, tmp)))
        if "restart" in sections:
            for static in (False, True):
                for sig in ("SIGKILL", "SIGTERM"):
                    r = restart(broker.bootstrap, tmp, sig, static)
                    kind = "static member" if static else "dynamic member"
                    print(f"restart after {sig}, {kind}: first record {r['seconds']:.2f} s after the new process "
                          f"started; floor (plain aiokafka consumer process) {r['floor']:.2f} s; "
                          f"{r['seconds'] / r['floor']:.2f}x (targets <= 3 s, <= 1.5x); resumed after offset "
                          f"{r['resumed']:.0f} (last checkpoint seen before the signal: {r['mark_before']:.0f}); "
                          f"inputs processed twice: {r['redone']:.0f}")
        if "restore" in sections:
            for n in N_CHECKPOINTS:
                r = restore(broker.bootstrap, tmp, n)
                print(f"restore with {n:,} checkpoints of {r['blob_bytes'] / 1000:.0f} kB on the partition: "
                      f"{r['restore_s']:.2f} s reading them at the assignment, ready {r['ready_s']:.2f} s after start")
        if "latency" in sections:
            runs = [(RATE, N_LATENCY)] * LATENCY_RUNS + [(RATE // 4, N_LATENCY // 2), (RATE // 10, N_LATENCY // 10)]
            for rate, n in runs:
                lat = latency(broker.bootstrap, tmp, rate, n)
                print(
                    f"latency at {rate}/s ({n} submissions): p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms, "
                    f"max {lat['max_ms']:.1f} ms (target at 1000/s: p99 < 100 ms); "
                    f"worker CPU {lat['cpu_us']:.0f} us per submission; load {os.getloadavg()[0]:.1f}"
                )
    if "leader" in sections:
        with tempfile.TemporaryDirectory() as d:
            r = leader_death(Path(d))
        print(f"leader's broker SIGKILLed (three nodes, 200 submissions/s): decisions flow again "
              f"{r['flowing_after_s']:.2f} s after the kill (longest gap between decisions {r['max_gap_s']:.2f} s); "
              f"{r['submissions']:.0f} submissions, {r['lost']:.0f} lost, {r['twice']:.0f} decided twice")


if __name__ == "__main__":
    main()
