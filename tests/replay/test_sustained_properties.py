"""No starvation under sustained demand: the head of the fair-share order starts within the stated bound.

The liveness property of ``test_family_properties`` bounds how long work takes once submissions
stop. Here they never stop: hypothesis draws sustained-demand months (``scenario_family.sustained``:
2–3× the capacity submitted at every moment, training runs as wide as the whole cluster among them)
and the rules (strategy, protection cap, grace), and the month is replayed only up to its last
submission, so the backlog grows for the whole replay. After every instant the core decides, the
test asks it for its fair-share order and names the *head*: the first waiting allocated workload of
the first budget in that order that has one (inside a budget: priority, then submit time, as the
core queues them). The core states (``ledger.core.contract.start_bound``) that a head wider than a
host, for as long as it stays the head, starts within that bound; so no such workload may stay the
head, unstarted, for longer. A head still waiting when the replay stops counts with its wait so far: the horizon hides
no wait. The bound's stated exception (hosts held by a settled run, which keeps its GPUs until it
checkpoints or ends) is added as the longest such a run can keep them in the month: the longest
work of a run that cannot resume, and the longest checkpoint interval of one that can, each with its
restart.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledger.core.knobs import Knobs
from ledger.replay.scenario_family import Sustained
from tests.replay.heads import late_heads, off_the_partition, replay_sustained

shapes = st.builds(
    Sustained,
    gpus=st.sampled_from([32, 64, 128]),
    days=st.just(3),
    demand=st.floats(2.0, 3.0),
    wide_share=st.floats(0.3, 0.8),
    resumable=st.sampled_from([0.7, 1.0]),
    programs=st.just(2),
    projects=st.integers(2, 4),
    researchers=st.integers(4, 10),
)
rules = st.builds(
    Knobs,
    preemption_strategy=st.sampled_from(["final-share", "instant"]),
    max_min_runtime_s=st.sampled_from([2 * 3600, 8 * 3600]),
    grace_s=st.sampled_from([0, 120]),
    max_preemptions=st.sampled_from([1, 2]),
    debug_hosts=st.sampled_from([0, 1]),  # with a debug partition a whole-cluster run is held onto it too
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, seed=st.integers(0, 10_000), knobs=rules)
# a whole-cluster run whose own leaf's later narrow runs kept every hold off (22 h unstarted, bound 7.8 h)
@example(
    shape=Sustained(gpus=64, days=3, demand=2.0, wide_share=0.8, resumable=1.0, programs=2, projects=2, researchers=4),
    seed=185,
    knobs=Knobs(preemption_strategy="final-share", max_min_runtime_s=2 * 3600, grace_s=0, max_preemptions=1),
)
def test_the_head_of_the_fair_share_order_starts_within_the_bound_while_submissions_go_on(
    shape: Sustained, seed: int, knobs: Knobs
) -> None:
    watch, subs, _ = replay_sustained(shape, seed, knobs)
    assert watch.streaks  # allocated work waited: the demand outgrew the cluster
    late = late_heads(watch, knobs, subs)
    assert not late, late[:5]
    wrong = off_the_partition(watch)  # with debug_hosts 1: only debug runs (and free fill) start there
    assert not wrong, wrong[:5]


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), strategy=st.sampled_from(["final-share", "instant"]))
def test_on_256_gpus_over_a_week_the_head_starts_within_the_bound(seed: int, strategy: str) -> None:
    shape = Sustained(gpus=256, days=7, programs=3, projects=6, researchers=30)
    knobs = Knobs(preemption_strategy=strategy)  # type: ignore[arg-type]
    watch, subs, _ = replay_sustained(shape, seed, knobs)
    late = late_heads(watch, knobs, subs)
    assert not late, late[:5]
