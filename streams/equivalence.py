"""Stream equivalence: a run's inputs through Kafka and the worker give the decisions ``gpuledger replay`` wrote.

``check`` publishes the inputs of a run directory (the facts from outside the core) to fresh topics,
runs a worker on them in this process, reads the decisions topic back and compares it with the
run's own outputs: counts, missing, duplicated and changed decisions (same id, other content), and
decisions the run does not have. With ``idle_clock_rate`` 0 the worker plays no wake-up without an
input, so the run's outputs after its last input are reported as not due rather than missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core import Knobs
from ledger.events import Event, to_us
from ledger.streams.config import WorkerConfig
from ledger.streams.publisher import event_record
from ledger.streams.security import KafkaSecurity
from ledger.streams.sources import is_core_output, read_events
from ledger.streams.topics import TopicNames, ensure_topics, worker_topics

__all__ = ["Comparison", "check", "check_offline", "compare"]


@dataclass
class Comparison:
    """How the worker's decisions differ from the run's."""

    expected: int
    got: int
    not_due: int = 0
    missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    out_of_order: bool = False

    @property
    def equal(self) -> bool:
        """Return whether the worker decided exactly what the run decided."""
        return not (self.missing or self.duplicated or self.mismatched or self.unexpected or self.out_of_order)

    def lines(self) -> list[str]:
        """Return the report, one line per figure (ids: the first five of each kind)."""
        out = [f"decisions: expected {self.expected:,}, got {self.got:,}"]
        if self.not_due:
            out.append(f"not due: {self.not_due:,} (after the last input; the worker's idle clock is off)")
        for name in ("missing", "duplicated", "mismatched", "unexpected"):
            ids: list[str] = getattr(self, name)
            shown = f" ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''})" if ids else ""
            out.append(f"{name}: {len(ids):,}{shown}")
        out.append(f"order: {'differs' if self.out_of_order else 'same'}")
        out.append("equivalent" if self.equal else "NOT equivalent")
        return out


def compare(expected: list[Event], got: list[Event], inputs: list[Event], idle_clock_rate: float) -> Comparison:
    """Compare the decisions a worker emitted with a run's outputs."""
    not_due = 0
    if idle_clock_rate == 0 and inputs:
        last = max(to_us(e.time) for e in inputs)
        due = [e for e in expected if to_us(e.time) <= last]
        not_due, expected = len(expected) - len(due), due
    want = {e.event_id: e for e in expected}
    seen: dict[str, int] = {}
    for e in got:
        seen[e.event_id] = seen.get(e.event_id, 0) + 1
    have = {e.event_id: e for e in got}
    result = Comparison(len(expected), len(got), not_due)
    result.missing = [i for i in want if i not in have]
    result.duplicated = [i for i, n in seen.items() if n > 1]
    result.mismatched = [i for i, e in have.items() if i in want and want[i] != e]
    result.unexpected = [i for i in have if i not in want]
    result.out_of_order = [e.event_id for e in got if e.event_id in want] != [i for i in want if i in have]
    return result


def check_offline(
    events: Iterable[Event], *, knobs: Knobs, idle_clock_rate: float = 1e9, batch: int = 1000
) -> Comparison:
    """Feed a run's inputs through the worker's decision service without a broker; compare with the run's outputs.

    The records go in as the worker takes them: encoded, in batches of ``batch``, the timer asked between
    batches while more input waits (so it closes nothing early), then once more after the last input.
    """
    from ledger.streams.service import DecisionService, Record

    events = list(events)
    inputs = [e for e in events if not is_core_output(e)]
    expected = [e for e in events if is_core_output(e)]
    records: list[Record] = [(value, key, 0, i) for i, (key, value) in enumerate(event_record(e) for e in inputs)]
    service = DecisionService(knobs, idle_clock_rate=idle_clock_rate, clock=lambda: 0.0, partitions=1)
    got: list[Event] = []
    for lo in range(0, len(records), batch):
        got.extend(e for outcome in service.process_batch(records[lo : lo + batch]) for e in outcome.emit)
        service.hold({0})  # records still wait on the partition: the cluster is not idle
        got.extend(e for tick in service.due() for e in tick.emit)
    got.extend(e for tick in service.due(now=float("inf")) for e in tick.emit)
    return compare(expected, got, inputs, idle_clock_rate)


async def check(
    run_dir: Path, bootstrap: str, *, knobs: Knobs, idle_clock_rate: float = 1e9, partitions: int = 1,
    timeout_s: float = 600.0, quiet_s: float = 3.0, security: KafkaSecurity | None = None,
) -> Comparison:
    """Publish a run's inputs to fresh topics, run a worker on them, and compare its decisions with the run's."""
    from aiokafka import AIOKafkaProducer

    from ledger.streams.driver import Worker

    events = list(read_events(run_dir))
    inputs = [e for e in events if not is_core_output(e)]
    expected = [e for e in events if is_core_output(e)]
    security = security or KafkaSecurity.from_env()
    tag = f"check{os.getpid()}x{time.monotonic_ns() % 10**9}"
    cfg = WorkerConfig(
        bootstrap=bootstrap, knobs=knobs, partitions=partitions, app_id=f"gpuledger-{tag}", topic_prefix=f"{tag}.",
        http_port=0, idle_clock_rate=idle_clock_rate, security=security,
    )
    topics = TopicNames(cfg.topic_prefix)
    await ensure_topics(bootstrap, worker_topics(partitions, cfg.app_id, cfg.topic_prefix), security=security)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=512 * 1024,
                                **security.aiokafka_kwargs())
    await producer.start()
    try:
        for key, value in (event_record(e) for e in inputs):
            await producer.send(topics.events, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()
    worker = Worker(cfg)
    task = asyncio.ensure_future(worker.run())

    def consumed() -> bool:  # every input read and decided (the topics are fresh: offsets count from 0)
        return sum(worker.next_offset.values()) >= len(inputs) and not worker.unsettled

    try:
        got = await _read_decisions(bootstrap, topics.decisions, security, timeout_s, quiet_s, task, consumed)
    finally:
        worker.stopping.set()
        with contextlib.suppress(Exception):
            await task
    return compare(expected, got, inputs, idle_clock_rate)


async def _read_decisions(
    bootstrap: str, topic: str, security: KafkaSecurity, timeout_s: float, quiet_s: float, worker: asyncio.Future[int],
    consumed: Callable[[], bool],
) -> list[Event]:
    """Read the decisions topic until quiet for ``quiet_s`` once the worker consumed every input (or the timeout).

    Quiet alone is not the end: a worker on a busy machine may pause longer than that mid-stream.
    """
    from aiokafka import AIOKafkaConsumer

    from ledger.codec import decode

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                         **security.aiokafka_kwargs())
    await c.start()
    records = []
    try:
        deadline = time.monotonic() + timeout_s
        last = time.monotonic()
        while time.monotonic() < deadline and not worker.done():
            batch = await c.getmany(timeout_ms=200, max_records=10_000)
            got = [m for part in batch.values() for m in part]
            records.extend(got)
            if got:
                last = time.monotonic()
            elif consumed() and time.monotonic() - last >= quiet_s:
                break
    finally:
        await c.stop()
    records.sort(key=lambda m: (m.partition, m.offset))
    return [decode(m.value) for m in records]
