"""Budgets files: the cluster and the tree become events; mistakes are named by file, entry and field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.budgets import load_budgets, parse_budgets
from ledger.errors import InputError
from ledger.events import BudgetNodeDefined, ClusterCapacityChanged, validated
from tests.replay.conftest import ROOT

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
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, weight: 2}]", r"nodes\[0\] \(a\): unknown field\(s\) weight"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a}, {path: a}]", "defined twice"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: 'a b'}]", r"nodes\[0\]: path = 'a b'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{share: 1}]", r"nodes\[0\]: path = None"),
        ("cluster: {name: c, gpus: 16}\nnodes: [a]", r"nodes\[0\]: expected a mapping"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, share: '1.5'}]", r"nodes\[0\] \(a\): share = '1.5'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, share: true}]", r"nodes\[0\] \(a\): share = True"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, managers: [x, '']}]", r"\(a\): managers = \['x', ''\]"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, since: 1700000000}]", r"\(a\): since = 1700000000"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, since: soon}]", r"nodes\[0\] \(a\): since = 'soon'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a, since: 1900-01-01}]", r"since = .*: outside"),
        ("cluster: {name: c, gpus: true}\nnodes: [{path: a}]", "cluster.gpus = True"),
        ("cluster: {name: 'c d', gpus: 16}\nnodes: [{path: a}]", "cluster.name = 'c d'"),
        ("cluster: {name: c, gpus: 16}\nnodes: [{path: a}]\nteams: 3", r"unknown key\(s\) teams"),
        ("cluster: {name: c, gpus: 16}\nnodes: []", "nodes: expected a non-empty list"),
        ("- a", "expected a mapping with keys"),
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


def test_the_example_budgets_file_loads() -> None:
    b = parse_budgets({"cluster": {"name": "lab", "gpus": 64}, "nodes": [{"path": "lab"}]})
    assert b.leaves == ("lab",)
    lab = load_budgets(ROOT / "examples" / "lab" / "budgets.yaml")
    assert (lab.cluster, lab.gpus, len(lab.leaves)) == ("lab", 64, 4)


@pytest.mark.parametrize("path", ["ai2/a,b", "ai2/a:b", "ai2/#a", "ai2/[a]", "ai2/{a}", "ai2/'a'", "ai2/ä"])
def test_a_written_tree_reads_back_whatever_its_names_hold(tmp_path: Path, path: str) -> None:
    written = parse_budgets(
        {
            "cluster": {"name": "c", "gpus": 16},
            "nodes": [{"path": "ai2", "managers": ["a, b", "x: y"]}, {"path": path, "share": 1e-5, "since": T0}],
        }
    )
    assert [n.path for n in written.nodes] == ["ai2", path]
    assert load_budgets(_written(tmp_path, written.to_yaml())) == written


def test_the_written_file_keeps_one_line_per_node() -> None:
    nodes = [{"path": "a", "managers": ["boss"]}, {"path": "a/b", "share": 0.35}]
    b = parse_budgets({"cluster": {"name": "c", "gpus": 16}, "nodes": nodes})
    assert b.to_yaml() == (
        "cluster: {name: c, gpus: 16, gpus_per_node: 8}\n"
        "nodes:\n"
        "  - {path: a, share: 1.0, managers: [boss]}\n"
        "  - {path: a/b, share: 0.35}\n"
    )
