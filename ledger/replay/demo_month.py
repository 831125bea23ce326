"""Generate a seeded, reproducible month of a 1,024-GPU research cluster for ``gpuledger demo``.

The shape follows the published accounts of budget-driven GPU scheduling: 128 hosts of 8 GPUs,
a budget tree of programs, projects and about 150 researchers (root/program/project/researcher),
demand two to three times capacity, teams whose work comes in bursts, many short debug runs
(minimum runtime 15 minutes or less, 1–8 GPUs), long resumable training runs with checkpoints
(some 64–512 GPUs wide), and some non-resumable and interactive work. Priority is inflated as in
the old system: 80% of all work asks for the top level.

Teams also keep the cluster full with *fill*: free, preemptible work (hyperparameter sweeps and
eval suites of 1–8 GPUs, minimum runtime 0, resumable, checkpointing every 10–30 min) launched in
arrays of 4–24 jobs. The published cluster ran at 98% occupancy with 18% of its delivered GPU-hours
unallocated: without fill, the GPUs left idle while wide jobs wait for whole hosts stay idle, and
small allocated jobs always find a free GPU, so nothing shows the debug wait a full cluster gives
under priorities. Fill is about a fifth of the cluster's GPU-hours, more than the idle fragments
take, so a backlog of it is always waiting to use them. Under fair share any allocated request
preempts it; under the priority baseline it is preemptible only by strictly higher priority, and as
most of it is submitted at the top level too, it holds its GPUs against top-level debug runs.

Everything comes from one ``random.Random(seed)``, so the same seed gives the same month.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ledger.budgets import BudgetNode, Budgets
from ledger.events import WorkloadKind, WorkloadSubmitted, trusted

START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
DAYS = 30
HOUR = 3600
_PRIORITIES = (2, 2, 2, 2, 2, 2, 2, 2, 1, 0)

# program: (share, {project: share}) — shares are relative weights among siblings
PROGRAMS: dict[str, tuple[float, dict[str, float]]] = {
    "language": (0.35, {"pretrain": 0.5, "posttrain": 0.3, "evals": 0.2}),
    "vision": (0.20, {"vlm": 0.6, "detect": 0.4}),
    "robotics": (0.20, {"sim-rl": 0.6, "manipulation": 0.4}),
    "science": (0.15, {"agents": 0.5, "materials": 0.3, "climate": 0.2}),
    "platform": (0.10, {"infra": 0.4, "safety": 0.3, "data": 0.3}),
}


@dataclass(frozen=True)
class Mix:
    """How many workloads of each kind a month holds (before bursts reshape when they arrive)."""

    debug: int = 5_000
    batch: int = 2_000
    sweep: int = 2_000  # unallocated fill (sweep trials and evals): minimum runtime 0, submitted in arrays
    interactive: int = 500
    training: int = 250
    backlog_training: int = 24  # already queued when the month starts
    batch_hours: float = 6.0  # median productive hours of a batch job
    sweep_hours: float = 13.5  # median productive hours of one unallocated fill job

    def scaled(self, factor: float) -> Mix:
        """Return the same mix with every count multiplied by ``factor`` (at least 1 each)."""
        counts = {f: max(1, round(getattr(self, f) * factor)) for f in self.__dataclass_fields__ if "hours" not in f}
        return replace(self, **counts)


DEMO = Mix()
"""What ``gpuledger demo`` replays: about 9,800 workloads (2,000 of them fill), submitted work about
capacity (0.83x allocated, 0.18x fill), which with bursts, preemption and the fill backlog keeps demand
(GPUs waiting or running) about 2.7-3.1x capacity (depending on the policy)."""
FULL = Mix(debug=52_000, batch=36_000, sweep=9_000, interactive=2_500, training=170, batch_hours=0.8, sweep_hours=3.5)
"""The same month with about 100,000 workloads (many more short jobs, fill ~0.2x capacity):
``make bench`` and ``demo --month full``."""


@dataclass
class DemoMonth:
    """A generated month: the budgets and the submissions in time order."""

    budgets: Budgets
    submissions: list[WorkloadSubmitted]
    start: datetime
    end: datetime


CAPACITY = 1024  # GPUs of the month at scale 1


def scaled_capacity(scale: float) -> int:
    """Return the GPUs of a month at ``scale``: the 1,024 scaled with the workloads, whole 8-GPU hosts, at least 2."""
    return CAPACITY if scale == 1.0 else 8 * max(2, round(CAPACITY * scale / 8))


def _tree(
    rng: random.Random, cluster: str, researchers: int, gpus: int = CAPACITY, least: int = 3
) -> tuple[Budgets, dict[str, list[str]]]:
    nodes = [BudgetNode("lab", 1.0, ("director",))]
    per_project: dict[str, list[str]] = {}
    projects = [(prog, proj) for prog, (_, ps) in PROGRAMS.items() for proj in ps]
    # researchers per project in proportion to the project's share of the cluster, at least 3
    weights = {(g, p): PROGRAMS[g][0] * PROGRAMS[g][1][p] for g, p in projects}
    counts = {k: max(least, round(researchers * w)) for k, w in weights.items()}
    n = 0
    for prog, (share, projs) in PROGRAMS.items():
        nodes.append(BudgetNode(f"lab/{prog}", share, (f"{prog}-pi",)))
        for proj, pshare in projs.items():
            path = f"lab/{prog}/{proj}"
            nodes.append(BudgetNode(path, pshare, (f"{proj}-lead",)))
            leaves = []
            for _ in range(counts[(prog, proj)]):
                n += 1
                leaf = f"{path}/r{n:03d}"
                # a lead researcher sets uneven shares inside the project
                nodes.append(BudgetNode(leaf, round(rng.choice((0.5, 1.0, 1.0, 1.5, 2.0)), 2), ()))
                leaves.append(leaf)
            per_project[path] = leaves
    # projects are the team allocations (the published figures are over them); researchers share a project's
    levels = ("lab", "program", "project", "researcher")
    return Budgets(cluster, gpus, 8, tuple(nodes), levels, "project"), per_project


def _apportion(total: int, weights: dict[str, int]) -> dict[str, int]:
    """Return ``total`` shared in proportion to ``weights``, in whole numbers adding up to it (largest remainder)."""
    whole = sum(weights.values())
    exact = {k: total * w / whole for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[: total - sum(out.values())]:
        out[k] += 1
    return out


def _bursts(rng: random.Random, span_s: int) -> list[tuple[int, float]]:
    """Return (until_s, intensity) periods: a team alternates quiet spells and bursts of 1–4 days."""
    periods, t = [], 0
    busy = rng.random() < 0.5
    while t < span_s:
        length = int(rng.uniform(1.0, 4.0) * 86_400) if busy else int(rng.uniform(0.5, 3.0) * 86_400)
        t += length
        periods.append((t, rng.uniform(1.6, 2.6) if busy else rng.uniform(0.1, 0.4)))
        busy = not busy
    return periods


def _intensity(periods: list[tuple[int, float]], t: int) -> float:
    for until, level in periods:
        if t < until:
            return level
    return periods[-1][1]


def _diurnal(t: int) -> float:
    # people launch debug and interactive work in working hours (UTC-8 .. UTC+1 spread), less at weekends
    hour = (t // HOUR) % 24
    day = (t // 86_400) % 7
    level = 0.35 + 0.65 * max(0.0, math.sin(math.pi * (hour - 6) / 14))  # busiest around 13:00 UTC
    return level * (0.45 if day >= 5 else 1.0)


def _times(rng: random.Random, count: int, span_s: int, weight: Callable[[int], float]) -> list[int]:
    """Draw ``count`` arrival times whose density follows ``weight`` (evaluated hour by hour)."""
    hours = span_s // HOUR
    cum = list(itertools.accumulate(weight(h * HOUR + HOUR // 2) for h in range(hours)))
    return [h * HOUR + rng.randrange(HOUR) for h in rng.choices(range(hours), cum_weights=cum, k=count)]


def _arrays(rng: random.Random, count: int, span_s: int, weight: Callable[[int], float]) -> list[int]:
    """Draw ``count`` arrival times in arrays of 4–24 jobs launched together (a sweep, an eval suite)."""
    times: list[int] = []
    while len(times) < count:
        size = min(count - len(times), rng.randint(4, 24))
        (t0,) = _times(rng, 1, span_s, weight)
        times.extend(min(span_s - 1, t0 + rng.randrange(120)) for _ in range(size))
    return times


def generate(
    seed: int = 7, *, scale: float = 1.0, mix: Mix = DEMO, researchers: int = 150, cluster: str = "demo"
) -> DemoMonth:
    """Return the month for ``seed`` and ``mix``; ``scale`` multiplies every workload count, the cluster and the tree.

    A smaller month keeps the big one's shape: the capacity shrinks with the workloads (whole hosts,
    at least two), the researchers with it (one a project at least), and no job asks for more than
    half the smaller cluster (whole hosts: a wider one becomes several of that width, side by side),
    so demand against capacity stays about what it is at scale 1.
    """
    rng = random.Random(seed)
    gpus = scaled_capacity(scale)
    if scale == 1.0:
        budgets, per_project = _tree(rng, cluster, researchers)
    else:
        budgets, per_project = _tree(rng, cluster, max(1, round(researchers * scale)), gpus, least=1)
    widest = CAPACITY if scale == 1.0 else max(8, gpus // 2 // 8 * 8)  # whole hosts, as the big month's wide jobs
    mix = mix.scaled(scale) if scale != 1.0 else mix
    span = DAYS * 86_400
    projects = sorted(per_project)
    pweight = {p: len(per_project[p]) for p in projects}
    total_weight = sum(pweight.values())
    bursts = {p: _bursts(rng, span) for p in projects}
    rows: list[tuple[int, str, dict[str, object]]] = []

    def add(t: int, project: str, kind: WorkloadKind | str, fields: dict[str, object]) -> None:
        rows.append((t, project, {"kind": kind, **fields}))

    kinds = ("debug", "batch", "sweep", "interactive", "training")
    if scale == 1.0:
        quota = {(p, k): round(getattr(mix, k) * (pweight[p] / total_weight)) for p in projects for k in kinds}
    else:  # few of a kind: rounded project by project most would be 0, so each kind's total is shared out whole
        quota = {(p, k): n for k in kinds
                 for p, n in _apportion(getattr(mix, k), {p: pweight[p] for p in projects}).items()}
    for project in projects:
        b = bursts[project]

        def bursty(t: int, b: list[tuple[int, float]] = b) -> float:
            return _intensity(b, t)

        def working(t: int, b: list[tuple[int, float]] = b) -> float:
            return _intensity(b, t) * _diurnal(t)

        for t in _times(rng, quota[(project, "debug")], span, working):
            add(t, project, "debug", _debug(rng))
        for t in _times(rng, quota[(project, "batch")], span, bursty):
            add(t, project, "batch", _batch(rng, mix.batch_hours))
        for t in _arrays(rng, quota[(project, "sweep")], span, bursty):
            add(t, project, "sweep", _sweep(rng, mix.sweep_hours))
        for t in _times(rng, quota[(project, "interactive")], span, working):
            add(t, project, "interactive", _interactive(rng))
        for t in _times(rng, quota[(project, "training")], span, bursty):
            add(t, project, "training", _training(rng))
    for _ in range(mix.backlog_training):
        project = rng.choices(projects, weights=[pweight[p] for p in projects])[0]
        add(rng.randrange(0, 2 * HOUR), project, "training", _training(rng))

    rows.sort(key=lambda r: r[0])
    subs: list[WorkloadSubmitted] = []
    counters: dict[str, int] = {}
    for t, project, f in rows:
        leaf = rng.choice(per_project[project])
        label = str(f.pop("kind"))
        kind = "batch" if label == "sweep" else label  # fill is batch work on the free tier
        counters[label] = counters.get(label, 0) + 1
        wid = f"{label[:3]}-{counters[label]:06d}"
        # priority inflation: most work asks for the top level, as under the old scheduler
        priority = _PRIORITIES[rng.randrange(10)]
        gpus = int(str(f["gpus"]))
        # a smaller month's job wider than half its cluster is submitted as that many jobs of the widest
        # size instead, side by side: the same GPU-hours asked at the same time
        parts = [(wid, gpus)] if gpus <= widest else [(f"{wid}-{k + 1}", widest) for k in range(-(-gpus // widest))]
        for wid, gpus in parts:
            subs.append(_submission(cluster, wid, leaf, t, gpus, priority, kind, f))
    return DemoMonth(budgets, subs, START, START + timedelta(days=DAYS))


def _submission(cluster: str, wid: str, leaf: str, t: int, gpus: int, priority: int, kind: str,
                f: dict[str, object]) -> WorkloadSubmitted:
    """Return one submission of the month."""
    fields = {
        "event_id": f"{cluster}/sub/{wid}",
        "cluster": cluster,
        "time": START + timedelta(seconds=t),
        "schema_version": 2,
        "workload_id": wid,
        "budget": leaf,
        "user": leaf.rsplit("/", 1)[1],
        "gpus": gpus,
        "nodes": 0,
        "min_runtime_s": f["min_runtime_s"],
        "resumable": f["resumable"],
        "priority": priority,
        "kind": kind,
        "work_s": f["work_s"],
        "checkpoint_interval_s": f["checkpoint_interval_s"],
        "restart_s": f["restart_s"],
    }
    return trusted(WorkloadSubmitted, fields)


def _debug(rng: random.Random) -> dict[str, object]:
    return {
        "gpus": rng.choice((1, 1, 1, 2, 4, 8, 8)),
        "min_runtime_s": rng.choice((300, 600, 900)),
        "resumable": False,
        "work_s": rng.randint(60, 900),
        "checkpoint_interval_s": 0,
        "restart_s": 0,
    }


def _batch(rng: random.Random, hours: float) -> dict[str, object]:
    resumable = rng.random() < 0.85
    return {
        "gpus": rng.choice((1, 1, 2, 4, 4, 8, 8, 16)),
        "min_runtime_s": rng.choice((1800, 3600, 3600, 7200)),
        "resumable": resumable,
        "work_s": int(rng.lognormvariate(math.log(hours * HOUR), 0.7)) + 600,
        "checkpoint_interval_s": rng.choice((900, 1800, 1800)) if resumable else 0,
        "restart_s": rng.randint(60, 300) if resumable else 0,
    }


def _sweep(rng: random.Random, hours: float) -> dict[str, object]:
    # free work to fill idle GPUs: resumable and checkpointing often, since anyone may preempt it
    return {
        "gpus": rng.choice((1, 2, 2, 4, 4, 8, 8)),
        "min_runtime_s": 0,
        "resumable": True,
        "work_s": int(rng.lognormvariate(math.log(hours * HOUR), 0.6)) + 300,
        "checkpoint_interval_s": rng.choice((600, 900, 1800)),
        "restart_s": rng.randint(30, 180),
    }


def _interactive(rng: random.Random) -> dict[str, object]:
    return {
        "gpus": rng.choice((1, 1, 2, 4)),
        "min_runtime_s": rng.choice((4 * HOUR, 8 * HOUR, 12 * HOUR)),
        "resumable": False,
        "work_s": rng.randint(2 * HOUR, 10 * HOUR),
        "checkpoint_interval_s": 0,
        "restart_s": 0,
    }


def _training(rng: random.Random) -> dict[str, object]:
    gpus = rng.choices((8, 16, 32, 64, 128, 256, 512), weights=(20, 25, 20, 15, 10, 6, 4))[0]
    resumable = rng.random() < 0.9
    return {
        "gpus": gpus,
        # researchers would like a day of protection; the max-min-runtime cap decides what they get
        "min_runtime_s": rng.choice((4 * HOUR, 8 * HOUR, 24 * HOUR, 24 * HOUR)),
        "resumable": resumable,
        "work_s": int(rng.uniform(6, 48) * HOUR),
        "checkpoint_interval_s": rng.choice((1800, 1800, 3600)) if resumable else 0,
        "restart_s": rng.randint(300, 1200) if resumable else 0,
    }


__all__ = ["DAYS", "DEMO", "FULL", "START", "DemoMonth", "Mix", "generate"]
