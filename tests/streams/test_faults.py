"""Faults the streaming path survives: a worker killed at random, and a topic full of garbage."""

from __future__ import annotations

import io
import math
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import pytest

from ledger.codec import MAGIC, encode, fingerprint, parsed_schemas, raw_schemas, to_record
from ledger.core import Knobs
from ledger.events import Event
from ledger.streams.deadletter import parse_headers
from ledger.streams.service import DecisionService
from tests.streams.harness import decoded, produce, produce_events, read_topic, running_worker, wait_for
from tests.streams.scenarios import checkpoint_heavy, lab_month
from tests.streams.test_worker import FAST_GROUP, table

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def reference(events: list[Event], *, drain: bool = False) -> tuple[list[Event], dict[str, dict[str, int]]]:
    """Return the outputs and the occupancy view of one uninterrupted pass (no broker).

    The last input's instant closes once the stream is quiet, as the worker's timer closes it; with
    ``drain``, every remaining wake-up follows, as the history-replay timer plays them once the stream is
    drained (and the replay at the end of its input).
    """
    svc = DecisionService(Knobs(), idle_clock_rate=1e9 if drain else 0.0)
    outputs = [o for i, e in enumerate(events) for o in svc.process(encode(e), e.cluster.encode(), 0, i).emit]
    outputs += [o for tick in svc.due(now=float("inf")) for o in tick.emit]
    (st,) = svc.states.values()
    now = st.occupancy.now_us
    view = {
        f"{st.cluster}|{path}": {"allocated_gpu_s": o.allocated_gpu_s, "unallocated_gpu_s": o.unallocated_gpu_s,
                                 "as_of_us": now}
        for path, o in st.occupancy.totals(now).items()
    }
    return outputs, view


@pytest.mark.parametrize("rate", ["0", "1e9"], ids=["live-clock-off", "history-replay"])
def test_a_worker_killed_ten_times_ends_exactly_like_an_uninterrupted_run(
    kafka_bootstrap: str, tmp_path: Path, rate: str
) -> None:
    inputs = checkpoint_heavy().inputs[:30_000]
    assert len(inputs) == 30_000
    # at rate 0 exactly the outputs the inputs cause; at the history-replay rate also every wake-up after them
    expected_outputs, expected_view = reference(inputs, drain=rate != "0")
    rng = random.Random(2026)
    extra = [*FAST_GROUP, "--idle-clock-rate", rate, "--idle-after", "1", "--checkpoint-every", "500"]
    with running_worker(kafka_bootstrap, tmp_path, extra=extra) as worker:
        produce_events(kafka_bootstrap, worker.topics.events, inputs)
        kills = 0
        while kills < 10:  # each restart costs a process start and a group join: ten random kills suffice
            worker.start()
            worker.wait_ready()
            if worker.metric("gpuledger_worker_checkpointed_offset") >= len(inputs) - 1:
                break  # every input is checkpointed: nothing left to interrupt
            wait_for(lambda: worker.metric("gpuledger_worker_records_total") > 0, timeout_s=30, every_s=0.05)
            # SIGKILL: mid-batch, mid-checkpoint, anywhere; within 0.1 s of a restart, so that even a fast
            # worker is killed well over five times before it has checkpointed every input (with 0.3 s a
            # faster core let it finish after four)
            worker.kill_after(rng.uniform(0.0, 0.1))
            kills += 1
        print("kills:", kills)
        assert kills >= 5
        worker.kill()
        worker.start()
        worker.wait_ready()
        try:
            wait_for(lambda: table(worker) == expected_view, timeout_s=400, every_s=0.5)
        finally:
            got_view = table(worker)
            differ = {k: (v, got_view.get(k)) for k, v in expected_view.items() if got_view.get(k) != v}
            print("nodes that differ:", len(differ), list(differ.items())[:3])
        assert worker.metric("gpuledger_worker_late_events_total") == 0
        records = read_topic(kafka_bootstrap, worker.topics.decisions, want=len(expected_outputs), idle_s=2)
        got = decoded(records)
        assert len({e.event_id for e in got}) == len(got), "an output was emitted twice"
        assert got == expected_outputs


def _invalid_values(rng: random.Random, event: Event) -> bytes:
    """Return valid Avro of ``event``'s schema whose values break a domain rule."""
    record = to_record(event)
    mutations: list[tuple[str, Any]] = [
        ("gpus", -rng.randrange(1, 64)),
        ("min_runtime_s", -1),
        ("time", datetime(2150, 1, 1, tzinfo=UTC)),
        ("budget", "lab//" + "x" * rng.randrange(1, 5)),
        ("workload_id", ""),
        ("user", ""),
    ]
    field, value = rng.choice(mutations)
    record[field] = value
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(raw_schemas()[event.type_name]))
    fastavro.schemaless_writer(buf, parsed_schemas()[event.type_name], record)
    return buf.getvalue()


def fuzzed(rng: random.Random, n: int, template: Event) -> list[bytes]:
    """Return ``n`` records that must all be refused: random bytes, unknown fingerprints, invalid values."""
    good = encode(template)
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append(rng.randbytes(rng.randrange(0, 120)))
        elif kind == 1:
            out.append(MAGIC + rng.randbytes(8) + good[10:])
        else:
            out.append(_invalid_values(rng, template))
    return out


def test_ten_thousand_fuzzed_records_go_to_the_dead_letter_topic_and_change_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    valid = lab_month().inputs[:600]
    submission = next(e for e in valid if e.type_name == "WorkloadSubmitted")
    garbage = fuzzed(random.Random(99), 10_000, submission)
    expected_outputs, expected_view = reference(valid)
    with running_worker(kafka_bootstrap, tmp_path, extra=FAST_GROUP) as worker:
        produce_events(kafka_bootstrap, worker.topics.events, valid[:300])
        produce(kafka_bootstrap, worker.topics.events, [(b"demo", g) for g in garbage])
        produce_events(kafka_bootstrap, worker.topics.events, valid[300:])
        worker.start()
        worker.wait_ready()
        letters = read_topic(kafka_bootstrap, worker.topics.deadletter, want=len(garbage), idle_s=2)
        assert worker.alive and worker.get("/healthz")[0] == 200
        assert len(letters) == len(garbage)
        headers = [parse_headers(m.headers) for m in letters]
        assert all(h["reason"] for h in headers)
        sources = [int(h["source"].rsplit("/", 1)[1]) for h in headers]
        assert sources == list(range(300, 300 + len(garbage)))  # exactly the fuzzed offsets, each once
        assert [m.value for m in letters] == garbage  # the original bytes, for inspection
        reasons = " ".join(h["reason"] for h in headers)
        for kind in ("DecodeError", "fingerprint", "EventValidationError"):
            assert kind in reasons
        records = read_topic(kafka_bootstrap, worker.topics.decisions, want=len(expected_outputs), idle_s=2)
        assert decoded(records) == expected_outputs
        wait_for(lambda: table(worker) == expected_view, timeout_s=30)
        assert worker.metric("gpuledger_worker_deadletters_total") == len(garbage)
        assert not math.isnan(worker.metric("gpuledger_worker_events_per_second"))


def test_dead_letters_sent_before_a_crash_are_not_sent_again_after_the_restart(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    valid = lab_month().inputs[:400]
    submission = next(e for e in valid if e.type_name == "WorkloadSubmitted")
    garbage = fuzzed(random.Random(7), 900, submission)
    # a checkpoint every 300 records, none by time: the crash comes after the last one, so the bad records
    # after it are processed again, and so are those between it and the committed offset
    extra = [*FAST_GROUP, "--checkpoint-every", "300", "--checkpoint-interval", "3600", "--batch-max", "100"]
    with running_worker(kafka_bootstrap, tmp_path, extra=extra) as worker:
        produce_events(kafka_bootstrap, worker.topics.events, valid)
        produce(kafka_bootstrap, worker.topics.events, [(b"demo", g) for g in garbage])
        total = len(valid) + len(garbage)
        worker.start()
        worker.wait_ready()
        wait_for(lambda: worker.metric("gpuledger_worker_records_total") >= total, timeout_s=120, every_s=0.1)
        # checkpoints are written in the background, each of what was processed when it began, so how many
        # there are depends on how fast they land; once all is processed the last covers every record but
        # fewer than --checkpoint-every, and at least two were written (at 300 and after)
        wait_for(lambda: worker.metric("gpuledger_worker_checkpointed_offset") >= total - 300, timeout_s=60,
                 every_s=0.1)
        assert worker.metric("gpuledger_worker_checkpoints_total") >= 2
        worker.kill()
        worker.start()
        worker.wait_ready()
        # resumed after its last checkpoint: whatever followed it is processed again (possibly nothing)
        wait_for(lambda: worker.metric("gpuledger_worker_consumer_lag") == 0, timeout_s=60, every_s=0.1)
        letters = read_topic(kafka_bootstrap, worker.topics.deadletter, want=len(garbage), idle_s=3)
        sources = [int(parse_headers(m.headers)["source"].rsplit("/", 1)[1]) for m in letters]
        assert sources == list(range(len(valid), total))  # each bad record once, though some were redone
