"""A run's projected log kept beside it, so that auditing the run again need not decode the log again.

Decoding the log is most of what an audit of a finished run costs (about as much as the replay
that wrote it); the audit SQL itself takes a second or two. A replay already has the projection
(``projection.Loader`` follows the log as it is written), so it keeps its ``ev_*`` Arrow tables
as Parquet files in ``RUN/audit/projection/``, with the sha256 of the log's segment files and of
the projection's layout. ``gpuledger audit RUN`` takes them only when both still match: a log
appended to (an import), rewritten or truncated, or a projection that keeps other fields than
this version's, is decoded again as before. The key covers every byte of every segment.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ledger.queries.detail import FOLDER
from ledger.queries.projection import layout

SUBFOLDER = "projection"
_CHUNK = 1 << 22


def log_key(log_dir: Path, *, decisions: bool) -> str:
    """Return the sha256 of the log's segment files (names and bytes) and of the projection's layout."""
    digest = hashlib.sha256(layout(decisions=decisions).encode())
    for segment in sorted(log_dir.glob("*.avro")):
        digest.update(segment.name.encode() + b"\0")
        with segment.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def _folder(run_dir: Path) -> Path:
    return run_dir / FOLDER / SUBFOLDER


def save(run_dir: Path, tables: dict[str, pa.Table], key: str) -> None:
    """Keep the projection ``tables`` of ``run_dir``'s log under ``key`` (the key file last: a torn save is ignored)."""
    folder = _folder(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "key.json").unlink(missing_ok=True)
    for name, table in tables.items():
        tmp = folder / f".{name}.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, folder / f"{name}.parquet")
    tmp = folder / ".key.json.tmp"
    tmp.write_text(json.dumps({"sha256": key, "tables": sorted(tables)}) + "\n")
    os.replace(tmp, folder / "key.json")


def load(run_dir: Path, *, decisions: bool) -> dict[str, pa.Table] | None:
    """Return the kept projection of ``run_dir``'s log if it is the projection of the log as it is now, else None."""
    folder = _folder(run_dir)
    try:
        kept = json.loads((folder / "key.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("sha256") != log_key(run_dir / "events", decisions=decisions):
        return None
    try:
        return {name: pq.read_table(folder / f"{name}.parquet") for name in kept["tables"]}
    except (OSError, pa.ArrowInvalid, KeyError, TypeError):
        return None


__all__ = ["SUBFOLDER", "load", "log_key", "save"]
