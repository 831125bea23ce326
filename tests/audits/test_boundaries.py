"""Each audit's SQL says what it answers; that audits never import the core is the import contract's (make lint)."""

from __future__ import annotations

from pathlib import Path

import ledger.queries as queries

QUERIES = Path(queries.__file__).parent


def test_every_audit_sql_file_opens_with_a_header_saying_what_it_answers() -> None:
    for name in ("owed_hours", "owed_levels", "discarded_work", "wait_by_size", "occupancy", "fairness", "anomalies"):
        first = (QUERIES / f"{name}.sql").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(f"-- {name}.sql: ") and len(first) > 30
