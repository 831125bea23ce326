"""Audits recount from the log: nothing in queries/ imports the decision core."""

from __future__ import annotations

import ast
from pathlib import Path

import ledger.queries as queries

QUERIES = Path(queries.__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_in_queries_imports_the_decision_core() -> None:
    modules = sorted(QUERIES.glob("*.py"))
    assert len(modules) >= 5
    for path in modules:
        core = [m for m in imported_modules(path) if m == "ledger.core" or m.startswith("ledger.core.")]
        assert not core, f"{path.name} imports {core}"


def test_every_audit_sql_file_opens_with_a_header_saying_what_it_answers() -> None:
    for name in ("owed_hours", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies"):
        first = (QUERIES / f"{name}.sql").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(f"-- {name}.sql: ") and len(first) > 30
