"""The sweep page and the single-run page laid out by a real browser at 1,400 px: nothing spills, every chart shows.

Chromium (headless) lays the page out; a script added to a copy of the page measures it and writes
what it found into the DOM, which chromium dumps: each table against the box it sits in (its
scroll width against its box, and its right edge against its column's), each element against the
page's width, and every chart's size. Skipped where chromium is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ledger.cli import main
from ledger.queries import audit
from ledger.queries.report import REPORT_TABLES, html
from tests.factories import Events

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
LAB = [str(ROOT / "examples/lab/trace.csv"), "--budgets", str(ROOT / "examples/lab/budgets.yaml")]

MEASURE = """<script>
addEventListener('load', () => {
  const page = document.documentElement.clientWidth, found = {spills: [], charts: [], tables: 0};
  const name = e => e.tagName.toLowerCase()
    + (e.className && e.className.baseVal === undefined ? '.' + e.className : '')
    + (e.getAttribute('aria-label') ? '[' + e.getAttribute('aria-label') + ']' : '');
  for (const t of document.querySelectorAll('table')) {
    found.tables++;
    const box = t.parentElement.getBoundingClientRect(), r = t.getBoundingClientRect();
    if (t.scrollWidth > t.clientWidth + 1 || r.right > box.right + 1 || r.left < box.left - 1)
      found.spills.push({table: name(t.parentElement), scroll: t.scrollWidth, box: Math.round(box.width)});
  }
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width && r.right > page + 1) found.spills.push({element: name(e), right: Math.round(r.right), page});
  }
  for (const s of document.querySelectorAll('svg')) {
    const r = s.getBoundingClientRect();
    found.charts.push({chart: s.getAttribute('aria-label'), width: Math.round(r.width), height: Math.round(r.height),
                       in: s.parentElement.className});
  }
  const out = document.createElement('pre'); out.id = 'layout'; out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def laid_out(html: str, tmp_path: Path, width: int = 1400) -> dict[str, list[dict[str, object]]]:
    """Return what the measuring script found on ``html`` laid out ``width`` px wide."""
    page = tmp_path / "page.html"
    page.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1000",
         "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        check=True, capture_output=True, text=True, timeout=180,
    )
    m = re.search(r'<pre id="layout">(.*?)</pre>', done.stdout, re.S)
    assert m, "the measuring script did not run"
    found: dict[str, list[dict[str, object]]] = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return found


def _stdout(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_the_sweep_page_of_eight_settings_fits_1400_px(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = _stdout(capsys, "compare", *LAB, "--policy", "fairshare,priority", "--max-min-runtime", "1h,8h",
                   "--window", "3d,7d", "--quiet", "--format", "html")
    found = laid_out(html, tmp_path)
    assert found["tables"] == 1 and found["spills"] == []
    assert len(found["charts"]) == 3
    assert all(int(str(c["width"])) >= 300 and int(str(c["height"])) >= 200 for c in found["charts"]), found["charts"]


def four_short_teams() -> list[Any]:
    """A day on 16 GPUs: org/e holds them all for a day while org/a-d each wait with 4 GPUs: four teams short."""
    E = Events()
    evs = [E.capacity(0, 16), E.node(0, "org", 1.0), *(E.node(0, f"org/{t}", 1.0) for t in "abcde")]
    evs += [E.submit(0, "hog", "org/e", gpus=16), E.start(0, "hog", ("lab-n000", "lab-n001"), 16)]
    evs += [E.submit(0, f"{t}1", f"org/{t}", gpus=4) for t in "abcd"]
    evs.append(E.complete(24 * 60, "hog"))
    for i, t in enumerate("abcd"):
        evs += [E.start(24 * 60, f"{t}1", (f"lab-n00{i // 2}",), 4), E.complete(26 * 60 + 30 * i, f"{t}1")]
    return sorted(evs, key=lambda e: e.time)


def test_the_single_run_page_of_four_short_teams_fits_1400_px(tmp_path: Path) -> None:
    data = audit(four_short_teams(), details=REPORT_TABLES)  # the report draws the detail tables
    assert sum(1 for t in data["owed_hours"]["teams"] if t["ratio"] < 0.95) == 4
    found = laid_out(html(data, "four short teams"), tmp_path)
    assert found["tables"] >= 3 and found["spills"] == []
    assert found["charts"] and all(int(str(c["width"])) > 0 and int(str(c["height"])) > 0 for c in found["charts"])
    # the four teams' daily charts share one width: the last of them is not stretched over the page
    daily = [int(str(c["width"])) for c in found["charts"] if c["in"] == "grid"]
    assert len(daily) == 4 and len(set(daily)) == 1, daily
