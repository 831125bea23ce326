"""What ``replay``, ``compare`` and ``demo`` share: replay into a run directory, audit it, report rejects."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ledger.core.knobs import Knobs
from ledger.events import from_us
from ledger.replay.progress import ProgressBar
from ledger.replay.run import ReplayInputs, replay
from ledger.replay.trace import RejectedRow, listed

if TYPE_CHECKING:
    from ledger.queries.projection import Loader

# how a replay ended that ran out of things to happen while some work still waited (it can never start)
NOTHING_LEFT = "nothing left to happen with work left"


def write_audit(run_dir: Path, loaded: Loader | None = None) -> dict[str, Any]:
    """Audit a run directory: write ``audit.json`` and its detail tables; return the audit.

    ``loaded``: the run's events as the replay handed them to the log (else the log is read).
    The returned audit also carries the detail rows the HTML report draws, so a report can be
    made after the run directory is gone.
    """
    from ledger.queries import snapshot
    from ledger.queries.audit import connect, write_run_audit
    from ledger.queries.detail import Details, attach
    from ledger.queries.projection import register
    from ledger.queries.report import REPORT_TABLES

    if loaded is not None:
        tables = loaded.tables()
        # kept beside the log, so that `gpuledger audit RUN` need not decode it again
        snapshot.save(run_dir, tables, snapshot.log_key(run_dir / "events", decisions=False))
        con = register(tables)
    else:
        con = connect(run_dir / "events", decisions=False)
    return attach(write_run_audit(run_dir, con), Details.of(con), REPORT_TABLES)


def run_one(
    inputs: ReplayInputs,
    knobs: Knobs,
    out_dir: Path,
    *,
    quiet: bool,
    label: str | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """Replay ``inputs`` into ``out_dir``, audit it, and return {"audit": ..., "replay": ...}."""
    from ledger.queries.projection import Loader

    bar = None if quiet else ProgressBar(label or knobs.label())
    # The audit reads the events as the replay hands them to the log, not the log again (decoding
    # it would cost about as much as the replay did). Only what an audit reads is kept.
    loaded = Loader(decisions=False)
    try:
        stats = replay(inputs, knobs, out_dir, progress=bar, until=until, follower=loaded)
    finally:
        if bar is not None:
            bar.close()
    info: dict[str, Any] = {
        "source": inputs.source,
        "knobs": knobs.label(),
        "settings": dataclasses.asdict(knobs),  # every knob by name, for tools reading a run back
        "cluster": inputs.cluster,
        "capacity_gpus": inputs.gpus,
        "events": stats.events,
        "events_by_type": dict(sorted(stats.by_type.items())),
        "clock_jumps": stats.moments,
        "simulated_days": round(stats.simulated_s / 86_400, 3),
        "demand_ratio": round(stats.demand_ratio(inputs.gpus), 4),
        "rejected_rows": len(inputs.rejected),
        # the debug partition's size whenever it changed, when sized from demand (``explain`` reads it)
        "debug_partition": [
            {"from": from_us(at).isoformat(), "hosts": hosts} for at, hosts in stats.debug_partition
        ],
        "notes": inputs.notes,
        "ended": (
            "stopped at a limit with work left" if stats.stopped_at is not None
            else NOTHING_LEFT if stats.unfinished else "all work done"
        ),
    }
    if stats.stopped_at is not None or stats.unfinished:
        if stats.stopped_at is not None:
            info["stopped_at"] = from_us(stats.stopped_at).isoformat()
        info["unfinished"] = {
            "workloads": len(stats.unfinished),
            "preemptions_by_workload": dict(sorted(stats.unfinished.items())),
            "not_submitted": stats.not_submitted,
        }
    (out_dir / "replay.json").write_text(json.dumps(info, indent=2) + "\n")
    (out_dir / "audit.json").unlink(missing_ok=True)
    if not quiet:  # the audit takes a while on a big log: say what is running after the bar ends
        sys.stderr.write(f"auditing {out_dir / 'events'} ...\n")
        sys.stderr.flush()
    t0 = time.perf_counter()
    audit = write_audit(out_dir, loaded if loaded.whole else None)
    info["wall_s"] = round(stats.wall_s, 3)  # not written: the run directory stays byte-identical
    info["audit_s"] = round(time.perf_counter() - t0, 3)
    return {"audit": audit, "replay": info}


def unfinished_note(info: dict[str, Any], where: Path | None) -> str:
    """Return the line that says a replay left work unfinished (at a limit, or that nothing would start), or "".

    ``info`` is the run's replay.json; ``where`` the file that lists every unfinished workload (None: not kept).
    """
    left = info.get("unfinished")
    if not left:
        return ""
    worst = sorted(left["preemptions_by_workload"].items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    listed_ = ", ".join(f"{wid} ({n} preemptions)" for wid, n in worst)
    unfinished = (
        f"{left['workloads']:,} workload(s) unfinished, e.g. {listed_}"
        + (f"; all are listed in {where}" if where is not None else "")
    ) if worst else "no workload unfinished"
    later = left["not_submitted"]
    stopped = info.get("stopped_at")
    return (
        (f"stopped at a limit ({stopped}) with {unfinished}" if stopped else
         f"ended with work left that nothing would ever start: {unfinished}")
        + (f"; {later:,} workload(s) submitted after it were not replayed" if later else "")
    )


def report_rejected(rejected: list[RejectedRow], out_dir: Path | None, stream: TextIO | None = None) -> None:
    """Tell the user which rows were left out (all of them into ``out_dir/rejected_rows.txt``)."""
    if not rejected:
        return
    stream = stream or sys.stderr
    stream.write(f"{len(rejected)} row(s) rejected and left out of the replay:\n{listed(rejected)}")
    if len(rejected) > 10 and out_dir is not None:
        stream.write(f"  (all of them in {out_dir / 'rejected_rows.txt'})\n")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "rejected_rows.txt").write_text("".join(f"{r}\n" for r in rejected))


__all__ = ["NOTHING_LEFT", "report_rejected", "run_one", "unfinished_note", "write_audit"]
