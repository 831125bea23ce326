"""A parametrised family of months for tests and benchmarks: not only the demo month.

``month(params, seed)`` returns the submissions (with work, checkpoint and restart hints, ready to
replay) and the budgets of one generated month. The parameters span the loads the scheduling
rules must hold up on:

* ``demand``: submitted GPU-hours of work ÷ the cluster's GPU-hours over the span (1.5–3);
* ``fill_share``: the share of that work submitted as free fill (minimum runtime 0), 0–0.3;
* ``close_budgets``: every team the same share (teams stand within a hair of each other), or
  spread shares (8:4:2:1:1 …);
* ``exact_share``: the share of workloads that are short jobs whose work equals their minimum
  runtime (e.g. 145 s), with a ``restart_s`` (``exact_restart_s``, 300 s) larger than that
  protection;
* ``never_checkpoint``: the share of resumable batch work that never writes a checkpoint;
* ``wide_share``: the share of GPU-hours in wide training runs (16–128 GPUs, whole hosts).

``sustained(params, seed)`` returns a month of another shape (``Sustained``): submissions that go on
at a steady 2–3× the capacity for the whole span (the backlog grows while they do), on a tree of
programs, projects (the teams) and researchers, with resumable training runs of 8–256 GPUs a few
percent of the workloads and most of the GPU-hours.

Inside a team, debug runs (minimum runtime ≤ 15 min) are submitted at the top priority (3) and
the rest at 0–2.

Everything comes from one ``random.Random(seed)``: the same params and seed give the same month.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ledger.budgets import BudgetNode, Budgets
from ledger.events import WorkloadSubmitted, trusted

__all__ = [
    "FAMILY_LEVELS", "LEVELS", "SPREAD", "START", "Family", "Params", "Sustained", "drawn", "family_draw", "month",
    "sustained",
]

START = datetime(2026, 6, 1, tzinfo=UTC)  # a Monday
SPREAD = (8.0, 4.0, 2.0, 1.0, 1.0, 1.0)  # team shares when budgets are spread
LEVELS = ("org", "program", "team", "user")  # a sustained month's levels, root first: its projects are the teams


@dataclass(frozen=True)
class Params:
    """The knobs of one generated month (see the module docstring)."""

    gpus: int = 256
    gpus_per_node: int = 8
    days: int = 7
    teams: int = 6
    demand: float = 2.0
    fill_share: float = 0.15
    close_budgets: bool = True
    exact_share: float = 0.2
    exact_restart_s: int = 300
    never_checkpoint: float = 0.2
    wide_share: float = 0.25

    def __post_init__(self) -> None:
        if not 0 < self.demand <= 10 or not 0 <= self.fill_share < 1 or self.gpus < self.gpus_per_node:
            raise ValueError(f"scenario params out of range: {self}")


def month(params: Params, seed: int) -> tuple[list[WorkloadSubmitted], Budgets]:
    """Return one month of the family: submissions in time order and the budget tree."""
    rng = random.Random(seed)
    p = params
    cluster = "fam"
    shares = [1.0] * p.teams if p.close_budgets else [SPREAD[i % len(SPREAD)] for i in range(p.teams)]
    teams = [f"lab/t{i}" for i in range(p.teams)]
    nodes = [BudgetNode("lab", 1.0, ("director",))]
    pairs = enumerate(zip(teams, shares, strict=True))
    nodes += [BudgetNode(team, share, (f"lead-t{i}",)) for i, (team, share) in pairs]
    budgets = Budgets(cluster, p.gpus, p.gpus_per_node, tuple(nodes))
    span = p.days * 86_400
    target = p.demand * p.gpus * span  # GPU-seconds of productive work to submit
    fill_target = target * p.fill_share
    wide_target = target * p.wide_share
    rows: list[tuple[int, str, dict[str, object]]] = []
    done = {"fill": 0.0, "wide": 0.0, "all": 0.0}
    while done["all"] < target:
        if done["fill"] < fill_target and rng.random() < p.fill_share * 2:
            label, f = "fill", _fill(rng)
        elif done["wide"] < wide_target and rng.random() < 0.05:
            label, f = "wide", _wide(rng, p.gpus)
        else:
            label, f = _allocated(rng, p)
        work = float(f["gpus"]) * float(f["work_s"])  # type: ignore[arg-type]
        done["all"] += work
        if label in done:
            done[label] += work
        rows.append((rng.randrange(0, span), rng.choice(teams), {"label": label, **f}))
    rows.sort(key=lambda r: r[0])
    return _submissions(rng, cluster, rows, lambda team: f"u-{team[-2:]}"), budgets


def _priority(rng: random.Random, kind: str) -> int:
    # Debug runs go first inside their team (priority sorts only within a team), as a team that
    # wants its debug runs to start within minutes sets them; the draw is made for every row so
    # the rest of the month is the same whether or not a row is a debug run.
    drawn = rng.choice((2, 2, 2, 1, 0))
    return 3 if kind == "debug" else drawn


def _allocated(rng: random.Random, p: Params) -> tuple[str, dict[str, object]]:
    roll = rng.random()
    if roll < p.exact_share:
        # a short job whose work is exactly its protected minimum runtime; restarts dearer than that
        runtime = rng.choice((145, 145, 300, 600))
        return "exact", _hints(rng.choice((1, 1, 2, 4)), runtime, True, runtime, 0, p.exact_restart_s, "batch")
    roll = rng.random()
    if roll < 0.45:
        return "debug", _hints(rng.choice((1, 1, 1, 2, 4, 8)), rng.choice((300, 600, 900)), False,
                               rng.randint(60, 900), 0, 0, "debug")
    if roll < 0.9:
        never = rng.random() < p.never_checkpoint
        work = int(rng.lognormvariate(math.log(2 * 3600), 0.7)) + 300
        return "batch", _hints(rng.choice((1, 2, 4, 4, 8, 8)), rng.choice((1800, 3600)), True, work,
                               0 if never else rng.choice((900, 1800)), rng.randint(60, 600), "batch")
    return "inter", _hints(rng.choice((1, 1, 2)), 4 * 3600, False, rng.randint(3600, 4 * 3600), 0, 0, "interactive")


def _fill(rng: random.Random) -> dict[str, object]:
    work = int(rng.lognormvariate(math.log(3600), 0.6)) + 120
    return _hints(rng.choice((1, 2, 4, 8)), 0, True, work, rng.choice((600, 900)), rng.randint(30, 180), "batch")


def _wide(rng: random.Random, gpus: int) -> dict[str, object]:
    width = min(rng.choice((16, 32, 64, 128)), gpus)
    return _hints(width, rng.choice((4 * 3600, 8 * 3600)), True, int(rng.uniform(4, 24) * 3600),
                  rng.choice((1800, 3600)), rng.randint(300, 1200), "training")


def _hints(
    gpus: int, min_runtime_s: int, resumable: bool, work_s: int, interval_s: int, restart_s: int, kind: str
) -> dict[str, object]:
    return {
        "gpus": gpus, "min_runtime_s": min_runtime_s, "resumable": resumable, "work_s": work_s,
        "checkpoint_interval_s": interval_s, "restart_s": restart_s, "kind": kind,
    }


@dataclass(frozen=True)
class Sustained:
    """The knobs of one sustained-demand month (see ``sustained``)."""

    gpus: int = 1024
    gpus_per_node: int = 8
    days: int = 22  # submissions go on this long, at the same rate throughout
    demand: float = 2.5  # submitted GPU-hours of work per hour ÷ the cluster's GPUs
    wide_share: float = 0.7  # share of the submitted GPU-hours in 8–256-GPU training runs
    resumable: float = 0.7  # share of the batch runs that resume from checkpoints
    programs: int = 4
    projects: int = 15
    researchers: int = 150

    def __post_init__(self) -> None:
        if (not 0 < self.demand <= 10 or not 0 <= self.wide_share < 1 or self.gpus < self.gpus_per_node
                or not 0 <= self.resumable <= 1 or self.gpus % self.gpus_per_node or self.days < 1
                or not 1 <= self.programs <= self.projects <= self.researchers):
            raise ValueError(f"sustained-month params out of range: {self}")


def sustained(params: Sustained, seed: int) -> tuple[list[WorkloadSubmitted], Budgets]:
    """Return a sustained-demand month: submissions in time order and its org/program/team/user tree.

    Submission times are drawn evenly over ``days``, so the work submitted in any few hours is
    ``demand`` times what the cluster can run in them, to the last day. Each workload belongs to a
    project (a team) drawn in proportion to the project's share of the cluster, so every team asks
    for about ``demand`` times its share at every moment, and to one of its researchers (drawn
    evenly). Of the workloads: training runs (8–256 GPUs on whole hosts, 2–24 h of work, protected
    4–8 h, resumable, checkpoints every 15–60 min) until they hold ``wide_share`` of the GPU-hours;
    the rest 45 % debug (1–8 GPUs, 5–15 min protected, at their team's top priority), 52 % batch
    (1–8 GPUs, 30 min–2 h protected, a share ``resumable`` of them resumable: 70 %), 2 %
    interactive, 1 % free fill (minimum runtime 0). Shares are drawn from 0.5–2.0 at every level.
    """
    rng = random.Random(seed)
    p = params
    cluster = "sus"
    budgets, teams = _sustained_tree(rng, cluster, p)
    team_paths = list(teams)
    weights = [w for w, _ in teams.values()]
    span = p.days * 86_400
    target = p.demand * p.gpus * span
    wide_target = target * p.wide_share
    rows: list[tuple[int, str, dict[str, object]]] = []
    done = {"wide": 0.0, "all": 0.0}
    wide_every = _wide_every(p.wide_share)
    while done["all"] < target:
        if done["wide"] < wide_target and rng.random() < wide_every:
            label, f = "wide", _sustained_wide(rng, p.gpus)
        else:
            label, f = _sustained_other(rng, p.resumable)
        work = float(f["gpus"]) * float(f["work_s"])  # type: ignore[arg-type]
        done["all"] += work
        if label == "wide":
            done["wide"] += work
        team = rng.choices(team_paths, weights)[0]
        rows.append((rng.randrange(0, span), rng.choice(teams[team][1]), {"label": label, **f}))
    rows.sort(key=lambda r: r[0])
    return _submissions(rng, cluster, rows, lambda leaf: leaf.rsplit("/", 1)[-1]), budgets


def _wide_every(wide_share: float) -> float:
    """Return how often a draw is a training run so they reach ``wide_share`` of the GPU-hours evenly in time."""
    # A training run holds about 1,100 GPU-hours and any other workload about 7: draws that make
    # training runs this often fill both targets together, so the mix is the same early and late.
    if wide_share <= 0:
        return 0.0
    return min(1.0, wide_share * 7.0 / ((1 - wide_share) * 1_100 + wide_share * 7.0))


def _sustained_tree(
    rng: random.Random, cluster: str, p: Sustained
) -> tuple[Budgets, dict[str, tuple[float, list[str]]]]:
    """Return the budgets and, per project, its share of the cluster and its researchers' leaves."""
    nodes = [BudgetNode("lab", 1.0, ("director",))]
    programs = [f"p{i}" for i in range(p.programs)]
    program_share = {g: round(rng.uniform(0.5, 2.0), 2) for g in programs}
    projects = [(programs[i % p.programs], f"j{i:02d}") for i in range(p.projects)]
    project_share = {j: round(rng.uniform(0.5, 2.0), 2) for _, j in projects}
    out: dict[str, tuple[float, list[str]]] = {}
    for g in programs:
        nodes.append(BudgetNode(f"lab/{g}", program_share[g], (f"{g}-pi",)))
    for g, j in projects:
        nodes.append(BudgetNode(f"lab/{g}/{j}", project_share[j], (f"{j}-lead",)))
    n = 0
    for k, (g, j) in enumerate(projects):
        leaves = []
        for _ in range(p.researchers // p.projects + (1 if k < p.researchers % p.projects else 0)):
            n += 1
            leaf = f"lab/{g}/{j}/r{n:03d}"
            nodes.append(BudgetNode(leaf, round(rng.uniform(0.5, 2.0), 2), ()))
            leaves.append(leaf)
        out[f"lab/{g}/{j}"] = (0.0, leaves)
    program_total = sum(program_share.values())
    for g, j in projects:
        siblings = sum(project_share[jj] for gg, jj in projects if gg == g)
        out[f"lab/{g}/{j}"] = (program_share[g] / program_total * project_share[j] / siblings, out[f"lab/{g}/{j}"][1])
    return Budgets(cluster, p.gpus, p.gpus_per_node, tuple(nodes), LEVELS, "team"), out


def _sustained_wide(rng: random.Random, gpus: int) -> dict[str, object]:
    width = min(rng.choice((8, 16, 32, 64, 128, 256)), gpus)
    return _hints(width, rng.randint(4, 8) * 3600, True, int(rng.uniform(2, 24) * 3600),
                  rng.choice((15, 30, 45, 60)) * 60, rng.randint(300, 1200), "training")


def _sustained_other(rng: random.Random, resumable_share: float) -> tuple[str, dict[str, object]]:
    roll = rng.random()
    if roll < 0.45:
        return "debug", _hints(rng.choice((1, 1, 1, 2, 4, 8)), rng.choice((300, 600, 900)), False,
                               rng.randint(60, 900), 0, 0, "debug")
    if roll < 0.97:
        resumable = rng.random() < resumable_share
        work = int(rng.lognormvariate(math.log(2 * 3600), 0.8)) + 300
        return "batch", _hints(rng.choice((1, 2, 4, 4, 8, 8)), rng.choice((1800, 3600, 7200)), resumable, work,
                               rng.choice((900, 1800)) if resumable else 0, rng.randint(60, 600), "batch")
    if roll < 0.99:
        return "inter", _hints(rng.choice((1, 1, 2)), 4 * 3600, False, rng.randint(3600, 4 * 3600), 0, 0,
                               "interactive")
    return "fill", _fill(rng)


def _submissions(
    rng: random.Random, cluster: str, rows: list[tuple[int, str, dict[str, object]]], user: Callable[[str], str]
) -> list[WorkloadSubmitted]:
    """Return the submissions of (offset, budget, hints) rows, in row order, with fixed ids."""
    subs: list[WorkloadSubmitted] = []
    for n, (t, leaf, f) in enumerate(rows):
        label = str(f.pop("label"))
        wid = f"{label[:4]}-{n:06d}"
        subs.append(
            trusted(
                WorkloadSubmitted,
                {
                    "event_id": f"{cluster}/sub/{wid}", "cluster": cluster, "time": START + timedelta(seconds=t),
                    "schema_version": 2, "workload_id": wid, "budget": leaf, "user": user(leaf),
                    "gpus": f["gpus"], "nodes": 0, "min_runtime_s": f["min_runtime_s"], "resumable": f["resumable"],
                    "priority": _priority(rng, str(f["kind"])), "kind": f["kind"], "work_s": f["work_s"],
                    "checkpoint_interval_s": f["checkpoint_interval_s"], "restart_s": f["restart_s"],
                },
            )
        )
    return subs


@dataclass(frozen=True)
class Family:
    """The knobs of one month of the drawn family (``drawn``): the shapes the short-work targets must hold on.

    Every range the targets are stated over is a knob: demand, the share of workloads that are
    training runs (as wide as the whole cluster) and that are debug runs, the tree's depth, its
    number of teams and its shares (0.5–2.0 at every level), free fill, and how far each team's
    demand strays from its share.
    """

    gpus: int = 256
    gpus_per_node: int = 8
    days: int = 7  # submissions go on this long, evenly in time
    demand: float = 2.0  # submitted GPU-hours of work ÷ the cluster's GPU-hours over ``days``
    wide_share: float = 0.03  # share of the workloads that are training runs of 8 GPUs up to the whole cluster
    debug_share: float = 0.4  # share of the workloads that are debug runs (1–8 GPUs, protected 5–15 min)
    fill_share: float = 0.05  # share of the workloads that are free fill (minimum runtime 0)
    depth: int = 3  # levels of the tree, root included: 2 (lab/team) to 4 (lab/program/team/researcher)
    teams: int = 12
    skew: float = 0.5  # spread of each team's demand around its share (lognormal sigma; 0: in proportion)
    debug_on_top: bool = True  # debug runs at the top priority inside their team (else drawn as any other)

    def __post_init__(self) -> None:
        if (not 0 < self.demand <= 10 or self.gpus < self.gpus_per_node or self.gpus % self.gpus_per_node
                or not 0 <= self.wide_share <= 0.5 or not 0 <= self.debug_share <= 0.9
                or not 0 <= self.fill_share <= 0.5 or self.wide_share + self.debug_share + self.fill_share >= 1
                or not 2 <= self.depth <= 4 or self.teams < 1 or self.days < 1 or self.skew < 0):
            raise ValueError(f"family params out of range: {self}")


FAMILY_LEVELS = {2: ("lab", "team"), 3: ("lab", "program", "team"), 4: ("lab", "program", "team", "user")}
# The family's ranges (the short-work targets are stated over them): demand 1.2–3x, training runs 1–10 % of the
# workloads, debug runs 20–60 %, free fill none to 15 %, trees of 2–4 levels and 5–40 teams.
DEMAND, WIDE, DEBUG, TEAMS = (1.2, 3.0), (0.01, 0.10), (0.2, 0.6), (5, 40)
FILL, DEPTHS = (0.0, 0.02, 0.05, 0.15), (2, 3, 4)


def family_draw(index: int, gpus: int = 256, days: int = 7) -> tuple[Family, int]:
    """Return month ``index`` of the drawn family (its params and seed): the same index, the same month."""
    r = random.Random(1000 + index)
    params = Family(
        gpus=gpus, days=days, demand=round(r.uniform(*DEMAND), 2), wide_share=round(r.uniform(*WIDE), 3),
        debug_share=round(r.uniform(*DEBUG), 2), fill_share=r.choice(FILL), depth=r.choice(DEPTHS),
        teams=r.randint(*TEAMS), skew=round(r.uniform(0, 1), 2), debug_on_top=r.random() < 0.7,
    )
    return params, index


def drawn(params: Family, seed: int) -> tuple[list[WorkloadSubmitted], Budgets]:
    """Return one month of the drawn family: submissions in time order and its budget tree.

    Submissions come evenly over ``days``. Each workload belongs to a team drawn in proportion to
    the team's share of the cluster times a lognormal factor of spread ``skew`` (drawn once per
    team), and to one of its researchers (at depth 4). Its kind is drawn by the workload shares:
    training runs (resumable, 8 GPUs up to the whole cluster in whole hosts, 2–24 h of work,
    protected 4–8 h, checkpoints every 15–60 min), debug runs (1–8 GPUs, protected 5–15 min, 1–15 min
    of work, not resumable), free fill, and the rest batch (1–8 GPUs, protected 30 min–2 h, 70 %
    resumable) with 3 % interactive sessions. Workloads are drawn until the submitted work reaches
    ``demand`` times the cluster's GPU-hours.
    """
    rng = random.Random(seed)
    p = params
    cluster = "fam"
    budgets, teams = _family_tree(rng, cluster, p)
    team_paths = list(teams)
    weights = [share * rng.lognormvariate(0.0, p.skew) for share, _ in teams.values()]
    span = p.days * 86_400
    target = p.demand * p.gpus * span
    widths = [w for w in (8, 16, 32, 64, 128, 256) if w < p.gpus] + [p.gpus]  # one in 20 or so the whole cluster
    width_weights = [1.0] * (len(widths) - 1) + [0.3]
    rows: list[tuple[int, str, dict[str, object]]] = []
    total = 0.0
    while total < target:
        roll = rng.random()
        if roll < p.wide_share:
            label, f = "wide", _hints(rng.choices(widths, width_weights)[0], rng.randint(4, 8) * 3600, True,
                                      int(rng.uniform(2, 24) * 3600), rng.choice((15, 30, 45, 60)) * 60,
                                      rng.randint(300, 1200), "training")
        elif roll < p.wide_share + p.debug_share:
            label, f = "debug", _hints(rng.choice((1, 1, 1, 2, 4, 8)), rng.choice((300, 600, 900)), False,
                                       rng.randint(60, 900), 0, 0, "debug")
        elif roll < p.wide_share + p.debug_share + p.fill_share:
            label, f = "fill", _fill(rng)
        else:
            label, f = _sustained_other(rng, 0.7)
            if label == "fill":  # the fill share is drawn above: this one is batch
                label, f = "batch", {**f, "min_runtime_s": 1800}
        total += float(f["gpus"]) * float(f["work_s"])  # type: ignore[arg-type]
        team = rng.choices(team_paths, weights)[0]
        rows.append((rng.randrange(0, span), rng.choice(teams[team][1]), {"label": label, **f}))
    rows.sort(key=lambda r: r[0])
    subs = _submissions(rng, cluster, rows, lambda leaf: leaf.rsplit("/", 1)[-1])
    if not p.debug_on_top:
        subs = [s if s.kind != "debug" else s.model_copy(update={"priority": rng.choice((2, 2, 2, 1, 0))})
                for s in subs]
    return subs, budgets


def _family_tree(
    rng: random.Random, cluster: str, p: Family
) -> tuple[Budgets, dict[str, tuple[float, list[str]]]]:
    """Return the budgets and, per team, its share of the cluster and the leaves its work is charged to."""
    levels = FAMILY_LEVELS[p.depth]
    nodes = [BudgetNode("lab", 1.0, ("director",))]
    programs = max(1, min(p.teams // 3, 6)) if p.depth >= 3 else 0
    prog_share = {f"lab/p{i}": round(rng.uniform(0.5, 2.0), 2) for i in range(programs)}
    nodes += [BudgetNode(g, s, (f"{g.rsplit('/', 1)[-1]}-pi",)) for g, s in prog_share.items()]
    team_parent = {f"t{i:02d}": (f"lab/p{i % programs}" if programs else "lab") for i in range(p.teams)}
    team_share = {t: round(rng.uniform(0.5, 2.0), 2) for t in team_parent}
    out: dict[str, tuple[float, list[str]]] = {}
    prog_total = sum(prog_share.values())
    n = 0
    for t, parent in team_parent.items():
        path = f"{parent}/{t}"
        nodes.append(BudgetNode(path, team_share[t], (f"{t}-lead",)))
        siblings = sum(team_share[u] for u, q in team_parent.items() if q == parent)
        fraction = team_share[t] / siblings * (prog_share[parent] / prog_total if programs else 1.0)
        leaves = [path]
        if p.depth == 4:
            leaves = []
            for _ in range(rng.randint(3, 12)):
                n += 1
                leaf = f"{path}/r{n:03d}"
                nodes.append(BudgetNode(leaf, round(rng.uniform(0.5, 2.0), 2), ()))
                leaves.append(leaf)
        out[path] = (fraction, leaves)
    return Budgets(cluster, p.gpus, p.gpus_per_node, tuple(nodes), levels, "team"), out
