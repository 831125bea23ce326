"""The HTML reports rendered by a real browser: every chart draws, the page logs no error.

Uses Debian's ``chromium`` in headless mode (``.ci/run`` installs it); skipped when it is absent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ledger.queries import audit, render_html
from ledger.queries.report import REPORT_TABLES, compare_html
from tests.audits.conftest import two_teams_day
from tests.audits.test_report import many_teams_day

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


class Charts(HTMLParser):
    """Count, per <svg>, the marks that draw data (non-empty polylines and polygons, rects of some width)."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[tuple[str, int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self.charts.append((a.get("aria-label") or "", 0))
            return
        line = tag in ("polyline", "polygon") and len((a.get("points") or "").split()) >= 2
        box = tag == "rect" and float(a.get("width") or 0) > 0 and float(a.get("height") or 0) > 0
        if self.charts and (line or box):
            self.charts[-1] = (self.charts[-1][0], self.charts[-1][1] + 1)


def browse(page: Path, tmp_path: Path) -> tuple[str, str]:
    """Return the DOM chromium built from ``page`` and what it logged (console messages included)."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        check=True, capture_output=True, text=True, timeout=180,
    )
    return done.stdout, done.stderr


def console_errors(log: str) -> list[str]:
    """Return the page's console messages (chromium prints them as CONSOLE lines) and SVG parse errors."""
    return [line for line in log.splitlines() if "CONSOLE" in line or re.search(r"Error: <\w+> attribute", line)]


def drawn(dom: str) -> list[tuple[str, int]]:
    parser = Charts()
    parser.feed(dom)
    return parser.charts


def test_every_chart_of_an_audit_draws_and_the_page_logs_no_error(tmp_path: Path) -> None:
    page = render_html(audit(many_teams_day(), details=REPORT_TABLES), tmp_path / "report.html")
    dom, log = browse(page, tmp_path)
    assert console_errors(log) == []
    charts = drawn(dom)
    assert len(charts) >= 5, charts  # ratio bars, the worst teams day by day, cluster, waits, discarded work
    assert [label for label, marks in charts if marks == 0] == []  # every chart has data marks


def test_every_chart_of_a_comparison_draws_in_columns(tmp_path: Path) -> None:
    runs = [{"audit": audit(day(), details=REPORT_TABLES), "replay": {}} for day in (two_teams_day, many_teams_day)]
    page = tmp_path / "compare.html"
    page.write_text(compare_html(["one", "two"], runs, title="two runs"), encoding="utf-8")
    dom, log = browse(page, tmp_path)
    assert console_errors(log) == []
    assert dom.count("class=\"cols\"") == 5  # headline, owed, cluster, waits, discarded: one column per run
    assert [label for label, marks in drawn(dom) if marks == 0] == []


def test_a_screenshot_is_a_rendered_page(tmp_path: Path) -> None:
    page = render_html(audit(two_teams_day(), details=REPORT_TABLES), tmp_path / "report.html")
    shot = tmp_path / "shot.png"  # under the test's own tmp directory, never in the repository
    assert CHROMIUM is not None
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1600",
                    f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=180)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses to a few KB
