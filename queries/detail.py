"""The audit's detail tables: hour-by-hour, day-by-day and per-workload rows, kept out of ``audit.json``.

``audit.json`` holds the figures a person or a script reads (tens of kB). The tables under them
(a row per team and hour, per team and day, per workload) grow with the cluster and the period:
they go to Parquet files, ``audit/<name>.parquet`` in a run directory, written by DuckDB itself
(no row passes through Python), and ``audit.json`` names each with its row count (``tables``).
``Details`` reads them back by name, from the prepared connection or from a directory of files;
``attach`` puts rows back under the keys the renderers (tables, HTML report) read.

Times in the files are ``TIMESTAMP`` in UTC (no zone attached); GPU-hours are ``DOUBLE``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

FOLDER = "audit"  # the run directory's folder of detail tables


@dataclass(frozen=True)
class Detail:
    """One detail table: what it holds, the SQL that makes it from a prepared audit, where the dict kept it."""

    name: str
    about: str
    columns: tuple[str, ...]  # in order; those in ``times`` are TIMESTAMP (UTC) in the file
    times: tuple[str, ...]
    query: str  # its rows in order, over a connection ``prepare`` has filled
    key: tuple[str, ...]  # where ``attach`` puts its rows in the audit dictionary


_HOUR = "make_timestamp(hour_us) AS hour"
TABLES: dict[str, Detail] = {
    d.name: d
    for d in (
        Detail(
            "cluster_hourly", "the cluster each hour: capacity up, down, allocated and unallocated GPU-hours",
            ("hour", "capacity_gpu_hours", "down_gpu_hours", "allocated_gpu_hours", "unallocated_gpu_hours"),
            ("hour",),
            f"SELECT {_HOUR}, * EXCLUDE (hour_us) FROM occupancy_hourly ORDER BY hour_us",
            ("occupancy", "hourly"),
        ),
        Detail(
            "teams_hourly", "each team each hour: allocated and unallocated GPU-hours run, its allocation",
            ("budget", "hour", "allocated_gpu_hours", "unallocated_gpu_hours", "allocation_gpu_hours"),
            ("hour",),
            f"SELECT budget, {_HOUR}, * EXCLUDE (budget, hour_us) FROM occupancy_team_hourly ORDER BY budget, hour_us",
            ("occupancy", "by_team_hourly"),
        ),
        Detail(
            "fairness_hourly", "each team each hour: usage / allocation in the hour and over the window before it",
            ("budget", "hour", "usage_gpu_hours", "allocation_gpu_hours", "hour_ratio", "window_ratio"),
            ("hour",),
            f"SELECT budget, {_HOUR}, * EXCLUDE (budget, hour_us) FROM fairness_hourly ORDER BY budget, hour_us",
            ("fairness", "hourly"),
        ),
        Detail(
            "teams_daily_owed", "each node of the reported level (the team level unless audit --level picks another) "
            "each UTC day: owed, received and delivered GPU-hours",
            ("budget", "day", "owed_gpu_hours", "received_gpu_hours", "delivered_gpu_hours"),
            ("day",),
            "SELECT budget, make_timestamp(day_us) AS day, owed / 3.6e9 AS owed_gpu_hours, "
            "received / 3.6e9 AS received_gpu_hours, delivered / 3.6e9 AS delivered_gpu_hours FROM ("
            "SELECT budget, hour_us // 86400000000 * 86400000000 AS day_us, sum(owed_gpu_us) AS owed, "
            "sum(received_gpu_us) AS received, sum(delivered_gpu_us) AS delivered "
            "FROM owed_team_hours GROUP BY ALL) ORDER BY budget, day_us",
            ("owed_hours", "by_team_daily"),
        ),
        Detail(
            "levels_hourly", "every level of the budget tree, each node each hour: share, demand, delivered, owed, "
            "received GPU-hours (docs/audits.md, owed hours at every level)",
            ("depth", "level", "budget", "hour", "share_gpu_hours", "demand_gpu_hours", "delivered_gpu_hours",
             "owed_gpu_hours", "received_gpu_hours"),
            ("hour",),
            f"SELECT h.depth, l.name AS level, h.budget, {_HOUR}, h.share_gpu_us / 3.6e9 AS share_gpu_hours, "
            "h.demand_gpu_us / 3.6e9 AS demand_gpu_hours, h.delivered_gpu_us / 3.6e9 AS delivered_gpu_hours, "
            "h.owed_gpu_us / 3.6e9 AS owed_gpu_hours, h.received_gpu_us / 3.6e9 AS received_gpu_hours "
            "FROM level_hours h JOIN tree_levels l USING (depth) ORDER BY h.depth, h.budget, h.hour_us",
            ("owed_hours", "levels_hourly"),
        ),
        Detail(
            "levels_nodes", "every level of the budget tree, each node over the period: owed, delivered, received "
            "GPU-hours and received / owed by hour, UTC day and week",
            ("depth", "level", "budget", "owed_gpu_hours", "delivered_gpu_hours", "received_gpu_hours",
             "demand_gpu_hours", "share_gpu_hours", "ratio", "ratio_day", "ratio_week"),
            (),
            "SELECT n.depth, l.name AS level, n.budget, n.owed_gpu_hours, n.delivered_gpu_hours, "
            "n.received_gpu_hours, n.demand_gpu_hours, n.share_gpu_hours, n.ratio, n.ratio_day, n.ratio_week "
            "FROM level_nodes n JOIN tree_levels l USING (depth) ORDER BY n.depth, n.budget",
            ("owed_hours", "levels_nodes"),
        ),
        Detail(
            "workloads", "every submitted workload: its budget, size, submission, first start, end, preemptions",
            ("workload_id", "budget", "gpus", "kind", "min_runtime_s", "submit_time", "first_start_time", "end_time",
             "preemptions"),
            ("submit_time", "first_start_time", "end_time"),
            "SELECT workload_id, budget, gpus, kind, min_runtime_s, make_timestamp(submit_us) AS submit_time, "
            "make_timestamp(first_start_us) AS first_start_time, make_timestamp(end_us) AS end_time, preemptions "
            "FROM workload_facts ORDER BY seq",
            ("workloads",),
        ),
    )
}

# ISO 8601 UTC text of a TIMESTAMP, as audit.json prints times (the iso macro of derive.sql, for timestamps).
_ISO = ("CASE WHEN microsecond({c}) % 1000000 = 0 THEN strftime({c}, '%Y-%m-%dT%H:%M:%SZ') "
        "ELSE strftime({c}, '%Y-%m-%dT%H:%M:%S.%fZ') END")


def counts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Return the ``tables`` block of a prepared audit: each detail table's row count, no file yet."""
    out: dict[str, dict[str, Any]] = {}
    for d in TABLES.values():
        got = con.execute(f"SELECT count(*) FROM ({d.query})").fetchone()
        out[d.name] = {"file": None, "rows": int(got[0]) if got else 0, "about": d.about}
    return out


def write_tables(
    con: duckdb.DuckDBPyConnection, directory: str | Path, *, relative_to: str | Path | None = None
) -> dict[str, dict[str, Any]]:
    """Write every detail table of a prepared audit to ``directory/<name>.parquet``; return the ``tables`` block.

    Each file is written beside its final name and renamed into place, so a reader never sees half a
    file. ``file`` in the block is relative to ``relative_to`` (the run directory) when given.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, Any]] = {}
    for d in TABLES.values():
        path = directory / f"{d.name}.parquet"
        tmp = directory / f".{d.name}.parquet.tmp"
        try:
            con.execute(f"COPY ({d.query}) TO '{_quoted(tmp)}' (FORMAT parquet)")
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        got = con.execute(f"SELECT count(*) FROM read_parquet('{_quoted(path)}')").fetchone()
        shown = os.path.relpath(path, relative_to) if relative_to is not None else str(path)
        out[d.name] = {"file": Path(shown).as_posix(), "rows": int(got[0]) if got else 0, "about": d.about}
    return out


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


class Details:
    """Detail tables by name: from a prepared audit connection, or from a directory of Parquet files."""

    def __init__(self, con: duckdb.DuckDBPyConnection, directory: Path | None = None) -> None:
        self.con = con
        self.directory = directory

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection) -> Details:
        """Read the tables from a connection ``prepare`` has filled."""
        return cls(con)

    @classmethod
    def files(cls, directory: str | Path) -> Details:
        """Read the tables from the Parquet files in ``directory`` (a run directory's ``audit/``)."""
        return cls(duckdb.connect(), Path(directory))

    def _source(self, d: Detail) -> str:
        if self.directory is None:
            return f"({d.query})"
        return f"read_parquet('{_quoted(self.directory / f'{d.name}.parquet')}')"

    def rows(self, name: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Return the rows of table ``name`` in its order (at most ``limit``), times as ISO 8601 text."""
        d = TABLES[name]
        cols = ", ".join(f"{_ISO.format(c=c)} AS {c}" if c in d.times else c for c in d.columns)
        # a file holds its rows in order, and DuckDB reads them back in that order (insertion order kept)
        sql = f"SELECT {cols} FROM {self._source(d)}" + (f" LIMIT {int(limit)}" if limit is not None else "")
        cur = self.con.execute(sql)
        return [dict(zip(d.columns, v, strict=True)) for v in cur.fetchall()]

    def count(self, name: str) -> int:
        """Return the number of rows of table ``name``."""
        got = self.con.execute(f"SELECT count(*) FROM {self._source(TABLES[name])}").fetchone()
        return int(got[0]) if got else 0


def attach(
    data: dict[str, Any], details: Details, names: tuple[str, ...] | None = None, *, limit: int | None = None
) -> dict[str, Any]:
    """Return a copy of the audit ``data`` with detail rows under the keys the renderers read.

    ``names``: the tables to attach (default all); ``limit``: at most this many rows of each.
    ``audit.json`` itself never carries them (``tables`` names the files instead).
    """
    out = dict(data)
    for name in names if names is not None else tuple(TABLES):
        d = TABLES[name]
        rows = details.rows(name, limit=limit)
        if len(d.key) == 1:
            out[d.key[0]] = rows
        else:
            out[d.key[0]] = dict(out.get(d.key[0], {})) | {d.key[1]: rows}
    return out


__all__ = ["FOLDER", "TABLES", "Detail", "Details", "attach", "counts", "write_tables"]
