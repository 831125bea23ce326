"""The optional compiled core (``make fast``): it runs, its snapshots cross builds, a stale build is refused.

The first two run only with the compiled modules built. The pinned decision hashes of ``test_golden.py``
then run against the compiled modules too: the compiled core must make the same decisions, byte
for byte, as the Python sources.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ledger.core
from bench.core import CLUSTER, budget_tree, setup_events, workloads
from ledger.codec import encode
from ledger.core import DecisionCore, Knobs

compiled_only = pytest.mark.skipif(not ledger.core.COMPILED, reason="the compiled core is not built (make fast)")

ROOT = Path(__file__).resolve().parents[2]
HOT = ("contract", "fairshare", "occupancy", "placement", "policies", "preemption", "queues", "scheduler", "tree")
_LATER_US = 10 * 3600 * 1_000_000

# in a pure-Python process: restore the snapshot at argv[1] and print the digest of what the next
# ten hours bring; then write a snapshot of its own run to argv[2] and print that run's digest too
_PURE_CHILD = """
import sys
import bench._pure_core
bench._pure_core.install()
import ledger.core
assert not ledger.core.COMPILED
from ledger.core import DecisionCore
from tests.core.test_compiled import later, morning
print(later(DecisionCore.restore(open(sys.argv[1], "rb").read())))
core = morning()
open(sys.argv[2], "wb").write(core.snapshot())
print(later(core))
"""


def morning() -> DecisionCore:
    """Return a fair-share core that has taken a busy morning's 300 submissions."""
    leaves = [p for p, _, _ in budget_tree() if p.count("/") == 3]
    core = DecisionCore(Knobs(), CLUSTER)
    for e in setup_events():
        core.handle(e)
    for _, submission in workloads(leaves, 300, 0.1):
        core.handle(submission)
    return core


def later(core: DecisionCore) -> str:
    """Return the sha256 of every event the core emits over the next ten hours."""
    return hashlib.sha256(b"".join(encode(e) for e in core.advance(core.now + _LATER_US))).hexdigest()


@compiled_only
def test_every_hot_module_of_the_core_is_compiled() -> None:
    for name in HOT:
        module = importlib.import_module(f"ledger.core.{name}")
        assert not str(module.__file__).endswith(".py"), f"ledger.core.{name} runs from its sources"


@compiled_only
def test_a_snapshot_crosses_from_compiled_to_pure_and_back(tmp_path: Path) -> None:
    compiled = morning()
    (tmp_path / "compiled.snap").write_bytes(compiled.snapshot())
    expected = later(compiled)
    child = subprocess.run(
        [sys.executable, "-c", _PURE_CHILD, str(tmp_path / "compiled.snap"), str(tmp_path / "pure.snap")],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    restored_by_pure, pure_run = child.stdout.split()
    assert restored_by_pure == expected  # the pure core carries on from the compiled core's state
    assert pure_run == expected  # and, from the same inputs, decided the same
    assert later(DecisionCore.restore((tmp_path / "pure.snap").read_bytes())) == expected


def test_a_compiled_module_older_than_its_source_is_refused(tmp_path: Path) -> None:
    # the one check both compiled packages (ledger.core, ledger.replay) run at import
    from importlib.machinery import EXTENSION_SUFFIXES

    from ledger.buildcheck import refuse_stale_compiled

    source, built = tmp_path / "scheduler.py", tmp_path / f"scheduler{EXTENSION_SUFFIXES[0]}"
    built.write_bytes(b"")
    source.write_text("")
    os.utime(built, (1_000_000, 1_000_000))  # built long before the source was last edited
    with pytest.raises(ImportError, match="older than"):
        refuse_stale_compiled(str(tmp_path))
    os.utime(built, None)  # rebuilt: now newer than the source
    os.utime(source, (1_000_000, 1_000_000))
    refuse_stale_compiled(str(tmp_path))


@pytest.mark.skipif(ledger.core.COMPILED, reason="compiled objects have no __dict__ to compare with")
def test_snapshots_name_every_field_but_the_caches() -> None:
    # The field lists a snapshot is made of (needed by the compiled build, which has no __dict__)
    # must follow the classes: an attribute added to an __init__ and not to its list would be lost.
    from ledger.core import fairshare, placement, scheduler

    core = morning()
    assert set(core.__dict__) - set(scheduler._STATE) == {"victims_cache", "room_cache", "rank_cache"}
    assert isinstance(core.order, fairshare.FairShareOrder)
    assert set(core.order.__dict__) == set(fairshare._STATE)
    assert set(core.hosts.__dict__) - set(placement._STATE) == {"dirty_cache"}
    assert set(core.occ.__dict__) == set(core.occ.__getstate__())
    assert set(core.tree.__dict__) - set(core.tree.__getstate__()) == {"_branches"}
    flat = DecisionCore(Knobs(policy="priority"), CLUSTER).order
    assert set(flat.__dict__) == set(flat.__getstate__())
