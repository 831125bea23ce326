"""Budgets files: the cluster and the tree become events; mistakes are named by file, entry and field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.budgets import load_budgets, parse_budgets
from ledger.errors import InputError
from ledger.events import BudgetNodeDefined, ClusterCapacityChanged, validated
from tests.replay.conftest import CONTRACT

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def test_the_design_example_loads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(
        "cluster: {name: c1, gpus: 1024, gpus_per_node: 8}\n"
        "nodes:\n"
        "  - {path: ai2/olmo/pretrain, share: 0.6}\n"  # children may come before parents
        "  - {path: ai2, share: 1.0, managers: [ceo]}\n"
        "  - {path: ai2/olmo, share: 0.35, managers: [olmo-pi]}\n"
        "  - {path: ai2/tulu}\n"
    )
    b = load_budgets(path)
    assert (b.cluster, b.gpus, b.gpus_per_node) == ("c1", 1024, 8)
    assert [n.path for n in b.nodes] == ["ai2", "ai2/olmo", "ai2/tulu", "ai2/olmo/pretrain"]
    assert b.leaves == ("ai2/tulu", "ai2/olmo/pretrain")
    events = b.events(T0)
    assert isinstance(events[0], ClusterCapacityChanged) and events[0].gpus == 1024
    nodes = [e for e in events if isinstance(e, BudgetNodeDefined)]
    assert [(n.path, n.parent, n.share, n.managers) for n in nodes] == [
        ("ai2", None, 1.0, ("ceo",)),
        ("ai2/olmo", "ai2", 0.35, ("olmo-pi",)),
        ("ai2/tulu", "ai2", 1.0, ()),
        ("ai2/olmo/pretrain", "ai2/olmo", 0.6, ()),
    ]
    assert all(validated(e) == e for e in events)
    assert load_budgets(_written(tmp_path, b.to_yaml())) == b


def _written(tmp_path: Path, text: str, name: str = "again.yaml") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


def test_json_budgets_load_too(tmp_path: Path) -> None:
    path = _written(tmp_path, '{"cluster": {"name": "c", "gpus": 16}, "nodes": [{"path": "a"}]}', "b.json")
    assert load_budgets(path).gpus_per_node == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: []", "cluster: expected a mapping"),
        ("cluster: {name: c, gpus: 0}\nnodes: [{path: a}]", "cluster.gpus = 0"),
        ("cluster: {name: c, gpus: 12}\nnodes: [{path: a}]", "not a whole number of 8-GPU hosts"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a}, {path: a/b, share: -1}]", r"nodes\[1\] \(a/b\): share = -1"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a}, {path: x/b}]", r"nodes\[1\] \(x/b\): parent 'x'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, managers: boss}]", r"nodes\[0\] \(a\): managers = 'boss'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, weight: 2}]", r"nodes\[0\]: unknown field\(s\) weight"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a}, {path: a}]", "defined twice"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: 'a b'}]", r"nodes\[0\]: path = 'a b'"),
    ],
)
def test_mistakes_name_the_file_entry_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _written(tmp_path, text, "bad.yaml")
    with pytest.raises(InputError, match=message) as info:
        load_budgets(path)
    assert str(path) in str(info.value)


def test_broken_yaml_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not valid YAML"):
        load_budgets(_written(tmp_path, "cluster: {name: c\n", "bad.yaml"))


@pytest.mark.skipif(not (CONTRACT / "budgets.yaml").exists(), reason="no shared contract beside the project")
def test_the_contract_budgets_file_loads() -> None:
    b = parse_budgets({"cluster": {"name": "lab", "gpus": 64}, "nodes": [{"path": "lab"}]})
    assert b.leaves == ("lab",)
    lab = load_budgets(CONTRACT / "budgets.yaml")
    assert (lab.cluster, lab.gpus, len(lab.leaves)) == ("lab", 64, 4)
