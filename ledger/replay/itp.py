"""Replay the Microsoft ITP raw traces (``job_id,submission_time,duration,num_gpu``) with stated assumptions.

The traces (ElasticFlow, ASPLOS'23; MIT licence) record when each job arrived, how long it ran and
how many GPUs it used — no team, user, status, start time or cluster size. To replay them through
a budget tree this module assumes, and says so in the run's notes:

- **Epoch**: ``submission_time`` counts seconds from 2021-03-04T00:00:00Z (the collection start).
- **Teams**: each job goes to a leaf of the budget tree by a seeded hash,
  ``blake2b(f"{seed}:{job_id}")`` modulo the number of leaves, so the assignment is stable across
  runs and machines. Without a budgets file the tree is ``itp/{research,product,platform}/team-{a,b,c}``
  with program shares 0.5/0.3/0.2 and equal teams; with one, its leaves are used.
- **Capacity**: not in the trace. By default, 1.25 × the mean number of GPUs the jobs kept busy over
  the trace's span, rounded up to whole 8-GPU hosts and never smaller than the widest job (so about
  80% load); ``gpus`` overrides it.
- **Contract**: ``work_s`` = the recorded duration. Minimum runtime = min(duration, 2 h), so jobs of
  15 minutes or less count as debug runs. Jobs longer than an hour are resumable, checkpoint every
  30 minutes and take 5 minutes to restart; shorter ones are not resumable. Priority 0, kind
  ``debug`` (≤ 15 min), ``training`` (> 1 h) or ``batch``.
"""

from __future__ import annotations

import csv
import hashlib
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.budgets import BudgetNode, Budgets, load_budgets
from ledger.errors import AllRejectedError, InputError
from ledger.events import LATEST, Event, WorkloadKind, WorkloadSubmitted
from ledger.replay.inputs import ReplayInputs, inputs_from_budgets
from ledger.replay.trace import RejectedRow, listed

HEADER = ("job_id", "submission_time", "duration", "num_gpu")
EPOCH = datetime(2021, 3, 4, tzinfo=UTC)
DEFAULT_TREE = {"research": 0.5, "product": 0.3, "platform": 0.2}
TEAMS = ("team-a", "team-b", "team-c")
MAX_MIN_RUNTIME_S = 2 * 3600
DEBUG_S = 15 * 60


_LAST_S = int((LATEST - EPOCH).total_seconds()) - 1  # the last second after the epoch an event can hold


def _number(text: str, field: str, whole: bool) -> int | str:
    """Return a column's value as a whole number within what the ledger holds, or the reason it is not one."""
    try:
        value = float(text)
    except ValueError:
        return "expected a number"
    if whole and not value.is_integer():
        return "expected a whole number of GPUs"
    if not math.isfinite(value) or value > _LAST_S:  # NaN, infinities, or past the end of 2099 (negatives: below)
        at_most = (EPOCH + timedelta(seconds=_LAST_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"expected seconds after the epoch, at most {at_most}" if field == "submission_time" else (
            f"expected a number of at most {_LAST_S}")
    return int(value)


def is_itp_trace(path: str | Path) -> bool:
    """Return True if the file starts with the ITP raw-trace header."""
    try:
        with Path(path).open(encoding="utf-8-sig") as f:  # -sig: a byte-order mark, if any, is not text
            first = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(c.strip() for c in first.split(",")) == HEADER


def default_budgets(cluster: str, gpus: int) -> Budgets:
    """Return the small tree jobs are hashed into when no budgets file is given."""
    nodes = [BudgetNode("itp", 1.0, ("director",))]
    for program, share in DEFAULT_TREE.items():
        nodes.append(BudgetNode(f"itp/{program}", share, (f"{program}-lead",)))
        nodes += [BudgetNode(f"itp/{program}/{team}", 1.0, ()) for team in TEAMS]
    return Budgets(cluster, gpus, 8, tuple(nodes))


def team_of(job_id: str, leaves: tuple[str, ...], seed: int = 0) -> str:
    """Return the leaf a job is assigned to: a seeded hash of its id, stable everywhere."""
    digest = hashlib.blake2b(f"{seed}:{job_id}".encode(), digest_size=8).digest()
    return leaves[int.from_bytes(digest, "big") % len(leaves)]


def load_itp(
    path: str | Path, budgets_file: str | Path | None = None, *, gpus: int | None = None, seed: int = 0
) -> ReplayInputs:
    """Read one ITP raw trace into ReplayInputs under the assumptions in this module's docstring."""
    path = Path(path)
    rows: list[tuple[int, str, int, int, int]] = []  # (line, job, submit_s, duration_s, gpus)
    rejected: list[RejectedRow] = []
    seen: dict[str, int] = {}  # job id -> the line that submitted it
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            next(reader, None)
            for row in reader:
                line = reader.line_num
                if len(row) != 4:
                    rejected.append(RejectedRow(str(path), line, "(line)", row, "expected 4 columns"))
                    continue
                job, *numbers = (c.strip() for c in row)
                parsed = [_number(x, field, field == "num_gpu")
                          for x, field in zip(numbers, ("submission_time", "duration", "num_gpu"), strict=True)]
                bad = next((i for i, p in enumerate(parsed) if isinstance(p, str)), None)
                if bad is not None:
                    field = ("submission_time", "duration", "num_gpu")[bad]
                    rejected.append(RejectedRow(str(path), line, field, numbers[bad], str(parsed[bad])))
                    continue
                submit, duration, width = (int(p) for p in parsed)
                if width < 1 or duration < 1 or submit < 0:
                    field = "num_gpu" if width < 1 else "duration" if duration < 1 else "submission_time"
                    value = {"num_gpu": width, "duration": duration, "submission_time": submit}[field]
                    rejected.append(RejectedRow(str(path), line, field, value, "must be positive"))
                    continue
                if job in seen:
                    again = f"already submitted on line {seen[job]}"
                    rejected.append(RejectedRow(str(path), line, "job_id", job, again))
                    continue
                seen[job] = line
                rows.append((line, job, submit, duration, width))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the trace ({exc.strerror})") from None
    if not rows:
        if rejected:
            rows_text = listed(rejected).rstrip()
            raise AllRejectedError(f"{path}: every job was rejected ({len(rejected)} bad row(s)):\n{rows_text}")
        raise InputError(f"{path}: no job could be read")
    cluster = "itp-" + "".join(c if c.isalnum() else "-" for c in path.stem)
    widest = max(r[4] for r in rows)
    span = max(r[2] + r[3] for r in rows) - min(r[2] for r in rows)
    busy = sum(r[3] * r[4] for r in rows) / max(span, 1)
    capacity = gpus or max(-(-int(busy * 1.25) // 8) * 8, -(-widest // 8) * 8)
    if budgets_file is not None:
        budgets = load_budgets(budgets_file)
        cluster = budgets.cluster
        if gpus:
            budgets = Budgets(cluster, gpus, budgets.gpus_per_node, budgets.nodes)
    else:
        budgets = default_budgets(cluster, capacity)
    leaves = budgets.leaves
    subs: list[Event] = []
    for line, job, submit, duration, width in rows:
        if width > budgets.gpus:
            reason = f"wider than the {budgets.gpus}-GPU cluster"
            rejected.append(RejectedRow(str(path), line, "num_gpu", width, reason))
            continue
        leaf = team_of(job, leaves, seed)
        resumable = duration > 3600
        kind: WorkloadKind = "debug" if duration <= DEBUG_S else "training" if resumable else "batch"
        subs.append(
            WorkloadSubmitted(
                event_id=f"{cluster}/t{line}",
                cluster=cluster,
                time=EPOCH + timedelta(seconds=submit),
                workload_id=job,
                budget=leaf,
                user=f"{leaf.rsplit('/', 1)[-1]}-user",
                gpus=width,
                min_runtime_s=min(duration, MAX_MIN_RUNTIME_S),
                resumable=resumable,
                kind=kind,
                work_s=duration,
                checkpoint_interval_s=1800 if resumable else 0,
                restart_s=300 if resumable else 0,
            )
        )
    inputs = inputs_from_budgets(budgets, subs)
    inputs.rejected = rejected
    inputs.source = str(path)
    inputs.notes = [
        f"ITP trace: {len(subs):,} jobs hashed into {len(leaves)} teams (seed {seed}); capacity {budgets.gpus} GPUs "
        f"({'given' if gpus or budgets_file else f'1.25 x mean busy GPUs {busy:.0f}'}); epoch {EPOCH:%Y-%m-%d}",
        "assumed: min runtime = min(duration, 2h); jobs over 1 h resumable, checkpoint 30 min, restart 5 min",
    ]
    return inputs


__all__ = ["EPOCH", "default_budgets", "is_itp_trace", "load_itp", "team_of"]
