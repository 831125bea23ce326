"""SQL audits over the event log in DuckDB: owed hours, discarded work, wait by size, occupancy, fairness.

Audits recount from the log; they never import the decision core.
"""

from ledger.queries.audit import audit, audit_run, connect, prepare
from ledger.queries.projection import project
from ledger.queries.report import render_html

__all__ = ["audit", "audit_run", "connect", "prepare", "project", "render_html"]
