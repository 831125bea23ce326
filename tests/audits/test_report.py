"""The HTML report is one self-contained file: inline SVG charts and tables, nothing fetched."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from ledger import events as ev
from ledger.queries import audit, connect, render_html
from ledger.queries.report import REPORT_TABLES, discard_chart
from tests.audits.conftest import two_teams_day
from tests.factories import Events


class Outline(HTMLParser):
    """Collect what the checks need: tags, svg titles, external references, table headers."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []
        self.svg_labels: list[str] = []
        self.headers: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key):
                self.external.append(str(a[key]))
        if tag == "svg":
            self.svg_labels.append(a.get("aria-label") or "")
        self._in_th = tag == "th"

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self.headers.append(data)
            self._in_th = False


def outline(path: Path) -> Outline:
    o = Outline()
    o.feed(path.read_text(encoding="utf-8"))
    return o


def test_report_has_the_headline_charts_and_tables_and_fetches_nothing(tmp_path: Path) -> None:
    path = render_html(audit(two_teams_day(), details=REPORT_TABLES), tmp_path / "report.html")
    o = outline(path)
    assert "script" not in o.tags and "link" not in o.tags and "img" not in o.tags and o.external == []
    labels = " | ".join(o.svg_labels)
    assert "Received / owed hour by hour, budgets at depth 1 under 95% (worst first)" in labels
    assert "org/b: 50.0% of owed hour by hour" in labels and "org/a: 74.9% of owed hour by hour" in labels
    assert "Cluster: GPUs in use each hour against the capacity up" in labels
    assert "Share of workloads started within a wait, by size" in labels
    assert "Discarded GPU-hours by leaf budget over the period" in labels
    for header in ("owed gpu hours", "received gpu hours", "p90", "first wait p90", "discarded gpu hours",
                   "first start time"):
        assert header in o.headers
    text = path.read_text()
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)
    assert "a team is owed its budget share of the GPU-hours available" in text  # the definition beside the ratio
    assert text.index("org/b") < text.index("org/a")  # worst first
    assert '<tr class="short"><td>org/b</td>' in text  # shortfalls highlighted


def test_report_renders_from_a_projected_connection(tmp_path: Path) -> None:
    path = render_html(connect(two_teams_day()), tmp_path / "r.html")
    assert "Owed against delivered" in path.read_text()


def test_without_a_path_the_report_is_a_fragment_to_embed() -> None:
    fragment = render_html(audit(two_teams_day(), details=REPORT_TABLES))
    assert isinstance(fragment, str) and fragment.startswith('<div class="gpuledger-audit">')
    assert "<html" not in fragment and "<svg" in fragment


def many_teams_day() -> list[ev.Event]:
    """Twenty teams in four projects each run one job: too many for one chart each."""
    E = Events()
    out = [E.capacity(0, 64), E.node(0, "org", 1.0)]
    for p in range(4):
        out.append(E.node(0, f"org/p{p}", 1.0))
        for t in range(5):
            out.append(E.node(0, f"org/p{p}/t{t}", 1.0))
    for p in range(4):
        for t in range(5):
            wid = f"w{p}{t}"
            out += [E.submit(0, wid, f"org/p{p}/t{t}", gpus=2), E.start(10 * t, wid, (f"lab-n{p:03d}",), 2),
                    E.complete(10 * t + 60, wid)]
    return out


def test_the_worst_short_teams_are_drawn_day_by_day_and_every_team_stays_in_the_tables(tmp_path: Path) -> None:
    path = render_html(audit(many_teams_day(), details=REPORT_TABLES), tmp_path / "report.html")
    o = outline(path)
    daily = [label for label in o.svg_labels if label.startswith("org/")]
    assert [label.removesuffix(" of owed hour by hour") for label in daily] == [
        "org/p0/t4: 60.0%", "org/p1/t4: 60.0%", "org/p2/t4: 60.0%", "org/p3/t4: 60.0%", "org/p0/t3: 66.7%",
        "org/p1/t3: 66.7%"]
    text = path.read_text()
    assert all(f"org/p{p}/t{t}" in text for p in range(4) for t in range(5))  # the owed-hours table


def test_the_discard_chart_draws_the_largest_teams_and_sums_the_rest() -> None:
    teams = [{"budget": f"t{i:02d}", "discarded_gpu_hours": float(i + 1), "lost_since_checkpoint_gpu_hours": float(i),
              "restart_gpu_hours": 1.0} for i in range(40)]
    svg = discard_chart({"discarded_work": {"by_team": teams}}, top=10)
    assert "t39" in svg and "t30" in svg and "t29" not in svg
    assert "others (30 leaf budgets)" in svg
