"""Shared fixtures: small narrated cluster logs written to a real embedded log."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.log import EventLog
from tests.factories import Events


def two_teams_day() -> list[ev.Event]:
    """Two teams share 16 GPUs 3:1 for two hours; team b's first job waits an hour, a job is preempted."""
    E = Events()
    return [
        E.capacity(0, 16),
        E.node(0, "org", 1.0),
        E.node(0, "org/a", 3.0),
        E.node(0, "org/b", 1.0),
        E.submit(0, "a1", "org/a", gpus=8, restart_s=600),
        E.submit(0, "b1", "org/b", gpus=8),
        E.start(0, "a1", ("lab-n000",), 8),
        E.checkpoint(40, "a1", 2400),
        E.preempt(60, "a1", by="b1"),
        E.requeue(60, "a1"),
        E.start(60, "b1", ("lab-n000",), 8),
        E.submit(70, "dbg", "org/a", gpus=1, min_runtime_s=600, kind="debug"),
        E.start(75, "dbg", ("lab-n001",), 1, protected_for_min=10),
        E.complete(85, "dbg"),
        E.start(90, "a1", ("lab-n001",), 8, attempt=2),
        E.complete(120, "b1"),
        E.complete(120, "a1"),
    ]


# A Slurm association tree with an account (phys) whose users are of both kinds: two with shares of their
# own (nodes below it) and one with Share=parent (charging phys itself); bio has a Share=parent user only.
MIXED_ASSOC = """\
Cluster|Account|Par Name|User|Share|GrpTRES
lab|root|||1|gres/gpu=16
lab|phys|root||3|
lab|phys||ana|1|
lab|phys||bo|1|
lab|phys||cy|parent|
lab|bio|root||1|
lab|bio||dee|parent|
"""


def mixed_account_hours(E: Events, tree: list[ev.Event]) -> list[ev.Event]:
    """Two hours on MIXED_ASSOC's tree (``tree``: its capacity and node events): every kind of user runs or waits."""
    return [
        *tree,
        E.submit(0, "a1", "phys/ana", gpus=8), E.start(0, "a1", ("lab-n000",), 8), E.complete(60, "a1"),
        E.submit(0, "c1", "phys", gpus=8), E.start(0, "c1", ("lab-n001",), 8),     # cy: Share=parent
        E.submit(0, "d1", "bio", gpus=4), E.start(60, "d1", ("lab-n000",), 4),
        E.submit(60, "o1", "phys/bo", gpus=8),                                      # waits to the end
        E.complete(120, "c1"), E.complete(120, "d1"),
    ]


def write_log(path: Path, events: list[ev.Event]) -> Path:
    log = EventLog(path)
    log.append(events)
    log.close()
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory whose events/ holds the two-teams day."""
    write_log(tmp_path / "run" / "events", two_teams_day())
    return tmp_path / "run"
