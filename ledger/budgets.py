"""Load a budgets file (YAML or JSON) into the cluster and budget-tree events a replay starts from.

Format (docs/formats.md, "Budgets file")::

    cluster: {name: c1, gpus: 1024, gpus_per_node: 8}
    nodes:
      - {path: ai2, share: 1.0, managers: [ceo]}
      - {path: ai2/olmo, share: 0.35, managers: [olmo-pi]}

``share`` defaults to 1.0 and ``managers`` to none; ``since`` (optional, ISO 8601) is when the node was
created: its definition is timed then if that is later than the start. Every node's parent must be listed too (in any
order); errors name the file, the entry and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from ledger.errors import InputError
from ledger.events import EARLIEST, LATEST, BudgetNodeDefined, ClusterCapacityChanged

_PATH = r"^[^/\s]+(/[^/\s]+)*$"  # org/program/team: no empty part, no whitespace
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
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
                )
            )
        return out

    def to_yaml(self) -> str:
        """Return the budgets file text that loads back into this object (one flow-style line per node)."""
        cluster = _Flow(name=self.cluster, gpus=self.gpus, gpus_per_node=self.gpus_per_node)
        nodes = []
        for n in self.nodes:
            node = _Flow(path=n.path, share=n.share)
            if n.managers:
                node["managers"] = list(n.managers)
            if n.since is not None:
                node["since"] = n.since.strftime("%Y-%m-%dT%H:%M:%SZ")
            nodes.append(node)
        return yaml.dump(
            {"cluster": cluster, "nodes": nodes}, Dumper=_Dumper, sort_keys=False, width=1 << 30, allow_unicode=True
        )


class _Flow(dict[str, Any]):
    """A mapping written on one line (``{path: a, share: 1.0}``), as people write a budgets file."""


class _Dumper(yaml.SafeDumper):
    """yaml.safe_dump's dumper, with list items indented under their key and ``_Flow`` mappings on one line."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)


def _utc(value: datetime) -> datetime:
    """Return ``value`` in UTC (a time with no offset is taken as UTC), inside the events' time range."""
    t = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if not EARLIEST <= t < LATEST:
        raise ValueError(f"outside {EARLIEST:%Y}..{LATEST:%Y}")
    return t


_ENTRY = ConfigDict(extra="forbid", frozen=True)  # an unknown key is a mistake, named
_Name = Annotated[str, StringConstraints(strict=True, pattern=_NAME)]
_Count = Annotated[int, Field(strict=True, ge=1)]


class ClusterSpec(BaseModel):
    """The file's ``cluster`` entry."""

    model_config = _ENTRY
    name: _Name
    gpus: _Count
    gpus_per_node: _Count = 8


class NodeSpec(BaseModel):
    """One entry of the file's ``nodes`` list."""

    model_config = _ENTRY
    path: Annotated[str, StringConstraints(strict=True, pattern=_PATH)]
    share: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.0
    managers: list[Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1)]] | None = None
    since: Annotated[datetime, AfterValidator(_utc)] | None = None

    @field_validator("share", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("not a number")  # "1.5" or true is a mistake in a budgets file, not a share
        return value

    @field_validator("since", mode="before")
    @classmethod
    def _time(cls, value: object) -> object:
        if isinstance(value, int | float):  # pydantic would read a number as Unix seconds
            raise ValueError("expected an ISO 8601 time such as 2026-03-01T00:00:00Z")
        return value


class BudgetsFile(BaseModel):
    """A budgets file as written: the cluster and the list of nodes."""

    model_config = _ENTRY
    cluster: ClusterSpec
    nodes: Annotated[list[NodeSpec], Field(min_length=1)]


_EXPECTED = {
    "cluster": "a mapping like {name: c1, gpus: 1024, gpus_per_node: 8}",
    "nodes": "a non-empty list of {path, share, managers}",
    "name": "a name of letters, digits, '.', '_' or '-'",
    "gpus": "a whole number of at least 1",
    "gpus_per_node": "a whole number of at least 1",
    "path": "a tree path such as org/program/team",
    "share": "a number of at least 0",
    "managers": "a list of names",
    "since": "an ISO 8601 time such as 2026-03-01T00:00:00Z",
}


def _problem(source: str, data: Any, error: ValidationError) -> InputError:
    """Return the one-line InputError naming the entry, field and value of pydantic's first complaint."""
    errors = error.errors()
    err = errors[0]
    loc = list(err["loc"])
    where, head = source, loc
    if loc[:1] == ["nodes"] and len(loc) >= 2:
        where, head = f"{source}: nodes[{loc[1]}]", loc[2:]
        path = data["nodes"][loc[1]].get("path") if isinstance(data["nodes"][loc[1]], dict) else None
        if head and head[0] != "path" and isinstance(path, str):
            where += f" ({path})"
        if not head:
            return InputError(f"{where}: expected a mapping with path, share and managers")
    if err["type"] == "extra_forbidden":
        same_entry = (e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == err["loc"][:-1])
        extra = sorted(str(e["loc"][-1]) for e in same_entry)
        if not head[:-1] and where == source:
            return InputError(f"{where}: unknown key(s) {', '.join(extra)}; expected cluster, nodes")
        return InputError(f"{where}: unknown field(s) {', '.join(extra)}")
    if not head:
        return InputError(f"{where}: expected a mapping with keys 'cluster' and 'nodes'")
    if len(head) == 1 and head[0] in ("cluster", "nodes"):
        return InputError(f"{where}: {head[0]}: expected {_EXPECTED[str(head[0])]}")
    field = str(head[1] if head[0] == "cluster" else head[0])
    name = f"cluster.{field}" if head[0] == "cluster" else field
    if err["type"] == "missing":
        value: object = None
    elif len(head) > 1 and head[0] != "cluster":  # an item of a list: show the whole list
        value = data["nodes"][loc[1]][field]
    else:
        value = err["input"]
    expected = _EXPECTED.get(field, "a valid value")
    if err["type"] == "value_error" and field == "since":  # the time parsed but lies outside the events' range
        return InputError(f"{where}: {name} = {value!r}: {err['msg'].removeprefix('Value error, ')}")
    return InputError(f"{where}: {name} = {value!r}: expected {expected}")


def parse_budgets(data: object, source: str = "<budgets>") -> Budgets:
    """Return the Budgets a parsed YAML/JSON document describes; raise InputError naming entry and field."""
    try:
        spec = BudgetsFile.model_validate(data)
    except ValidationError as exc:
        raise _problem(source, data, exc) from None
    cl = spec.cluster
    if cl.gpus % cl.gpus_per_node:
        raise InputError(f"{source}: cluster.gpus = {cl.gpus} is not a whole number of {cl.gpus_per_node}-GPU hosts")
    nodes: dict[str, BudgetNode] = {}
    for i, n in enumerate(spec.nodes):
        if n.path in nodes:
            raise InputError(f"{source}: nodes[{i}] ({n.path}): path = {n.path!r}: defined twice")
        nodes[n.path] = BudgetNode(n.path, n.share, tuple(n.managers or ()), n.since)
    for i, node in enumerate(nodes.values()):
        if node.parent is not None and node.parent not in nodes:
            raise InputError(f"{source}: nodes[{i}] ({node.path}): parent {node.parent!r} is not defined")
    ordered = sorted(nodes.values(), key=lambda n: n.path.count("/"))  # stable: parents first, file order kept
    return Budgets(cl.name, cl.gpus, cl.gpus_per_node, tuple(ordered))


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
