"""Hypothesis strategies: random cluster logs on whole minutes, mostly consistent, sometimes not."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ledger import events as ev
from tests.factories import Events

TREES = [
    [("org", 1.0), ("org/a", 2.0), ("org/b", 1.0)],
    [("org", 1.0), ("org/a", 1.0), ("org/b", 1.0), ("org/b/x", 3.0), ("org/b/y", 1.0)],
    [("r1", 1.0), ("r2", 3.0), ("r1/a", 1.0), ("r2/c", 0.0), ("r2/d", 2.0)],
]


@st.composite
def workload_lives(draw: st.DrawFn, E: Events, wid: str, budget: str, hosts: int, horizon: int,
                   others: list[str]) -> list[ev.Event]:
    """Return one workload's events: submission, then runs ended by preemption or completion."""
    gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
    min_rt = draw(st.sampled_from([0, 600, 900, 3600]))
    restart = draw(st.sampled_from([None, 0, 120, 600]))
    resumable = draw(st.booleans())
    t = draw(st.integers(0, horizon - 10))
    out: list[ev.Event] = [E.submit(t, wid, budget, gpus=gpus, min_runtime_s=min_rt, restart_s=restart,
                                    resumable=resumable)]
    n_nodes = max(1, -(-gpus // 8))
    for attempt in range(1, draw(st.integers(0, 3)) + 1):
        t += draw(st.integers(0, 90))
        first = draw(st.integers(0, max(0, hosts - n_nodes)))
        nodes = tuple(f"lab-n{i:03d}" for i in range(first, first + n_nodes))
        allocated = min_rt > 0
        out.append(E.start(t, wid, nodes, gpus, allocated=allocated, protected_for_min=min_rt / 60, attempt=attempt))
        length = draw(st.integers(1, 200))
        for c in sorted(draw(st.lists(st.integers(1, length), max_size=2, unique=True))):
            if c < length:
                out.append(E.checkpoint(t + c, wid, c * 60))
        t += length
        end = draw(st.sampled_from(["preempt", "complete", "open"]))
        if end == "open":
            break
        if end == "complete":
            out.append(E.complete(t, wid, draw(st.sampled_from(["succeeded", "failed"]))))
            break
        by = draw(st.sampled_from([None, *others]))
        out.append(E.preempt(t, wid, draw(st.sampled_from(["fair_share", "host_drain", "user"])), by=by))
        if not resumable:
            out.append(E.complete(t, wid, "cancelled"))
            break
        out.append(E.requeue(t, wid))
    return out


@st.composite
def cluster_logs(draw: st.DrawFn, anomalies: bool = True) -> list[ev.Event]:
    """Return a random cluster log (events in log order, times on whole minutes)."""
    E = Events()
    horizon = draw(st.integers(60, 400))
    tree = draw(st.sampled_from(TREES))
    gpus = draw(st.sampled_from([8, 16, 20, 32]))
    hosts = -(-gpus // 8)
    setup: list[ev.Event] = [E.capacity(0, gpus)]
    setup += [E.node(0, path, share) for path, share in tree]
    leaves = [p for p, _ in tree if not any(q.startswith(p + "/") for q, _ in tree)]
    # Sometimes work is charged to inner nodes too (a Slurm account's Share=parent users beside users
    # with shares of their own): such a node is a team that shares its share with the teams below it.
    funded = [p for p, _ in tree] if draw(st.booleans()) else leaves
    timed: list[ev.Event] = []
    for _ in range(draw(st.integers(0, 3))):
        timed.append(E.allocate(draw(st.integers(1, horizon)), draw(st.sampled_from([p for p, _ in tree])),
                                draw(st.sampled_from([0.0, 0.5, 1.0, 4.0])), "admin"))
    for _ in range(draw(st.integers(0, 3))):
        timed.append(E.host(draw(st.integers(1, horizon)), f"lab-n{draw(st.integers(0, hosts)):03d}",
                            draw(st.sampled_from(["healthy", "unhealthy", "failed"]))))
    if draw(st.booleans()):
        timed.append(E.capacity(draw(st.integers(1, horizon)), draw(st.sampled_from([8, 16, 24, 40]))))
    n = draw(st.integers(1, 7))
    wids = [f"w{i}" for i in range(n)]
    for wid in wids:
        budget = draw(st.sampled_from(funded + (["ghost/team"] if anomalies else [])))
        timed += draw(workload_lives(E, wid, budget, hosts, horizon, [w for w in wids if w != wid]))
    timed.sort(key=lambda e: e.time)  # stable: one workload's events keep their order
    log = setup + timed
    if anomalies:
        extra: list[Any] = draw(st.lists(st.sampled_from(["unknown", "early_end", "overlap", "late_start"]),
                                         max_size=2))
        for kind in extra:
            wid = draw(st.sampled_from(wids))
            t = draw(st.integers(0, horizon))
            if kind == "unknown":
                log.append(E.complete(t, "nobody"))
            elif kind == "early_end":
                log.append(E.start(t + 30, wid, ("lab-n000",), 1, allocated=True, protected_for_min=0))
                log.append(E.complete(t, wid))
            elif kind == "overlap":
                log.append(E.start(t, wid, ("lab-n000",), 1, allocated=False))
                log.append(E.start(t + 5, wid, ("lab-n000",), 1, allocated=False))
            else:
                log.append(E.start(t, wid, ("lab-n001",), 2, allocated=True, protected_for_min=10))
    return log
