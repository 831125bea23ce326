"""The import contracts (import-linter, run by ``make lint``) hold, and fail on a wrong arrow planted in a copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree, env=env, capture_output=True, text=True, check=False, timeout=120,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package's sources (queries/ and streams/ copied in where ledger/ links them) and its pyproject.toml."""
    shutil.copytree(ROOT / "ledger", tmp_path / "ledger", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")
@pytest.mark.parametrize(
    ("where", "line", "broken"),
    [
        ("queries/planted.py", "import ledger.core\n", "the audits recount from the log"),
        ("events.py", "from ledger.log import EventLog  # noqa\n", "layers"),
        ("core/holds.py", "from ledger.core.scheduler import DecisionCore  # noqa\n", "the scheduler over the rules"),
        ("core/pool.py", "from ledger.core import progress  # noqa\n", "the rules over the state"),
    ],
    ids=["audits import the core", "events import the log", "a rule imports the scheduler",
         "a state component imports a rule"],
)
def test_a_planted_wrong_import_breaks_the_contract(copy: Path, where: str, line: str, broken: str) -> None:
    with (copy / "ledger" / where).open("a") as f:
        f.write(line)
    done = _lint_imports(copy)
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout and broken in done.stdout
    assert f"ledger.{where.removesuffix('.py').replace('/', '.')}" in done.stdout  # the report names the importer


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")
@pytest.mark.parametrize(
    ("where", "line", "broken", "arrows"),
    [
        # holds imports grace already
        ("core/grace.py", "from ledger.core import holds  # noqa\n", "no import circle inside the decision core",
         (".holds -> .grace", ".grace -> .holds")),
        # run imports inputs already
        ("replay/inputs.py", "from ledger.replay import run  # noqa\n", "no import circle inside the replay",
         (".inputs -> .run",)),
    ],
    ids=["two rules import each other", "the replay's inputs import what replays them"],
)  # fmt: skip
def test_a_planted_circle_breaks_the_contract(
    copy: Path, where: str, line: str, broken: str, arrows: tuple[str, ...]
) -> None:
    with (copy / "ledger" / where).open("a") as f:
        f.write(line)
    done = _lint_imports(copy)
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout and broken in done.stdout
    assert any(arrow in done.stdout for arrow in arrows)  # the report names the arrow that closes the circle


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")
def test_the_copy_as_it_is_keeps_the_contract(copy: Path) -> None:
    done = _lint_imports(copy)
    assert done.returncode == 0, done.stdout + done.stderr
