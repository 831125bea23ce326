"""SQL audits over the event log in DuckDB: owed hours, discarded work, wait by size, occupancy, fairness.

Audits recount from the log; they never import the decision core.
"""

from queries.audit import audit, audit_run, connect, prepare
from queries.projection import project
from queries.report import render_html

__all__ = ["audit", "audit_run", "connect", "prepare", "project", "render_html"]
