"""The compiled core (built by default): it runs, its snapshots cross builds, a stale build runs its sources.

The first two run only with the compiled modules built. The pinned decision hashes of ``test_golden.py``
then run against the compiled modules too: the compiled core must make the same decisions, byte
for byte, as the Python sources.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ledger.core
from bench.core import CLUSTER, budget_tree, setup_events, workloads
from ledger.codec import encode
from ledger.core import DecisionCore, Knobs

compiled_only = pytest.mark.skipif(
    not ledger.core.COMPILED, reason="the compiled core is not built (no C compiler, or make pure)"
)

ROOT = Path(__file__).resolve().parents[2]
HOT = (
    "contract", "fairshare", "occupancy", "placement", "policies", "preemption", "queues", "rooms", "scheduler", "tree",
    "walk",
)
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


def test_a_compiled_module_built_from_other_sources_is_found(tmp_path: Path) -> None:
    # the one check both compiled packages (ledger.core, ledger.replay) run at import
    from importlib.machinery import EXTENSION_SUFFIXES

    from ledger.buildcheck import MANIFEST, manifest_for, stale_modules

    (tmp_path / "scheduler.py").write_text("x = 1\n")
    (tmp_path / f"scheduler{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (tmp_path / f"_native__mypyc{EXTENSION_SUFFIXES[0]}").write_bytes(b"")  # no source: not a module's shim
    assert stale_modules(str(tmp_path)) == ["scheduler"]  # no record of what was compiled
    (tmp_path / MANIFEST).write_text(json.dumps(manifest_for(str(tmp_path), ["scheduler"])))
    assert stale_modules(str(tmp_path)) == []
    (tmp_path / "scheduler.py").write_text("x = 2\n")  # edited after the build
    assert stale_modules(str(tmp_path)) == ["scheduler"]


@compiled_only
def test_a_package_with_an_edited_source_runs_its_sources(tmp_path: Path) -> None:
    # a copy of the installed build, one core source edited (a comment): that package falls back to
    # its sources and says why on stderr; the untouched replay package stays compiled
    shutil.copytree(ROOT / "ledger", tmp_path / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    with (tmp_path / "ledger" / "core" / "tree.py").open("a") as f:
        f.write("# edited\n")
    probe = "import ledger.core, ledger.replay; print(ledger.core.COMPILED, ledger.replay.COMPILED)"
    env = {k: v for k, v in os.environ.items() if k != "GPULEDGER_PURE"}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True"]
    assert "tree.py changed" in done.stderr and "running the Python sources" in done.stderr


@compiled_only
def test_the_pure_build_passes_the_golden_hashes_and_field_lists_too() -> None:
    # make test runs the compiled build; the same pinned hashes (and the pure-only snapshot check)
    # then run once more with the sources, in a process of their own
    env = {**os.environ, "GPULEDGER_PURE": "1"}
    tests = ["tests/core/test_golden.py", "tests/core/test_compiled.py::test_snapshots_name_every_field_but_the_caches"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout  # every test ran with the sources


def test_no_c_compiler_means_the_pure_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ledger.buildcheck import compiler_missing

    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert "no C compiler" in str(compiler_missing())
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert "C compiler failed" in str(compiler_missing())


@pytest.mark.skipif(ledger.core.COMPILED, reason="compiled objects have no __dict__ to compare with")
def test_snapshots_name_every_field_but_the_caches() -> None:
    # What a snapshot is made of (named by hand: the compiled build has no __dict__) must follow the
    # classes: an attribute added to an __init__ and not to its component's snapshot would be lost.
    from ledger.core import fairshare, placement

    core = morning()
    state = core.state()
    components = {"workloads", "pool", "wakeups", "holds", "passes", "outputs"}
    derived = {"verdicts", "lookback"}  # rebuilt on demand, and a constant of the knobs
    assert set(core.__dict__) == set(state) - {"standings"} | {"tree", "occ", "order"} | components | derived
    # what a restored component gets elsewhere: its caches, and the cluster's name (from the core)
    elsewhere = {"pool": {"tiers_cache", "rooms_cache"}, "outputs": {"cluster"}}
    for name in components:
        part = getattr(core, name)
        kept = set(state[name])  # type: ignore[call-overload]
        assert set(part.__dict__) - elsewhere.get(name, set()) == set(part.snapshot()) == kept, name
    assert isinstance(core.order, fairshare.FairShareOrder)
    assert set(core.order.__dict__) == set(fairshare._STATE)
    assert set(core.hosts.__dict__) - set(placement._STATE) == {"dirty_cache"}
    assert set(core.occ.__dict__) - set(core.occ.__getstate__()) == {"own_exposed_cache"}
    assert set(core.tree.__dict__) - set(core.tree.__getstate__()) == {"_branches"}
    flat = DecisionCore(Knobs(policy="priority"), CLUSTER).order
    assert set(flat.__dict__) == set(flat.__getstate__())


def test_the_import_time_build_check_covers_every_compiled_package() -> None:
    import sys

    import ledger
    from ledger.buildcheck import COMPILED_PACKAGES

    assert [type(f) for f in sys.meta_path].count(ledger._BuildCheck) == 1  # armed once, by the package
    assert ledger._BuildCheck().pending == set(COMPILED_PACKAGES)
