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

Inside a team, debug runs (minimum runtime ≤ 15 min) are submitted at the top priority (3) and
the rest at 0–2.

Everything comes from one ``random.Random(seed)``: the same params and seed give the same month.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ledger.budgets import BudgetNode, Budgets
from ledger.events import WorkloadSubmitted, trusted

__all__ = ["SPREAD", "START", "Params", "month"]

START = datetime(2026, 6, 1, tzinfo=UTC)  # a Monday
SPREAD = (8.0, 4.0, 2.0, 1.0, 1.0, 1.0)  # team shares when budgets are spread


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
    subs: list[WorkloadSubmitted] = []
    for n, (t, team, f) in enumerate(rows):
        label = str(f.pop("label"))
        wid = f"{label[:4]}-{n:06d}"
        subs.append(
            trusted(
                WorkloadSubmitted,
                {
                    "event_id": f"{cluster}/sub/{wid}", "cluster": cluster, "time": START + timedelta(seconds=t),
                    "schema_version": 2, "workload_id": wid, "budget": team, "user": f"u-{team[-2:]}",
                    "gpus": f["gpus"], "nodes": 0, "min_runtime_s": f["min_runtime_s"], "resumable": f["resumable"],
                    "priority": _priority(rng, str(f["kind"])), "kind": f["kind"], "work_s": f["work_s"],
                    "checkpoint_interval_s": f["checkpoint_interval_s"], "restart_s": f["restart_s"],
                },
            )
        )
    return subs, budgets


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
