"""Every shell block of README.md and docs/*.md runs, on the small data in examples/ and tests/data/.

A block is a fenced ```sh or ```bash block. The blocks of one file run in order in one scratch
directory (a later block may use what an earlier one wrote), each as a bash script that stops at
the first failing command. A block that cannot run here (it needs a broker, Docker, a compiler or
a long run) carries the marker ``<!-- docs-test: skip (reason) -->`` on the line above its fence;
the reason is required and the skips are few.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(sh|bash)\s*$")
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<reason>[^)]+)\) -->$")
MOST_SKIPS = 16  # across all the files: a skip is for what cannot run here, not for what is slow to fix


@dataclass(frozen=True)
class Block:
    """One shell block: where it is, its text, and why it is skipped (None: it runs)."""

    path: Path
    line: int
    text: str
    skip: str | None


def blocks(path: Path) -> list[Block]:
    """Return the shell blocks of a Markdown file in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            above = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            marker = SKIP.match(above.strip())
            out.append(Block(path, start + 1, "\n".join(body) + "\n", marker["reason"] if marker else None))
        i += 1
    return out


def test_the_docs_have_blocks_and_few_skips() -> None:
    found = [b for path in DOCS for b in blocks(path)]
    assert sum(1 for b in found if b.skip is None) >= 10
    skipped = [f"{b.path.name}:{b.line} ({b.skip})" for b in found if b.skip]
    assert len(skipped) <= MOST_SKIPS, skipped


def test_every_skip_marker_sits_above_a_shell_block() -> None:
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.strip().startswith("<!-- docs-test"):
                assert SKIP.match(line.strip()), f"{path.name}:{n + 1}: write <!-- docs-test: skip (reason) -->"
                after = next((x for x in lines[n + 1 :] if x.strip()), "")
                assert FENCE.match(after), f"{path.name}:{n + 1}: a skip marker must sit just above a ```sh block"


def _scratch(tmp_path: Path) -> Path:
    """Return a scratch directory holding the data the docs name (examples/, tests/data/, deploy/)."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "tests" / "data", work / "tests" / "data")
    return work


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_shell_block_runs(path: Path, tmp_path: Path) -> None:
    found = blocks(path)
    runnable = [b for b in found if b.skip is None]
    if not runnable:
        reasons = "; ".join(sorted({b.skip or "" for b in found})) or "no shell block"
        pytest.skip(f"{path.name}: nothing to run here ({reasons})")
    work = _scratch(tmp_path)
    bin_dir = str(Path(sys.executable).parent)  # the gpuledger console script of this environment
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "GPULEDGER_NO_PROGRESS": "1"}
    for block in runnable:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text], cwd=work, env=env, capture_output=True, text=True,
            timeout=600,
        )
        assert done.returncode == 0, (
            f"{path.relative_to(ROOT)}:{block.line}: exit {done.returncode}\n{block.text}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
