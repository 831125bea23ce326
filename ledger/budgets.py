"""Load a budgets file (YAML or JSON) into the cluster and budget-tree events a replay starts from.

Format (docs/formats.md, "Budgets file")::

    cluster: {name: c1, gpus: 1024, gpus_per_node: 8}
    nodes:
      - {path: ai2, share: 1.0, managers: [ceo]}
      - {path: ai2/olmo, share: 0.35, managers: [olmo-pi]}
    levels: [org, program]    # optional: the tree's levels by depth, root first
    team_level: program       # optional: the level whose nodes are the team allocations

``share`` defaults to 1.0 and ``managers`` to none; ``since`` (optional, ISO 8601) is when the node was
created: its definition is timed then if that is later than the start. Every node's parent must be listed too (in any
order); errors name the file, the entry and the field.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from ledger.errors import InputError
from ledger.events import EARLIEST, LATEST, BudgetNodeDefined, ClusterCapacityChanged

_PATH = re.compile(r"^[^/\s]+(/[^/\s]+)*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SET_BY = "budgets-file"  # who defines the tree in a replay: the file itself, not a person


@dataclass(frozen=True)
class BudgetNode:
    """One node of the budget tree as the file states it."""

    path: str
    share: float
    managers: tuple[str, ...]
    since: datetime | None = None  # when the node was created, when its source says (Kueue objects do)

    @property
    def parent(self) -> str | None:
        """Return the parent's path, or None for a root."""
        return self.path.rsplit("/", 1)[0] if "/" in self.path else None


@dataclass(frozen=True)
class Budgets:
    """A cluster (name, size, host width) and its budget tree, parents before children."""

    cluster: str
    gpus: int
    gpus_per_node: int
    nodes: tuple[BudgetNode, ...]
    levels: tuple[str, ...] = ()  # the tree's levels by depth, root first; () when the file names none
    team_level: str | None = None  # the level the audit's headline quotes; None: the deepest

    def level_of(self, node: BudgetNode) -> str | None:
        """Return the name of the level ``node`` stands at, or None when the levels are not named."""
        return self.levels[node.path.count("/")] if self.levels else None

    @property
    def paths(self) -> frozenset[str]:
        """Return every node path."""
        return frozenset(n.path for n in self.nodes)

    @property
    def leaves(self) -> tuple[str, ...]:
        """Return the paths of nodes with no children (the teams), in file order."""
        parents = {n.parent for n in self.nodes}
        return tuple(n.path for n in self.nodes if n.path not in parents)

    def events(self, at: datetime) -> list[ClusterCapacityChanged | BudgetNodeDefined]:
        """Return the capacity event and one BudgetNodeDefined per node, all at ``at``, with fixed ids."""
        out: list[ClusterCapacityChanged | BudgetNodeDefined] = [
            ClusterCapacityChanged(
                event_id=f"{self.cluster}/capacity",
                cluster=self.cluster,
                time=at,
                gpus=self.gpus,
                gpus_per_node=self.gpus_per_node,
            )
        ]
        for node in self.nodes:
            out.append(
                BudgetNodeDefined(
                    event_id=f"{self.cluster}/budget/{node.path}",
                    cluster=self.cluster,
                    time=at if node.since is None or node.since <= at else node.since,
                    path=node.path,
                    parent=node.parent,
                    share=node.share,
                    managers=node.managers,
                    set_by=SET_BY,
                    level=self.level_of(node),
                    team_level=self.team_level,
                )
            )
        return out

    def to_yaml(self) -> str:
        """Return the budgets file text that loads back into this object."""
        lines = [f"cluster: {{name: {self.cluster}, gpus: {self.gpus}, gpus_per_node: {self.gpus_per_node}}}", "nodes:"]
        for n in self.nodes:
            managers = f", managers: [{', '.join(n.managers)}]" if n.managers else ""
            since = f", since: '{n.since.strftime('%Y-%m-%dT%H:%M:%SZ')}'" if n.since is not None else ""
            lines.append(f"  - {{path: {n.path}, share: {n.share!r}{managers}{since}}}")
        if self.levels:
            lines.append(f"levels: [{', '.join(self.levels)}]")
        if self.team_level is not None:
            lines.append(f"team_level: {self.team_level}")
        return "\n".join(lines) + "\n"


def _positive_int(where: str, field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: {field} = {value!r}: expected a whole number of at least {minimum}")
    return value


def _since(where: str, entry: dict[Any, Any]) -> datetime | None:
    """Return a node's optional ``since`` (ISO 8601, UTC if no offset) as an aware UTC datetime."""
    value = entry.get("since")
    if value is None:
        return None
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp itself
        t = value
    else:
        try:
            t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{where}: since = {value!r}: expected an ISO 8601 time such as 2026-03-01T00:00:00Z"
            ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    t = t.astimezone(UTC)
    if not EARLIEST <= t < LATEST:
        raise InputError(f"{where}: since = {value!r}: outside {EARLIEST:%Y}..{LATEST:%Y}")
    return t


def parse_budgets(data: object, source: str = "<budgets>") -> Budgets:
    """Return the Budgets a parsed YAML/JSON document describes; raise InputError naming entry and field."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping with keys 'cluster' and 'nodes'")
    unknown = set(data) - {"cluster", "nodes", "levels", "team_level"}
    if unknown:
        raise InputError(f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                         "expected cluster, nodes, levels, team_level")
    cl = data.get("cluster")
    if not isinstance(cl, dict):
        raise InputError(f"{source}: cluster: expected a mapping like {{name: c1, gpus: 1024, gpus_per_node: 8}}")
    name = cl.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"{source}: cluster.name = {name!r}: expected a name of letters, digits, '.', '_' or '-'")
    gpus = _positive_int(source, "cluster.gpus", cl.get("gpus"), 1)
    per_node = _positive_int(source, "cluster.gpus_per_node", cl.get("gpus_per_node", 8), 1)
    if gpus % per_node:
        raise InputError(f"{source}: cluster.gpus = {gpus} is not a whole number of {per_node}-GPU hosts")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputError(f"{source}: nodes: expected a non-empty list of {{path, share, managers}}")
    nodes: dict[str, BudgetNode] = {}
    for i, entry in enumerate(raw_nodes):
        where = f"{source}: nodes[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a mapping with path, share and managers")
        extra = set(entry) - {"path", "share", "managers", "since"}
        if extra:
            raise InputError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}")
        path = entry.get("path")
        if not isinstance(path, str) or not _PATH.match(path):
            raise InputError(f"{where}: path = {path!r}: expected a tree path such as org/program/team")
        where = f"{where} ({path})"
        share = entry.get("share", 1.0)
        if isinstance(share, bool) or not isinstance(share, int | float) or not math.isfinite(share) or share < 0:
            raise InputError(f"{where}: share = {share!r}: expected a number of at least 0")
        managers = entry.get("managers", []) or []
        if not isinstance(managers, list) or not all(isinstance(m, str) and m.strip() for m in managers):
            raise InputError(f"{where}: managers = {managers!r}: expected a list of names")
        if path in nodes:
            raise InputError(f"{where}: path = {path!r}: defined twice")
        nodes[path] = BudgetNode(path, float(share), tuple(m.strip() for m in managers), _since(where, entry))
    for i, node in enumerate(nodes.values()):
        if node.parent is not None and node.parent not in nodes:
            raise InputError(f"{source}: nodes[{i}] ({node.path}): parent {node.parent!r} is not defined")
    ordered = sorted(nodes.values(), key=lambda n: n.path.count("/"))  # stable: parents first, file order kept
    levels, team_level = _levels(source, data, 1 + ordered[-1].path.count("/"))
    return Budgets(name, gpus, per_node, tuple(ordered), levels, team_level)


def _levels(source: str, data: dict[Any, Any], depths: int) -> tuple[tuple[str, ...], str | None]:
    """Return the file's ``levels`` (one distinct name per depth of the tree) and ``team_level`` (one of them)."""
    raw, team = data.get("levels"), data.get("team_level")
    if raw is None:
        if team is not None:
            raise InputError(f"{source}: team_level = {team!r}: name the levels first (levels: [org, team, user])")
        return (), None
    if not isinstance(raw, list) or not all(isinstance(x, str) and _NAME.match(x) for x in raw):
        raise InputError(f"{source}: levels = {raw!r}: expected a list of names, root first, "
                         "such as [org, program, team, user]")
    if len(set(raw)) < len(raw):
        twice = sorted({x for x in raw if raw.count(x) > 1})
        raise InputError(f"{source}: levels = {raw!r}: {', '.join(twice)} named twice")
    if len(raw) != depths:
        raise InputError(f"{source}: levels = {raw!r}: {len(raw)} name(s) for a tree {depths} level(s) deep "
                         "(one name per depth, root first)")
    if team is not None and team not in raw:
        raise InputError(f"{source}: team_level = {team!r}: not one of the levels {', '.join(raw)}")
    return tuple(raw), team


def load_budgets(path: str | Path) -> Budgets:
    """Read a budgets file (YAML or JSON) and return its Budgets; raise InputError naming file, entry, field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a byte-order mark, if any, is not text
    except OSError as exc:
        raise InputError(f"{path}: cannot read the budgets file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a budgets file: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}") from None
    return parse_budgets(data, str(path))


__all__ = ["SET_BY", "BudgetNode", "Budgets", "load_budgets", "parse_budgets"]
