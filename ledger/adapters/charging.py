"""Charge imported records to the budget tree: each workload to the deepest node it belongs to.

A scheduler names a record's budget in its own terms (Slurm: cluster, account, user; Kueue:
namespace and LocalQueue, admitted to a ClusterQueue; Philly: virtual cluster and user; a CSV:
a path). The budgets file names tree paths. The rule that joins them:

* the longest leading part of the record's names that is a tree path is its node; failing that,
  the node whose own name is the first of them, at any depth (Slurm account names are unique in
  an association tree, so an account may sit anywhere in it);
* from there, each further name that is a child of the node moves the charge down: a tree that
  names users charges the user's node below the account, one that names accounts only charges
  the account.

Per source, the names are: Slurm and Philly ``(account or vc, user)``; Kueue ``(ClusterQueue,
namespace)``, the ClusterQueue learnt from the admissions of the LocalQueue's workloads (Kueue
records no user; the namespace stands for it); CSV the budget path's parts.

A record whose names reach no node keeps the path the adapter gave it. When that path is itself a
node of the tree (a Philly job that names no virtual cluster keeps ``philly``, which is the root
of a tree named after the cluster), the record is charged to that node and counted with it;
otherwise the audits list it as an undefined budget, and the charge summary counts such records
by account (or LocalQueue) with example workload ids. Nothing is dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ledger.adapters.common import Record
from ledger.budgets import Budgets
from ledger.log.avro_columns import Coded

__all__ = [
    "Charge", "ChargeSummary", "Charger", "charge_records", "event_record", "kueue_queues",
    "source_of", "tree_events", "tree_tag",
]  # fmt: skip

EXAMPLES = 3


@dataclass
class _Unmatched:
    reason: str
    workloads: int = 0
    examples: list[tuple[int, str]] = field(default_factory=list)  # (rank in the file, workload id)


@dataclass
class ChargeSummary:
    """How the workloads of an import were charged: per node, and those that matched none."""

    charged: Counter[str] = field(default_factory=Counter)
    unmatched: dict[str, _Unmatched] = field(default_factory=dict)

    @property
    def unmatched_workloads(self) -> int:
        """Return how many workloads match no node of the tree."""
        return sum(u.workloads for u in self.unmatched.values())

    def add(self, node: str | None, key: str, reason: str, workload_id: str, n: int = 1) -> None:
        """Count ``n`` workloads charged to ``node`` (None: unmatched under ``key`` for ``reason``)."""
        if node is not None:
            self.charged[node] += n
            return
        u = self.unmatched.setdefault(key, _Unmatched(reason))
        if len(u.examples) < EXAMPLES:
            u.examples.append((u.workloads, workload_id))
        u.workloads += n

    def add_unmatched(self, key: str, reason: str, n: int, examples: list[tuple[int, str]]) -> None:
        """Count ``n`` workloads unmatched under ``key``; ``examples`` (rank in the file, workload id) of some of them.

        The examples kept are the first of the file (lowest ranks), whatever order the parts of a
        file are charged in.
        """
        u = self.unmatched.setdefault(key, _Unmatched(reason))
        u.workloads += n
        u.examples = sorted(u.examples + examples)[:EXAMPLES]

    def merge(self, other: ChargeSummary) -> None:
        """Add the counts of another summary (of another file of the same import)."""
        self.charged.update(other.charged)
        for key, u in other.unmatched.items():
            mine = self.unmatched.setdefault(key, _Unmatched(u.reason))
            mine.workloads += u.workloads
            mine.examples += u.examples[: max(0, EXAMPLES - len(mine.examples))]

    def render(self) -> str:
        """Return the summary lines printed after an import or audit with a budgets file."""
        lines = [f"  charged:     {sum(self.charged.values())} workloads to {len(self.charged)} budget nodes"]
        lines += [f"    {node:<40} {n}" for node, n in sorted(self.charged.items())]
        lines.append(
            f"  unmatched:   {self.unmatched_workloads} workloads of {len(self.unmatched)} accounts match no node "
            "(audited as undefined budgets)"
        )
        for key, u in sorted(self.unmatched.items()):
            shown = ", ".join(workload for _, workload in u.examples)
            lines.append(f"    {key}: {u.workloads} workloads, e.g. {shown} ({u.reason})")
        return "\n".join(lines)


def source_of(event_id: str) -> str:
    """Return the adapter an imported event id names (``cluster/source/...``), or '' for other ids."""
    parts = event_id.split("/", 2)
    return parts[1] if len(parts) == 3 else ""


class Charger:
    """Find the deepest node of a budget tree that a record's names reach."""

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.paths = budgets.paths
        self.children: dict[str, dict[str, str]] = {}
        self.named: dict[str, list[str]] = {}
        for node in budgets.nodes:
            name = node.path.rsplit("/", 1)[-1]
            self.named.setdefault(name, []).append(node.path)
            if node.parent is not None:
                self.children.setdefault(node.parent, {})[name] = node.path
        self._cache: dict[tuple[str, ...], tuple[str | None, str]] = {}

    def node_for(self, names: Sequence[str]) -> tuple[str | None, str]:
        """Return (node, '') for the names of a record, most general first; (None, reason) if none matches."""
        key = tuple(names)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._resolve(key)
        return hit

    def _resolve(self, names: tuple[str, ...]) -> tuple[str | None, str]:
        if not names or not names[0]:
            return None, "the record names no account"
        node: str | None = None
        rest: tuple[str, ...] = ()
        for k in range(len(names), 0, -1):
            if "/".join(names[:k]) in self.paths:
                node, rest = "/".join(names[:k]), names[k:]
                break
        if node is None:
            found = self.named.get(names[0], [])
            if len(found) > 1:
                return None, f"{len(found)} nodes are named {names[0]!r}: {', '.join(sorted(found))}"
            if not found:
                return None, f"no node of the tree is named {names[0]!r}"
            node, rest = found[0], names[1:]
        for name in rest:
            child = self.children.get(node, {}).get(name)
            if child is None:
                break
            node = child
        return node, ""


def _names(source: str, budget: str, hint: str | None) -> tuple[tuple[str, ...], str]:
    """Return the names a record's budget path stands for, most general first, and the key it is reported under."""
    parts = tuple(budget.split("/"))
    if source == "kueue":  # cluster/namespace/localqueue, admitted to ClusterQueue ``hint``
        lq = "/".join(parts[1:])
        if hint is None:
            return (), f"LocalQueue {lq}"
        return (hint, parts[1] if len(parts) > 1 else ""), f"LocalQueue {lq} (ClusterQueue {hint})"
    if source in ("slurm", "philly"):  # cluster/account/user, cluster/vc/user
        return parts[1:], f"account {parts[1]}" if len(parts) > 1 else f"cluster {parts[0]} (no account)"
    return parts, f"budget {budget}"


def _reason(source: str, names: tuple[str, ...], reason: str) -> str:
    if source == "kueue" and not names:
        return "no admitted workload of it names its ClusterQueue"
    return reason or "the records name no account"


def kueue_queues(records: Iterable[Record]) -> dict[str, str]:
    """Return LocalQueue budget path -> ClusterQueue, from the admissions (starts) the records show."""
    budget_of: dict[str, str] = {}
    seen: dict[str, Counter[str]] = {}
    for name, r in records:
        short = name.rsplit(".", 1)[-1]
        if short == "WorkloadSubmitted":
            budget_of[r["workload_id"]] = r["budget"]
        elif short == "WorkloadStarted" and r["nodes"]:
            budget = budget_of.get(r["workload_id"])
            if budget is not None:  # a run is recorded on "clusterQueue/flavor" (ledger.adapters.kueue)
                seen.setdefault(budget, Counter())[str(r["nodes"][0]).split("/", 1)[0]] += 1
    return {budget: c.most_common(1)[0][0] for budget, c in seen.items()}


def _mapping(
    charger: Charger, source: str, budgets: Iterable[str], hints: dict[str, str]
) -> dict[str, tuple[str | None, str, str]]:
    """Return source budget path -> (node or None, report key, reason)."""
    out: dict[str, tuple[str | None, str, str]] = {}
    for budget in budgets:
        names, key = _names(source, budget, hints.get(budget))
        node, reason = charger.node_for(names) if names else (None, "")
        if node is None and budget in charger.paths:
            # the path the record keeps is itself a node (a Philly job naming no virtual cluster keeps
            # ``philly``, the root of a tree named after the cluster): it is charged there, not undefined
            node = budget
        out[budget] = (node, key, _reason(source, names, reason))
    return out


class Charge:
    """Charging while an import reads a file: each workload's budget path becomes its node of the tree, counted."""

    def __init__(self, charger: Charger) -> None:
        self.charger = charger
        self.summary = ChargeSummary()

    def budgets(self, source: str, budget: Coded, workload_id: Any, rank: npt.NDArray[np.int64]) -> Coded:
        """Return the budget column charged: each distinct path mapped once; count the workloads (one per row)."""
        values = list(budget.values)
        codes = np.asarray(budget.codes)
        mapping = _mapping(self.charger, source, values, {})
        counts = np.bincount(codes, minlength=len(values))
        unmatched = [k for k, v in enumerate(values) if counts[k] and mapping[v][0] is None]
        if unmatched:
            order = np.lexsort((rank, codes))  # by budget, then the order of the file
            starts = np.searchsorted(codes[order], unmatched)
            for k, start in zip(unmatched, starts.tolist(), strict=True):
                rows = order[start : start + min(EXAMPLES, int(counts[k]))]
                ids = _text_at(workload_id, rows)
                _, key, reason = mapping[values[k]]
                examples = list(zip(rank[rows].tolist(), ids, strict=True))
                self.summary.add_unmatched(key, reason, int(counts[k]), examples)
        for k, value in enumerate(values):
            node = mapping[value][0]
            if counts[k] and node is not None:
                self.summary.charged[node] += int(counts[k])
        return Coded(codes, [value if mapping[value][0] is None else mapping[value][0] for value in values])

    def records(self, source: str, records: list[Record]) -> list[Record]:
        """Return events added whole with each submission charged (Kueue's: to its ClusterQueue's node)."""
        hints = kueue_queues(records)
        mapping = _mapping(
            self.charger, source, {r["budget"] for n, r in records if n == "WorkloadSubmitted"}, hints
        )
        out: list[Record] = []
        for name, r in records:
            if name != "WorkloadSubmitted":
                out.append((name, r))
                continue
            node, key, reason = mapping[r["budget"]]
            self.summary.add(node, key, reason, r["workload_id"])
            out.append((name, r if node is None else {**r, "budget": node}))
        return out


def _text_at(column: Any, rows: npt.NDArray[np.int64]) -> list[str]:
    if isinstance(column, np.ndarray):
        return [str(v) for v in column[rows].tolist()]
    return [str(v) for v in column.take(pa.array(rows, pa.int64())).to_pylist()]


def charge_records(records: Sequence[Record], charger: Charger) -> tuple[list[Record], ChargeSummary]:
    """Return the records with each submission charged to its node, and the summary (records are not changed)."""
    summary = ChargeSummary()
    kueue = [r for r in records if source_of(r[1].get("event_id", "")) == "kueue"]
    hints = kueue_queues(kueue) if kueue else {}
    cache: dict[tuple[str, str], tuple[str | None, str, str]] = {}
    out: list[Record] = []
    for name, r in records:
        if name.rsplit(".", 1)[-1] != "WorkloadSubmitted":
            out.append((name, r))
            continue
        source = source_of(r["event_id"])
        budget = r["budget"]
        hit = cache.get((source, budget))
        if hit is None:
            hit = cache[(source, budget)] = _mapping(charger, source, [budget], hints)[budget]
        node, key, reason = hit
        summary.add(node, key, reason, r["workload_id"])
        out.append((name, r if node is None else {**r, "budget": node}))
    return out, summary


def tree_tag(budgets: Budgets, at_us: int) -> str:
    """Return the id tag of a tree imported at ``at_us``: the same budgets at the same time give the same ids."""
    import hashlib

    from ledger import events as ev

    digest = hashlib.sha256(budgets.to_yaml().encode()).hexdigest()[:12]
    return f"{ev.from_us(at_us).strftime('%Y%m%dT%H%M%S')}-{digest}"


def tree_events(budgets: Budgets, at_us: int) -> list[Any]:
    """Return the capacity and node events of ``budgets`` at ``at_us``, their ids fixed by that time and the content.

    Importing the same file with the same budgets again gives the same ids (the log adds nothing);
    changed budgets, or an import whose period starts earlier, add a new version of the tree.
    """
    from ledger import events as ev

    tag = tree_tag(budgets, at_us)
    return [
        e.model_copy(update={"event_id": f"{budgets.cluster}/budgets/{tag}/" + e.event_id.split("/", 1)[1]})
        for e in budgets.events(ev.from_us(at_us))
    ]


def event_record(event: Any) -> Record:
    """Return an event as the (type name, record) pair the log reader yields: times in µs, arrays as lists."""
    from datetime import datetime

    from ledger import events as ev

    data: dict[str, Any] = dict(event.__dict__)
    for k, v in list(data.items()):
        if isinstance(v, datetime):
            data[k] = ev.to_us(v)
        elif isinstance(v, tuple):
            data[k] = list(v)
    return event.type_name, data
