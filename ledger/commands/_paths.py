"""Check the paths a command is given before it starts, so a bad one is a one-line error, not a traceback."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path

from ledger.errors import InputError

# What replay, compare and demo write into an output directory: the only names --force removes.
RUN_OUTPUTS = frozenset({"events", ".events.building", "audit.json", "audit", "replay.json", "rejected_rows.txt"})
DEMO_OUTPUTS = frozenset({"trace.csv", "budgets.yaml", "report.html", "fairshare", "priority"})


def input_file(text: str, what: str = "input file") -> Path:
    """Return ``text`` as the path of a readable regular file, or raise InputError saying what is wrong."""
    path = Path(text)
    if not path.exists():
        raise InputError(f"{text}: no such {what}")
    if path.is_dir():
        raise InputError(f"{text}: is a directory; expected a {what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{text}: cannot read the {what} (permission denied)")
    return path


def input_source(text: str, what: str = "trace, run directory or event log") -> Path:
    """Return ``text`` as an existing path (a file or a directory), or raise InputError."""
    path = Path(text)
    if not path.exists():
        raise InputError(f"{text}: no such {what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{text}: cannot read the {what} (permission denied)")
    return path


def output_file(text: str, *, force: bool = False, inputs: Collection[str | Path] = ()) -> Path:
    """Return ``text`` as a file path that can be written: its directory exists, it is not a directory.

    It must not be one of ``inputs`` (the files and directories the command reads) nor lie inside
    one of them, whatever ``force`` says; and an existing file is replaced only with ``force``.
    """
    path = Path(text)
    if path.is_dir():
        raise InputError(f"--out {text}: is a directory; expected a file name")
    if not path.parent.is_dir():
        raise InputError(f"--out {text}: directory {path.parent} does not exist")
    dst = path.resolve()
    for given in inputs:
        src = Path(given).resolve()
        if dst == src:
            raise InputError(f"--out {text}: is the input {given}; write the output somewhere else")
        if src.is_dir() and src in dst.parents:
            raise InputError(f"--out {text}: lies inside the input {given}; write the output somewhere else")
    if path.exists() and not force:
        raise InputError(f"--out {text}: already exists; pass --force to replace it, or choose a new file name")
    return path


def _is_run_dir(path: Path) -> bool:
    """Return whether ``path`` is a run directory gpuledger wrote, finished or cut short (Ctrl-C, a kill).

    A run cut short may hold only part of what a run writes (a ``.events.building`` log, no audit),
    or nothing yet: it is ours when everything in it is a name a run writes.
    """
    if not path.is_dir() or path.is_symlink():
        return False
    return (path / "events").is_dir() or all(e.name in RUN_OUTPUTS for e in path.iterdir())


def output_dir(
    text: str, *, force: bool, ours: Collection[str] = RUN_OUTPUTS, run_subdirs: bool = False, source: str | None = None
) -> Path:
    """Return ``text`` as an empty (or new) output directory; with ``force``, first remove what gpuledger wrote there.

    A directory that holds anything gpuledger did not write is refused even with ``force``: --force
    replaces an earlier run, it never deletes someone's files. ``run_subdirs`` also counts run
    directories (with an ``events/`` log inside) as ours, as ``compare --out`` writes one per setting.
    ``source`` (the command's input) must not lie inside the directory: it would be removed. Nor
    may the directory lie inside ``source`` when that is a directory (a run directory or a log):
    the run would be written among the files it reads.
    """
    path = Path(text)
    if source is not None:
        src, dst = Path(source).resolve(), path.resolve()
        if path.exists() and (src == dst or dst in src.parents):
            raise InputError(f"--out {text}: holds the input {source}; write the run somewhere else")
        if src.is_dir() and src in dst.parents:
            raise InputError(f"--out {text}: lies inside the input {source}; write the run somewhere else")
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {text}: is a file; expected a directory (new or empty)")
    if not path.exists():
        if path.parent != path and path.parent.exists() and not path.parent.is_dir():
            raise InputError(f"--out {text}: {path.parent} is a file, not a directory")
        return path
    entries = sorted(path.iterdir())
    if not entries:
        return path
    foreign = [e.name for e in entries if e.name not in ours and not (run_subdirs and _is_run_dir(e))]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(
            f"--out {text}: holds files gpuledger did not write ({shown}); choose a new or empty directory"
        )
    if not force:
        raise InputError(f"--out {text}: holds an earlier run ({', '.join(e.name for e in entries[:4])}); "
                         "pass --force to replace it, or choose a new directory")
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return path


__all__ = ["DEMO_OUTPUTS", "RUN_OUTPUTS", "input_file", "input_source", "output_dir", "output_file"]
