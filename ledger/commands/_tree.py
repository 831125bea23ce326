"""``--budgets`` for import and audit: charge imported workloads to the tree, add the tree and capacity as events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.adapters.charging import (
    Charger,
    ChargeSummary,
    charge_records,
    event_record,
    source_of,
    tree_events,
)
from ledger.adapters.common import Destination, ImportResult, Record
from ledger.budgets import Budgets, load_budgets
from ledger.errors import InputError

__all__ = ["audit_records_with_tree", "charge_imports"]


def charge_imports(
    results: Sequence[ImportResult], budgets: Budgets, budgets_file: str, to: Destination
) -> ImportResult | None:
    """Print how the results' workloads were charged to the tree (as they were read); return the tree's events.

    The tree and capacity are timed at the start of the imported period (its first event) and go
    to ``to``; None when the files hold no events.
    """
    total = ChargeSummary()
    for res in results:
        if res.to.charge is not None:
            total.merge(res.to.charge.summary)
    firsts = [res.first_us for res in results if res.first_us is not None]
    print(f"budgets from {budgets_file}: cluster {budgets.cluster}, {budgets.gpus} GPUs, {len(budgets.nodes)} nodes")
    print(total.render())
    others = sorted(set().union(*(res.clusters for res in results)) - {budgets.cluster})
    if others:
        print(f"  note: the records are of cluster(s) {', '.join(others)}, the budgets file of {budgets.cluster}: "
              "its tree and capacity are applied to them all")
    if not firsts:
        return None
    tree = ImportResult("budgets", budgets_file, to=to)
    for event in tree_events(budgets, min(firsts)):
        tree.add_event(event)
    tree.finish()
    return tree


def audit_records_with_tree(source: Any, budgets_file: str) -> list[Record]:
    """Return the records of ``source`` charged to the tree of ``budgets_file``, the tree's events first.

    The log must have no tree of its own. Its capacity events, if any, are kept instead of the
    budgets file's. Nothing is written to ``source``; the charge summary is printed to stderr.
    """
    import sys

    from ledger.queries.source import open_records

    budgets: Budgets = load_budgets(budgets_file)
    records = list(open_records(source))
    kinds = {name.rsplit(".", 1)[-1] for name, _ in records}
    if "BudgetNodeDefined" in kinds:
        raise InputError(f"{source}: the log already holds a budget tree; audit it without --budgets")
    if not records:
        raise InputError(f"{source}: the log holds no events")
    charged, summary = charge_records(records, Charger(budgets))
    from datetime import datetime

    from ledger import events as ev

    start = min(r["time"] for _, r in records)
    as_datetimes = isinstance(start, datetime)  # the log's reader gives times as datetimes, records as µs
    events = tree_events(budgets, ev.to_us(start) if as_datetimes else start)
    tree = [(e.type_name, dict(e.__dict__)) if as_datetimes else event_record(e) for e in events]
    if "ClusterCapacityChanged" in kinds:
        tree = [t for t in tree if t[0] != "ClusterCapacityChanged"]
    sources = sorted({source_of(r["event_id"]) for n, r in records if n.rsplit(".", 1)[-1] == "WorkloadSubmitted"})
    print(f"budgets from {budgets_file} applied to {', '.join(s for s in sources if s) or 'the log'} records "
          "(nothing written)", file=sys.stderr)
    print(summary.render(), file=sys.stderr)
    return tree + charged
