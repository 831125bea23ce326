"""Ledgers for the streaming tests, made by the embedded replay (the reference the worker must match)."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from ledger.budgets import parse_budgets
from ledger.core import Knobs
from ledger.events import Event, WorkloadSubmitted
from ledger.log import open_log
from ledger.replay.demo_month import generate
from ledger.replay.run import inputs_from_budgets, replay
from ledger.streams.state import ClusterState
from tests.streams.harness import is_output

DAY0 = datetime(2026, 3, 2, tzinfo=UTC)


@dataclass(frozen=True)
class Ledger:
    """A replayed ledger split into what came from outside (inputs) and what the core decided (outputs)."""

    events: tuple[Event, ...]

    @property
    def inputs(self) -> list[Event]:
        return [e for e in self.events if not is_output(e)]

    @property
    def outputs(self) -> list[Event]:
        return [e for e in self.events if is_output(e)]


def same_state(a: ClusterState, b: ClusterState) -> bool:
    """Return whether two worker states hold the same facts.

    Compared structurally: the core's pickled bytes also record which equal strings are one object,
    which differs between a run that was restored from a snapshot and one that was not.
    """
    return _header(a) == _header(b) and canonical(a.core) == canonical(b.core)


DERIVED = frozenset({"_branches"})  # memos the core rebuilds on demand and never snapshots (BudgetTree.branches)


def canonical(obj: object, _active: frozenset[int] = frozenset()) -> object:
    """Return a plain, comparable structure of an object graph (values only, no identities, no caches)."""
    if obj is None or isinstance(obj, str | int | float | bool | bytes):
        return obj
    if id(obj) in _active:
        return "<cycle>"
    active = _active | {id(obj)}
    if isinstance(obj, dict):
        return [(canonical(k, active), canonical(v, active)) for k, v in obj.items()]
    if isinstance(obj, list | tuple):
        return [canonical(v, active) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted(repr(canonical(v, active)) for v in obj)
    fields = dict(getattr(obj, "__dict__", {}))
    # __mypyc_attrs__: the attributes of a class compiled by the optional fast build (it has no __dict__)
    for slot in (*getattr(type(obj), "__slots__", ()), *getattr(type(obj), "__mypyc_attrs__", ())):
        if hasattr(obj, slot):
            fields[slot] = getattr(obj, slot)
    # memoised values are derived, not state; attributes by name: the order they were set in is not
    # state either (a restored object's differs in the pure build), while a dict's order may be
    facts = {k: fields[k] for k in sorted(fields) if "cache" not in k and k not in DERIVED}
    return (type(obj).__name__, canonical(facts, active))


def _header(st: ClusterState) -> tuple[object, ...]:
    return (st.cluster, st.partition, st.offset, st.last_event_us, sorted(st.seen), st.occupancy.to_dict())


def _replay(inputs: object) -> Ledger:
    with tempfile.TemporaryDirectory() as d:
        replay(inputs, Knobs(), d)  # type: ignore[arg-type]
        return Ledger(tuple(open_log(d)))


@lru_cache(maxsize=2)
def lab_month(scale: float = 0.01) -> Ledger:
    """Return a small demo month (a budget tree of ~20 teams, debug, batch, sweeps and training) replayed."""
    month = generate(7, scale=scale, researchers=20)
    return _replay(inputs_from_budgets(month.budgets, list(month.submissions)))


@lru_cache(maxsize=1)
def checkpoint_heavy(workloads: int = 430, seed: int = 11) -> Ledger:
    """Return a busy 32-GPU cluster whose ledger is mostly checkpoints: cheap events, many of them.

    Three teams with unequal shares submit 2-GPU workloads that checkpoint every minute; short
    protected windows make the fair-share order preempt and requeue some of them.
    """
    budgets = parse_budgets(
        {
            "cluster": {"name": "busy", "gpus": 32, "gpus_per_node": 8},
            "nodes": [
                {"path": "lab", "share": 1.0},
                {"path": "lab/vision", "share": 0.5},
                {"path": "lab/speech", "share": 0.3},
                {"path": "lab/robots", "share": 0.2},
            ],
        }
    )
    rng = random.Random(seed)
    subs = []
    for i in range(workloads):
        team = rng.choice(("lab/vision", "lab/speech", "lab/robots"))
        subs.append(
            WorkloadSubmitted(
                event_id=f"busy/sub/{i}", cluster="busy", time=DAY0 + timedelta(seconds=rng.randrange(0, 3 * 86_400)),
                workload_id=f"w{i:05d}", budget=team, user=team.split("/")[1], gpus=rng.choice((1, 2, 4)),
                min_runtime_s=rng.choice((0, 300, 900)), resumable=rng.random() < 0.9,
                work_s=rng.randrange(60, 180) * 60, checkpoint_interval_s=60, restart_s=30,
            )
        )
    return _replay(inputs_from_budgets(budgets, subs))
