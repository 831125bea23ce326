"""The decision service without a broker: the same decisions as the replay, idempotent, restartable, timed."""

from __future__ import annotations

import asyncio
import random

from ledger.codec import encode
from ledger.core import DecisionCore, Knobs
from ledger.events import Event, WorkloadStarted, to_us
from ledger.streams.service import DecisionService
from ledger.streams.snapshot import Serialisation
from ledger.streams.state import ClusterState
from tests.factories import Events
from tests.streams.scenarios import checkpoint_heavy, lab_month, same_state


def feed(svc: DecisionService, events: list[Event], first_offset: int = 0) -> list[Event]:
    out: list[Event] = []
    for i, e in enumerate(events, first_offset):
        outcome = svc.process(encode(e), e.cluster.encode(), 0, i)
        assert outcome.kind in ("applied", "duplicate"), outcome.reason
        out += outcome.emit
    return out


def test_the_service_decides_exactly_what_the_replay_decided() -> None:
    ledger = lab_month()
    svc = DecisionService(Knobs())
    emitted = feed(svc, ledger.inputs)
    emitted += [e for tick in svc.due(now=float("inf")) for e in tick.emit]
    assert emitted == ledger.outputs


def test_rolling_occupancy_recounted_from_facts_agrees_with_the_core_on_every_node() -> None:
    ledger = lab_month()
    svc = DecisionService(Knobs())
    feed(svc, ledger.inputs)
    (st,) = svc.states.values()
    totals = st.occupancy.totals(st.core.now)
    assert len(totals) > 10
    for path, occ in totals.items():
        usage = st.core.usage(path)
        assert abs(usage["accrued_gpu_s"] * 1e6 - occ.allocated_gpu_us) < 1, path
        assert abs(usage["unallocated_gpu_s"] * 1e6 - occ.unallocated_gpu_us) < 1, path


def test_the_same_events_delivered_twice_change_nothing() -> None:
    inputs = lab_month().inputs[:1500]
    svc = DecisionService(Knobs())
    feed(svc, inputs)
    before = next(iter(svc.states.values())).to_bytes()
    again = [svc.process(encode(e), e.cluster.encode(), 0, 10_000 + i) for i, e in enumerate(inputs)]
    assert {o.kind for o in again} == {"duplicate"}
    assert not any(o.emit for o in again)
    after = next(iter(svc.states.values()))
    assert after.offset == 10_000 + len(inputs) - 1  # only the consumed position moved
    after.offset = ClusterState.from_bytes(before).offset
    assert after.to_bytes() == before


def test_a_restored_checkpoint_continues_exactly_like_an_uninterrupted_run() -> None:
    inputs = lab_month().inputs
    whole = DecisionService(Knobs())
    expected = feed(whole, inputs)
    rng = random.Random(5)
    cuts = sorted(rng.sample(range(1, len(inputs)), 6))
    got: list[Event] = []
    blob: bytes | None = None
    for lo, hi in zip([0, *cuts], [*cuts, len(inputs)], strict=True):
        part = DecisionService(Knobs(), loader=lambda _c, b=blob: b)
        got += feed(part, inputs[lo:hi], first_offset=lo)
        blob = next(iter(part.states.values())).to_bytes()
    assert got == expected
    assert blob is not None
    assert same_state(ClusterState.from_bytes(blob), next(iter(whole.states.values())))


def test_records_already_reflected_by_a_checkpoint_are_skipped() -> None:
    inputs = lab_month().inputs[:300]
    svc = DecisionService(Knobs())
    feed(svc, inputs)
    blob = next(iter(svc.states.values())).to_bytes()
    restarted = DecisionService(Knobs(), loader=lambda _c: blob)
    outcomes = [restarted.process(encode(e), e.cluster.encode(), 0, i) for i, e in enumerate(inputs)]
    assert {o.kind for o in outcomes} == {"replayed"}


def test_undecodable_and_invalid_records_become_dead_letters_and_touch_nothing() -> None:
    svc = DecisionService(Knobs())
    ev = Events()
    good = encode(ev.submit(0, "w1", "lab/a"))
    bad = [
        b"",
        b"\x00garbage",
        b"\xc3\x01" + b"\xff" * 8 + good[10:],  # unknown fingerprint
        good[:-3],  # truncated body
        good + b"\x00",  # trailing byte
    ]
    outcomes = [svc.process(v, b"lab", 0, i) for i, v in enumerate(bad)]
    assert [o.kind for o in outcomes] == ["deadletter"] * len(bad)
    assert all(o.reason for o in outcomes)
    assert "fingerprint" in (outcomes[2].reason or "")
    assert svc.states == {}


def _draining_cluster() -> tuple[Events, list[Event]]:
    """Two 8-GPU hosts; v1 starts on the first with a 10-minute protected window, then that host is drained."""
    ev = Events()
    return ev, [
        ev.capacity(0, gpus=16),
        ev.node(0, "lab"),
        ev.node(0, "lab/vision", share=0.5),
        ev.node(0, "lab/speech", share=0.5),
        ev.submit(1, "v1", "lab/vision", gpus=8, min_runtime_s=600, work_s=86_400),
        ev.host(3, "lab-n000", "unhealthy", reason="ECC errors"),
    ]


def test_the_timer_ends_a_protected_window_with_no_new_event_as_the_next_event_would_have() -> None:
    """Nothing arrives after the drain is announced; the timer still preempts v1 when its window ends."""
    wall = [0.0]
    svc = DecisionService(Knobs(), idle_clock_rate=60.0, idle_after_s=1.0, clock=lambda: wall[0])
    ev, setup = _draining_cluster()
    feed(svc, setup)
    st = svc.states["lab"]
    wake = st.core.next_wakeup()
    assert wake is not None and wake > st.last_event_us
    wall[0] = 1.0 + (wake - st.last_event_us) / 1e6 / 60.0 - 0.5  # not yet due
    assert svc.due() == []
    wall[0] += 1.0
    (tick,) = svc.due()
    # the drain falls due when v1's protected window ends: preempted there, requeued, started elsewhere
    assert [e.type_name for e in tick.emit if e.type_name != "SchedulingDecision"] == [
        "WorkloadPreempted", "WorkloadRequeued", "WorkloadStarted"
    ]
    assert all(to_us(e.time) <= wake for e in tick.emit)
    # the same wake-up reached by the next input instead of the timer: the same outputs, same ids
    other = DecisionService(Knobs())
    feed(other, setup)
    later = ev.checkpoint(60, "v1", progress_s=0)
    assert other.process(encode(later), b"lab", 0, len(setup)).emit[: len(tick.emit)] == tick.emit


def test_applied_ids_are_remembered_for_the_window_and_an_older_input_is_refused_not_counted_twice() -> None:
    ev = Events()
    day = 24 * 60
    svc = DecisionService(Knobs())
    early = ev.submit(1, "w-early", "lab/a", gpus=1, work_s=600)
    feed(svc, [ev.capacity(0, gpus=16), ev.node(0, "lab"), ev.node(0, "lab/a", share=1.0), early])
    st = svc.states["lab"]
    assert early.event_id in st.seen
    later = ev.submit(9 * day, "w-late", "lab/a", gpus=1, work_s=600)
    assert svc.process(encode(later), b"lab", 0, 100).kind == "applied"
    svc.take_dirty()  # a checkpoint prunes ids older than the 7-day horizon
    assert early.event_id not in st.seen and later.event_id in st.seen
    before = st.to_bytes()
    # a copy of the early submission arrives: its id is forgotten, so it must not be applied again
    copy = svc.process(encode(early), b"lab", 0, 101)
    assert copy.kind == "deadletter" and "idempotency horizon" in (copy.reason or "")
    st.offset = ClusterState.from_bytes(before).offset
    assert st.to_bytes() == before


def test_a_checkpoint_serialised_in_a_forked_child_restores_the_state_frozen_at_the_fork() -> None:
    inputs = lab_month().inputs
    svc = DecisionService(Knobs())
    feed(svc, inputs[:800])
    (st,) = svc.states.values()
    in_place = st.to_bytes()
    job = Serialisation.start([st])
    feed(svc, inputs[800:900], first_offset=800)  # the parent moves on while the child serialises
    (forked,) = asyncio.run(job.result())
    assert same_state(ClusterState.from_bytes(forked), ClusterState.from_bytes(in_place))
    assert not same_state(ClusterState.from_bytes(forked), st)


def test_records_redelivered_after_a_restore_keep_the_history_replay_timer_from_judging_the_cluster_idle() -> None:
    # history replay: once idle, event time runs a billion times faster than the wall clock; a worker restored
    # from a checkpoint at input k is re-delivered inputs before k, two wall seconds apart, then the rest
    inputs = checkpoint_heavy().inputs[:12_000]
    reference = DecisionService(Knobs(), idle_clock_rate=1e9, clock=lambda: 0.0)
    expected = feed(reference, inputs) + [e for tick in reference.due(now=float("inf")) for e in tick.emit]
    wall = [0.0]
    first = DecisionService(Knobs(), idle_clock_rate=1e9, idle_after_s=1.0, clock=lambda: wall[0])
    k = len(inputs) // 2
    emitted = feed(first, inputs[: k + 1])
    (st,) = first.states.values()
    while st.core.next_wakeup() is None:  # restore where a wake-up is pending: an idle timer would play it
        k += 1
        emitted += feed(first, inputs[k : k + 1], k)
    pending = st.core.next_wakeup()
    blob = st.to_bytes()
    restored = DecisionService(
        Knobs(), loader=lambda _c: blob, idle_clock_rate=1e9, idle_after_s=1.0, clock=lambda: wall[0]
    )
    for offset in range(k - 5, k + 1):  # re-delivered: the checkpoint already reflects them
        wall[0] += 2.0
        assert restored.process(encode(inputs[offset]), b"busy", 0, offset).kind == "replayed"
        restored.due()
        assert restored.states["busy"].core.next_wakeup() == pending  # still arriving: not idle, nothing played
    emitted += feed(restored, inputs[k + 1 :], k + 1)
    emitted += [e for tick in restored.due(now=float("inf")) for e in tick.emit]
    assert emitted == expected
    got, want = restored.states["busy"], reference.states["busy"]
    assert (got.core.now, got.occupancy.to_dict()) == (want.core.now, want.occupancy.to_dict())


def test_a_record_on_a_partition_other_than_its_clusters_is_dead_lettered_alone_and_pins_nothing() -> None:
    from ledger.streams.topics import key_partition

    inputs = lab_month().inputs[:400]
    home = key_partition("demo", 4)
    stray = (home + 1) % 4
    svc = DecisionService(Knobs(), partitions=4)
    first = svc.process(encode(inputs[0]), b"demo", stray, 0)  # a valid record, first seen on the wrong partition
    assert first.kind == "deadletter" and f"belongs on partition {home}" in (first.reason or "")
    assert svc.states == {}
    outcomes = [svc.process(encode(e), b"demo", home, i) for i, e in enumerate(inputs)]
    assert {o.kind for o in outcomes} == {"applied"}  # its own partition's records all count
    reference = DecisionService(Knobs())
    assert [e for o in outcomes for e in o.emit] == [e for o in reference.process_batch(
        [(encode(e), b"demo", 0, i) for i, e in enumerate(inputs)]) for e in o.emit]


def test_an_instants_pass_waits_for_all_its_facts_and_the_timer_closes_the_last_one_when_the_cluster_is_quiet() -> None:
    ev = Events()
    setup = [ev.capacity(0, gpus=8), ev.node(0, "lab"), ev.node(0, "lab/a", share=0.5), ev.node(0, "lab/b", share=0.5)]
    # two whole-cluster submissions in one second, the later-ranked budget's first: a pass after the first
    # alone would start it; the instant's one pass, after both, starts the budget that ranks first
    same = [ev.submit(1, "b1", "lab/b", gpus=8, work_s=600), ev.submit(1, "a1", "lab/a", gpus=8, work_s=600)]
    wall = [0.0]
    svc = DecisionService(Knobs(), idle_clock_rate=0.0, idle_after_s=1.0, clock=lambda: wall[0])
    feed(svc, setup)
    assert [o.emit for o in svc.process_batch([(encode(e), b"lab", 0, 10 + i) for i, e in enumerate(same)])] == [[], []]
    wall[0] += 0.5
    assert svc.due() == []  # quiet for less than idle_after_s: another fact of that second may still come
    wall[0] += 0.6
    (tick,) = svc.due()
    started = [e.workload_id for e in tick.emit if isinstance(e, WorkloadStarted)]
    assert started == ["a1"]
    # the replay's rule, by the same calls: every fact of the instant, then its pass
    core = DecisionCore(Knobs(), "lab")
    for e in setup:
        core.handle(e)
    assert [o for e in same for o in core.handle(e, False)] + core.advance(to_us(same[0].time)) == tick.emit
    one_by_one = DecisionCore(Knobs(), "lab")
    for e in setup:
        one_by_one.handle(e)
    assert [o.workload_id for o in one_by_one.handle(same[0]) if isinstance(o, WorkloadStarted)] == ["b1"]
    late = svc.process(encode(ev.submit(1, "c1", "lab/a", gpus=1, work_s=60)), b"lab", 0, 12)
    assert late.kind == "applied" and late.late  # its instant's pass already ran


def test_a_long_history_play_out_comes_in_slices_that_add_up_to_the_whole() -> None:
    # mid-month work still waits and something could be preempted: a standing check every minute, for as
    # long as event time runs. A worker's timer plays such a span a slice at a time and stays responsive.
    inputs = lab_month().inputs[:400]
    wall = [0.0]

    def quiet_service() -> DecisionService:
        svc = DecisionService(Knobs(), idle_clock_rate=1e9, idle_after_s=1.0, clock=lambda: wall[0])
        feed(svc, inputs)
        return svc

    whole_svc, sliced_svc = quiet_service(), quiet_service()
    wall[0] += 1.0 + 7 * 86_400 / 1e9  # silent long enough for a week of event time
    whole = [e for tick in whole_svc.due() for e in tick.emit]
    (done,) = whole_svc.states.values()
    (st,) = sliced_svc.states.values()
    sliced: list[Event] = []
    calls = 0
    while st.core.now < done.core.now and calls < 100_000:
        sliced += [e for tick in sliced_svc.due(budget_s=0.002) for e in tick.emit]
        calls += 1
    assert calls > 1, "the week fitted in one slice: nothing was cut"
    assert sliced == whole and whole, "the slices do not add up to the play-out"
    assert sliced_svc.due() == [] and st.core.next_wakeup() == done.core.next_wakeup()
