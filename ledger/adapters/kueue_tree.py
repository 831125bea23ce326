"""Kueue's Cohort and ClusterQueue objects to a budgets file.

Input: YAML (one or many documents, as ``kubectl get cohorts,clusterqueues -o yaml`` or the manifests
an operator applies) or JSON (a ``List`` with ``items``, or a plain list). Objects of other kinds
(LocalQueue, ResourceFlavor, Workload...) are counted and left out.

* **Tree**: a ClusterQueue sits below its cohort (``spec.cohort``, ``spec.cohortName`` in
  ``v1beta2``); a Cohort below its parent cohort (``spec.parentName``, hierarchical cohorts). A
  cohort named by a queue but given no object of its own is an implicit cohort (share 1), as in
  Kueue. Queues without a cohort, and cohorts without a parent, are the top nodes.
* **Shares**: ``spec.fairSharing.weight`` (default 1; 0 gives no share), a number or a Kubernetes
  quantity (``"2"``, ``"0.5"``, ``"500m"``).
* **Since**: each node's ``metadata.creationTimestamp`` when the object has one: an import times the
  node's definition then if that is later than the start of the imported period.
* **Capacity**: the sum of the ``nominalQuota`` of the GPU resource (default ``nvidia.com/gpu``) over
  every flavor of every resource group of the queues and cohorts; ``--gpus`` overrides it.

Workloads (``gpuledger import kueue``) charge the node of the ClusterQueue that admitted their
LocalQueue's workloads, or the namespace's node below it when the tree names namespaces.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from ledger.adapters.common import RowError, budget_path, level_names, parse_local_time
from ledger.budgets import BudgetNode, Budgets
from ledger.errors import InputError

__all__ = ["KueueTree", "kueue_budgets", "parse_kueue_objects"]

# a Kubernetes quantity: a decimal number, then a binary or decimal SI suffix or a decimal exponent
_QUANTITY = re.compile(r"^\+?((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([numkMGTPE]|[KMGTPE]i)|[eE]([+-]?[0-9]+))?$")
_SCALE: dict[str | None, float] = {
    None: 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    **{f"{p}i": 1024.0 ** (i + 1) for i, p in enumerate("KMGTPE")},
}  # fmt: skip


@dataclass
class _Queue:
    name: str
    kind: str  # "Cohort" or "ClusterQueue"
    parent: str | None
    weight: float
    gpus: int
    created: datetime | None = None


@dataclass
class KueueTree:
    """Cohorts and ClusterQueues by name, and what else the file held."""

    queues: dict[str, _Queue]
    other_kinds: dict[str, int]
    file: str = "<kueue objects>"


def _quantity(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{where} = {value!r}: expected a number or a quantity such as '2' or '500m'")
    if isinstance(value, int | float):
        if isinstance(value, int) and value.bit_length() > 1000:  # no float holds it
            raise InputError(f"{where} = {value!r}: too large")
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{where} = {value!r}: expected a number of at least 0")
        return float(value)
    value_text = str(value)
    m = _QUANTITY.match(value_text.strip())
    if not m:
        raise InputError(f"{where} = {value!r}: expected a number or a quantity such as '2' or '500m'")
    try:
        number = float(m.group(1)) * (10.0 ** int(m.group(3)) if m.group(3) is not None else _SCALE[m.group(2)])
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InputError(f"{where} = {value_text!r}: too large")
    return number


def _objects(text: str, file: str) -> list[Any]:
    try:
        docs = list(yaml.safe_load_all(text))  # JSON is YAML too
    except yaml.YAMLError as exc:
        raise InputError(f"{file}: neither YAML nor JSON: {exc}") from None
    out: list[Any] = []
    for doc in docs:
        if doc is None:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("items"), list):
            out += doc["items"]
        elif isinstance(doc, list):
            out += doc
        else:
            out.append(doc)
    return out


def _field(obj: dict[str, Any], key: str, kind: type, where: str, name: str) -> Any:
    """Return ``obj[key]`` (an empty ``kind`` when absent or null); raise InputError if it is not a ``kind``."""
    value = obj.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        noun = "a list" if kind is list else "a mapping"
        raise InputError(f"{where}: {name} = {value!r}: expected {noun}")
    return value


def _gpus(spec: dict[str, Any], resource: str, where: str) -> int:
    total = 0.0
    for g, group in enumerate(_field(spec, "resourceGroups", list, where, "spec.resourceGroups")):
        at = f"spec.resourceGroups[{g}]"
        if not isinstance(group, dict):
            raise InputError(f"{where}: {at} = {group!r}: expected a mapping")
        for f, flavor in enumerate(_field(group, "flavors", list, where, f"{at}.flavors")):
            if not isinstance(flavor, dict):
                raise InputError(f"{where}: {at}.flavors[{f}] = {flavor!r}: expected a mapping")
            resources = _field(flavor, "resources", list, where, f"{at}.flavors[{f}].resources")
            for r, res in enumerate(resources):
                if isinstance(res, dict) and res.get("name") == resource:
                    total += _quantity(
                        res.get("nominalQuota", 0),
                        f"{where}: spec.resourceGroups[{g}].flavors[{f}].resources[{r}].nominalQuota",
                    )
    if total != int(total):
        raise InputError(f"{where}: {resource} nominalQuota adds up to {total}, not a whole number of GPUs")
    return int(total)


def parse_kueue_objects(text: str, file: str, gpu_resource: str = "nvidia.com/gpu") -> KueueTree:
    """Read Cohort and ClusterQueue objects; raise InputError naming file, object and field."""
    queues: dict[str, _Queue] = {}
    other: dict[str, int] = {}
    for i, obj in enumerate(_objects(text, file)):
        if not isinstance(obj, dict):
            raise InputError(f"{file}: object {i}: expected a mapping, found {type(obj).__name__}")
        kind = obj.get("kind")
        if kind not in ("Cohort", "ClusterQueue"):
            other[str(kind)] = other.get(str(kind), 0) + 1
            continue
        meta = _field(obj, "metadata", dict, f"{file}: object {i} ({kind})", "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{file}: object {i} ({kind}): metadata.name is missing")
        where = f"{file}: {kind} {name}"
        spec = _field(obj, "spec", dict, where, "spec")
        parent = spec.get("parentName") if kind == "Cohort" else spec.get("cohortName", spec.get("cohort"))
        if parent is not None and (not isinstance(parent, str) or not parent):
            raise InputError(f"{where}: parent cohort {parent!r} is not a name")
        fair = _field(spec, "fairSharing", dict, where, "spec.fairSharing")
        weight = _quantity(fair.get("weight", 1), f"{where}: spec.fairSharing.weight")
        key = f"{kind}/{name}"
        if key in queues:
            raise InputError(f"{where}: defined twice")
        stamp = meta.get("creationTimestamp")
        created = None
        if stamp is not None:
            try:
                created = parse_local_time(str(stamp), UTC, "metadata.creationTimestamp")
            except RowError as exc:
                raise InputError(f"{where}: {exc}") from None
        queues[key] = _Queue(name, kind, parent or None, weight, _gpus(spec, gpu_resource, where), created)
    return KueueTree(queues, other, file)


def kueue_budgets(
    tree: KueueTree, cluster: str, gpus: int | None, gpus_per_node: int
) -> tuple[Budgets, list[str]]:
    """Return the budgets the cohorts and queues stand for, and notes on what was read."""
    notes: list[str] = []
    file = tree.file
    cohorts = {q.name: q for q in tree.queues.values() if q.kind == "Cohort"}
    cqs = [q for q in tree.queues.values() if q.kind == "ClusterQueue"]
    if not cqs:
        raise InputError(f"{file}: no ClusterQueue object found: workloads are charged to ClusterQueues")
    implicit = sorted({q.parent for q in [*cqs, *cohorts.values()] if q.parent and q.parent not in cohorts})
    for name in implicit:
        cohorts[name] = _Queue(name, "Cohort", None, 1.0, 0)
    if implicit:
        notes.append(f"implicit cohorts (no Cohort object, share 1): {', '.join(implicit)}")
    names = [q.name for q in cqs] + list(cohorts)
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        notes.append(f"a Cohort and a ClusterQueue share the name(s) {', '.join(clash)}")

    def path_of(q: _Queue) -> str:
        """Return the budget path of a queue or cohort: its cohorts' names from the top, then its own."""
        parts = [q.name]
        chain = [q.name] if q.kind == "Cohort" else []  # cohorts only: a queue may share a cohort's name
        up = q.parent
        while up is not None:
            if up in chain:
                raise InputError(f"{file}: Cohort {up}: is its own ancestor ({' -> '.join([*chain, up])})")
            chain.append(up)
            parts.append(up)
            up = cohorts[up].parent
        return "/".join(budget_path(p) for p in reversed(parts))

    nodes: dict[str, BudgetNode] = {}
    owner: dict[str, _Queue] = {}
    for q in [*cohorts.values(), *cqs]:
        path = path_of(q)
        if path in owner:
            other = owner[path]
            raise InputError(f"{file}: {other.kind} {other.name} and {q.kind} {q.name} both stand for budget "
                             f"node {path!r} (same name, same parent cohort): rename one of them")
        owner[path] = q
        nodes[path] = BudgetNode(path, q.weight, (), q.created)
    ordered = tuple(sorted(nodes.values(), key=lambda n: n.path.count("/")))
    # ClusterQueues hold the quotas (the team allocations) and are the tree's leaves: the team level is
    # the deepest, where every queue stands for itself.
    kinds: list[set[str]] = []
    for n in ordered:
        depth = n.path.count("/")
        kinds.extend(set() for _ in range(depth + 1 - len(kinds)))
        kinds[depth].add("clusterqueue" if owner[n.path].kind == "ClusterQueue" else "cohort")
    levels = level_names(kinds, "cohort", "clusterqueue")
    notes.append(f"levels: {', '.join(levels)}; team level {levels[-1]} (ClusterQueues are the team allocations)")
    quota = sum(q.gpus for q in tree.queues.values())
    if gpus is None:
        if quota <= 0:
            raise InputError(f"{file}: no GPU nominalQuota in any resource group: give --gpus N (or --gpu-resource)")
        gpus = quota
    else:
        notes.append(f"capacity {gpus} GPUs from --gpus (the queues' nominal GPU quota adds up to {quota})")
    if gpus % gpus_per_node:
        gpus_per_node = math.gcd(gpus, gpus_per_node)
    if tree.other_kinds:
        notes.append("left out: " + ", ".join(f"{n} {k}" for k, n in sorted(tree.other_kinds.items())))
    return Budgets(budget_path(cluster), gpus, gpus_per_node, ordered, levels, levels[-1]), notes
