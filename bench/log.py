"""Append a million events to the embedded log and read them back, against bare fastavro on the same records.

Baseline: ``fastavro.writer`` writes the very same (record name, record) pairs to one container
file (one fsync at the end) and ``fastavro.reader`` reads them back as (name, dict) pairs.
The log does more on both sides: on append it validates every event with pydantic, checks Avro
integer ranges, de-duplicates event_ids, writes one block per batch (with encoders compiled
from the schemas, not fastavro) and fsyncs each batch; on read it checks segment framing and
rebuilds event objects. Encoding the blocks alone is also timed against a fastavro Writer.
The target is at least half of the baseline's rate, append and read together.

Then the log write of a month: the full demo month is replayed once (untimed) and its events
written again to a new log by the replay's own log writer, in the driver's batches, the outside
events (submissions, the tree, capacity) validated as the replay validates them, each run in its
own process (``--month-runs``, default 3; ``--month none`` to skip). With ``BENCH_BASELINE=DIR``
(another checkout with its own ``.venv``) the same writes run with that build in the same sitting,
interleaved with ours, and must write the same bytes: medians and ranges, and ours / baseline.

``python -m bench.log --events 200000 --batch 10000 --rounds 2`` for other sizes.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
from fastavro.write import Writer

from ledger import events as ev
from ledger.codec import union_schema
from ledger.log import EventLog
from ledger.log.checks import FULL_NAMES
from ledger.log.container import BlockEncoder

T0 = datetime(2026, 3, 2, tzinfo=UTC)
TEAMS = ["ai2/olmo/pretrain", "ai2/olmo/eval", "ai2/tulu", "ai2/molmo", "ai2/infra"]


def cluster_month(n: int, seed: int = 7) -> Iterator[ev.Event]:
    """Yield n events shaped like a busy cluster's log: mostly workload lifecycles, some tree and host facts."""
    rng = random.Random(seed)
    c = "ai2-jupiter"
    seq = 0

    def common(t: datetime) -> dict[str, Any]:
        nonlocal seq
        seq += 1
        return {"event_id": f"{c}/e{seq}", "cluster": c, "time": t}

    t = T0
    yield ev.ClusterCapacityChanged(**common(t), gpus=1024, gpus_per_node=8)
    yield ev.BudgetNodeDefined(**common(t), path="ai2", share=1.0, managers=("admin",), set_by="admin")
    for team in TEAMS:
        yield ev.BudgetNodeDefined(**common(t), path=team, parent=team.rsplit("/", 1)[0], share=1.0, set_by="admin")
    produced = 2 + len(TEAMS)
    w = 0
    while produced < n:
        w += 1
        wid = f"w{w}"
        t += timedelta(seconds=rng.randint(1, 90))
        gpus = rng.choice([1, 8, 8, 16, 64, 256])
        hosts = tuple(f"{c}-n{rng.randrange(128):03d}" for _ in range(max(1, gpus // 8)))
        lifecycle: list[ev.Event] = [
            ev.WorkloadSubmitted(
                **common(t), workload_id=wid, budget=rng.choice(TEAMS), user=f"u{rng.randrange(60)}", gpus=gpus,
                min_runtime_s=rng.choice([0, 900, 3600, 14400]), resumable=rng.random() < 0.8,
                kind=rng.choice(["batch", "training", "debug", "interactive"]), work_s=rng.randint(600, 86400),
                checkpoint_interval_s=1800, restart_s=300,
            ),
            ev.SchedulingDecision(
                **common(t), action="start", workload_id=wid, nodes=hosts, reason="first in fair-share order",
                budget_ratio=round(rng.random(), 3), queue_position=1, effective_time=t,
            ),
            ev.WorkloadStarted(
                **common(t), workload_id=wid, nodes=hosts, gpus=gpus, allocated=True,
                protected_until=t + timedelta(hours=1),
            ),
        ]
        for k in range(rng.randint(1, 6)):
            lifecycle.append(ev.CheckpointWritten(**common(t), workload_id=wid, progress_s=1800 * (k + 1)))
        if rng.random() < 0.15:
            lifecycle.append(ev.WorkloadPreempted(**common(t), workload_id=wid, reason="fair_share", preempted_by="w1"))
            lifecycle.append(ev.WorkloadRequeued(**common(t), workload_id=wid))
        if rng.random() < 0.02:
            lifecycle.append(ev.HostHealthChanged(**common(t), host=hosts[0], state="unhealthy", reason="xid 79"))
        lifecycle.append(ev.WorkloadCompleted(**common(t), workload_id=wid, outcome="succeeded"))
        yield from lifecycle[: n - produced]
        produced += len(lifecycle)


Timing = tuple[float, float, float, float]  # write wall, read wall, write CPU, read CPU (seconds)


def _records_read(path: Path) -> float:
    start = time.perf_counter()
    deque(EventLog(path, readonly=True).records(), maxlen=0)
    return time.perf_counter() - start


def _bare(records: list[tuple[str, dict[str, Any]]], path: Path) -> Timing:
    schema = union_schema()
    wall, cpu = time.perf_counter(), time.process_time()
    with open(path, "wb") as fh:
        fastavro.writer(fh, schema, records)
        fh.flush()
        os.fsync(fh.fileno())
    wrote, wrote_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    with open(path, "rb") as fh:
        deque(fastavro.reader(fh, return_record_name=True), maxlen=0)
    return wrote, time.perf_counter() - wall, wrote_cpu, time.process_time() - cpu


def _ours(events: list[ev.Event], path: Path, batch: int) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    with EventLog(path) as log:
        for i in range(0, len(events), batch):
            log.append(events[i : i + batch])
    wrote, wrote_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    deque(EventLog(path, readonly=True), maxlen=0)
    return wrote, time.perf_counter() - wall, wrote_cpu, time.process_time() - cpu


def _encoding_alone(records: list[tuple[str, dict[str, Any]]], batch: int) -> tuple[float, float]:
    """Return CPU seconds to encode the records as blocks: (the log's compiled encoder, a fastavro Writer)."""
    sync = bytes(16)
    batches = [records[i : i + batch] for i in range(0, len(records), batch)]
    encoder = BlockEncoder(union_schema(), sync)
    cpu = time.process_time()
    compiled = [encoder.encode(b) for b in batches]
    ours = time.process_time() - cpu
    buf = io.BytesIO()
    writer = Writer(buf, union_schema(), codec="null", sync_marker=sync, sync_interval=1 << 62)
    buf.seek(0)
    buf.truncate(0)
    blocks = []
    cpu = time.process_time()
    for b in batches:  # as the log encoded its blocks before its encoders were compiled
        for record in b:
            writer.write(record)
        writer.flush()
        blocks.append(buf.getvalue())
        buf.seek(0)
        buf.truncate(0)
    theirs = time.process_time() - cpu
    if compiled != blocks:
        raise SystemExit("bench.log: the compiled encoder's blocks differ from fastavro's")
    return ours, theirs


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1000:8.1f}k events/s ({seconds:6.2f} s)"


def run(n: int, batch: int, rounds: int) -> float:
    """Run the comparison; print the figures; return ours/bare for append+read together."""
    print(f"building {n:,} events (a realistic mix of {len(ev.EVENT_TYPES) - 1} event types) ...", flush=True)
    events = list(cluster_month(n))
    mix: dict[str, int] = {}
    for e in events:
        mix[e.type_name] = mix.get(e.type_name, 0) + 1
    print("  mix: " + ", ".join(f"{k} {v / n:.0%}" for k, v in sorted(mix.items(), key=lambda kv: -kv[1])))
    records = [(FULL_NAMES[e.type_name], e.__dict__) for e in events]
    work = Path(tempfile.mkdtemp(prefix="gpuledger-bench-"))
    try:
        best_bare: Timing = (float("inf"),) * 4
        best_ours: Timing = (float("inf"),) * 4
        for r in range(rounds):
            bare = _bare(records, work / f"bare{r}.avro")
            ours = _ours(events, work / f"log{r}", batch)
            best_bare = min(best_bare, bare, key=lambda t: t[0] + t[1])
            best_ours = min(best_ours, ours, key=lambda t: t[0] + t[1])
            os.unlink(work / f"bare{r}.avro")
        records_read = min(_records_read(work / f"log{r}") for r in range(rounds))
        encoded = min(_encoding_alone(records, batch) for _ in range(rounds))
        check = EventLog(work / "log0", readonly=True)
        same = len(check) == n and all(a == b for a, b in zip(check, events, strict=True))
        segments = len(list((work / "log0").glob("*.avro")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"events {n:,}, batches of {batch:,} (one fsync each), {segments} segments, best of {rounds} round(s)")
    print(f"  bare fastavro  write {_rate(n, best_bare[0])}   read {_rate(n, best_bare[1])}")
    print(f"  gpuledger log  append {_rate(n, best_ours[0])}  read {_rate(n, best_ours[1])}")
    bare_total, ours_total = best_bare[0] + best_bare[1], best_ours[0] + best_ours[1]
    ratio = bare_total / ours_total
    print(f"  log records() read (plain dicts, for projections) {_rate(n, records_read)}")
    print(f"  append+read: log {_rate(n, ours_total)}, bare {_rate(n, bare_total)}")
    print(f"  ratio log/bare: {ratio:.2f} (target >= 0.50); "
          f"append {best_bare[0] / best_ours[0]:.2f}, read {best_bare[1] / best_ours[1]:.2f}")
    cpu_ratio = (best_bare[2] + best_bare[3]) / (best_ours[2] + best_ours[3])
    print(f"  CPU-time ratio (less sensitive to a busy machine): {cpu_ratio:.2f}; CPU µs/event: "
          f"append {best_ours[2] / n * 1e6:.1f} (bare write {best_bare[2] / n * 1e6:.1f}), "
          f"read {best_ours[3] / n * 1e6:.1f} (bare {best_bare[3] / n * 1e6:.1f})")  # fmt: skip
    print(f"  encoding the blocks alone (CPU, byte-identical): compiled {encoded[0] / n * 1e6:.2f} µs/event, "
          f"fastavro Writer {encoded[1] / n * 1e6:.2f} µs/event ({encoded[1] / encoded[0]:.1f}× faster)")  # fmt: skip
    print(f"  events read back equal the events appended: {same}")
    if not same:
        raise SystemExit("bench.log: events read back differ from the events appended")
    return ratio


# The log write of a month, in one process: the events read from a log (untimed), written again by the
# replay's log writer in the driver's batches, the outside events' positions found beforehand (untimed).
_MONTH_WRITE = """
import json, shutil, sys, time
from ledger.events import (AllocationChanged, BudgetNodeDefined, ClusterCapacityChanged, HostHealthChanged,
                           WorkloadSubmitted)
from ledger.gcpause import paused_gc
from ledger.log import EventLog
from ledger.replay.logwriter import LogWriter
source, out, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
outside = (AllocationChanged, BudgetNodeDefined, ClusterCapacityChanged, HostHealthChanged, WorkloadSubmitted)
events = list(EventLog(source, readonly=True))
parts = [events[i:i + batch] for i in range(0, len(events), batch)]
positions = [[j for j, e in enumerate(part) if isinstance(e, outside)] for part in parts]
shutil.rmtree(out, ignore_errors=True)
log = EventLog(out)
writer = LogWriter(log)
with paused_gc():
    t0, c0 = time.perf_counter(), time.process_time()
    for part, where in zip(parts, positions):
        writer.write(part, where)
    log.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "events": len(events)}))
"""


def month(runs: int) -> None:
    """Replay the full demo month once, then time its log write (ours, and the baseline's when named)."""
    import json
    import statistics
    import subprocess
    import sys

    from ledger.core.knobs import Knobs
    from ledger.replay.demo_month import FULL, generate
    from ledger.replay.driver import ReplayDriver
    from ledger.replay.run import inputs_from_budgets, replay

    baseline = os.environ.get("BENCH_BASELINE")
    work = Path(tempfile.mkdtemp(prefix="gpuledger-bench-month-", dir=os.environ.get("BENCH_TMP")))
    try:
        print("replaying the full demo month once (untimed) ...", flush=True)
        month_ = generate(7, mix=FULL)
        inputs = inputs_from_budgets(month_.budgets, list(month_.submissions), start=month_.start)
        replay(inputs, Knobs(policy="fairshare", gpus_per_node=inputs.gpus_per_node), work / "run")
        import inspect

        batch = int(inspect.signature(ReplayDriver).parameters["batch"].default)  # the driver's batches
        pythons = {"ours": sys.executable}
        if baseline:
            pythons["baseline"] = str(Path(baseline) / ".venv" / "bin" / "python")
        got: dict[str, list[dict[str, float]]] = {who: [] for who in pythons}
        for _ in range(runs):
            for who, python in pythons.items():
                done = subprocess.run(
                    [python, "-c", _MONTH_WRITE, str(work / "run" / "events"), str(work / who), str(batch)],
                    capture_output=True, text=True,
                )  # fmt: skip
                if done.returncode:
                    raise SystemExit(f"bench.log: the month's log write failed ({who}):\n{done.stderr[-3000:]}")
                got[who].append(json.loads(done.stdout.strip().splitlines()[-1]))
        events = int(got["ours"][0]["events"])
        print(f"log write of the full demo month: {events:,} events in batches of {batch:,}, {runs} runs each, "
              f"interleaved, median (min-max); load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        for who, results in got.items():
            walls, cpus = [r["wall"] for r in results], [r["cpu"] for r in results]
            print(f"  {who:<9} {statistics.median(walls):.2f} s wall ({min(walls):.2f}-{max(walls):.2f}), "
                  f"{statistics.median(cpus):.2f} CPU s ({min(cpus):.2f}-{max(cpus):.2f})")  # fmt: skip
        if baseline:
            ratio = {k: statistics.median(r[k] for r in got["ours"]) / statistics.median(r[k] for r in got["baseline"])
                     for k in ("wall", "cpu")}  # fmt: skip
            names = sorted(p.name for p in (work / "ours").iterdir() if p.suffix in (".avro", ".ids"))
            same = all((work / "ours" / n).read_bytes() == (work / "baseline" / n).read_bytes() for n in names)
            print(f"  ours / baseline: {ratio['wall']:.2f} wall, {ratio['cpu']:.2f} CPU (target <= 0.50); "
                  f"same segment and id files: {same}")  # fmt: skip
            if not same:
                raise SystemExit("bench.log: the month's logs of ours and the baseline differ")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Run the log benchmark (1,000,000 events by default), then the log write of the demo month."""
    p = argparse.ArgumentParser(prog="python -m bench.log", description=__doc__)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--month", choices=("full", "none"), default="full")
    p.add_argument("--month-runs", type=int, default=3)
    args = p.parse_args(argv if argv is not None else [])
    if args.events:
        run(args.events, args.batch, args.rounds)
    if args.month != "none":
        month(args.month_runs)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
