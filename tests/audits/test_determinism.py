"""The same log audited again gives the same audit, byte for byte, however many threads DuckDB has."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from ledger.core.knobs import Knobs
from ledger.queries.audit import collect, connect, prepare
from ledger.replay.demo_month import generate
from ledger.replay.run import inputs_from_budgets, replay


def test_ten_busy_days_audited_four_times_on_four_threads_give_one_report(tmp_path: Path) -> None:
    # ~150 teams' shares summed hour by hour: on several threads the order of those float sums
    # varied, and ratios that sit on a rounding tie printed differently from one audit to the next
    month = generate(7, scale=0.3)
    inputs = inputs_from_budgets(month.budgets, list(month.submissions), start=month.start)
    replay(inputs, Knobs(), tmp_path, until=month.start + timedelta(days=10))
    reports = set()
    for _ in range(4):
        con = connect(tmp_path, decisions=False)
        con.execute("SET threads TO 4")
        prepare(con)
        reports.add(json.dumps(collect(con), sort_keys=True))
    assert len(reports) == 1
