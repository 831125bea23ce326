"""Each line a manager reads is counted at the level it names, and says which level and which time scale.

A narrated three hours on 16 GPUs: two projects of two researchers each (every share 1: a project's
share is 8 GPUs, a researcher's 4), every figure worked by hand below.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from ledger import events as ev
from ledger.budgets import parse_budgets
from ledger.queries import audit
from ledger.queries.report import REPORT_TABLES, compare_html, html
from ledger.queries.tables import headline, tables
from tests.factories import Events, at

TREE = """\
cluster: {name: lab, gpus: 16, gpus_per_node: 8}
nodes:
  - {path: org}
  - {path: org/p1}
  - {path: org/p1/u1}
  - {path: org/p1/u2}
  - {path: org/p2}
  - {path: org/p2/u1}
  - {path: org/p2/u2}
levels: [org, project, researcher]
team_level: project
"""


def three_hours(named: bool = True) -> list[ev.Event]:
    """Three hours of two projects.

    p1/u1 runs a (4 GPUs) all three hours; p1/u2 submits b (8 GPUs) at 1:00, which starts at 1:30 (waited
    30 min) and ends at 2:00. p2/u1 runs c (8 GPUs) from 0:00, checkpoints at 1:00, is preempted for b at
    1:30 (30 min x 8 GPUs thrown away, and 600 s x 8 GPUs to restart when it starts again at 2:00), and
    completes at 3:00. p2/u2 submits d (4 GPUs) at 0:00; it starts at 2:00 (waited 2 h) and completes at 3:00.
    """
    tree = parse_budgets(yaml.safe_load(TREE), "tree.yaml").events(at(0))
    if not named:
        tree = [e.model_copy(update={"level": None, "team_level": None}) if isinstance(e, ev.BudgetNodeDefined)
                else e for e in tree]
    E = Events()
    return [
        *tree,
        E.submit(0, "a", "org/p1/u1", gpus=4), E.start(0, "a", ("lab-n000",), 4),
        E.submit(0, "c", "org/p2/u1", gpus=8, restart_s=600), E.start(0, "c", ("lab-n001",), 8),
        E.submit(0, "d", "org/p2/u2", gpus=4),
        E.submit(60, "b", "org/p1/u2", gpus=8), E.checkpoint(60, "c", 3600),
        E.preempt(90, "c", by="b"), E.requeue(90, "c"), E.start(90, "b", ("lab-n001",), 8),
        E.complete(120, "b"), E.start(120, "c", ("lab-n001",), 8, attempt=2), E.start(120, "d", ("lab-n000",), 4),
        E.complete(180, "a"), E.complete(180, "c"), E.complete(180, "d"),
    ]


def nodes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["budget"]: t for t in data["owed_hours"]["teams"]}


DISCARDED = 8 * 0.5 + 8 * 600 / 3600  # c: half an hour since its checkpoint, and its restart, on 8 GPUs


def test_every_column_of_a_project_row_is_counted_over_the_projects_researchers() -> None:
    # Owed per project (share 8): p1 asks 4, 12, 4 GPUs in hours 0-2, so is owed 4, 8, 4 and runs 4, 8, 4:
    # 16 of 16. p2 asks 12 each hour (c and d): owed 8 each; it runs 8, 4 (c until 1:30, d waiting), 12:
    # received 8 + 4 + 8 = 20 of 24 hour by hour, and over the week 24 delivered of 24 owed.
    data = audit(three_hours())
    p1, p2 = nodes(data)["org/p1"], nodes(data)["org/p2"]
    assert (p2["owed_gpu_hours"], p2["delivered_gpu_hours"], p2["received_gpu_hours"]) == pytest.approx((24, 24, 20))
    assert (p2["ratio"], p2["ratio_week"]) == pytest.approx((20 / 24, 1.0))
    assert (p1["owed_gpu_hours"], p1["received_gpu_hours"], p1["ratio"]) == pytest.approx((16, 16, 1.0))
    # first waits: p2's c 0 s and d 2 h, p90 0 + 0.9 x 7,200 = 6,480 s; p1's a 0 s and b 30 min: 1,620 s
    assert (p2["wait_p90_s"], p1["wait_p90_s"]) == pytest.approx((6_480, 1_620))
    # c's preemption is p2's (its researcher u1's) and none of p1's
    assert (p2["discarded_gpu_hours"], p2["preemptions"]) == pytest.approx((DISCARDED, 1))
    assert (p1["discarded_gpu_hours"], p1["preemptions"]) == (0.0, 0)


def test_the_same_columns_per_researcher_and_for_the_whole_org() -> None:
    # per researcher (share 4): p2/u2 asks 4 every hour and runs only in hour 2: 4 of 12; its wait 2 h
    researchers = nodes(audit(three_hours(), level="researcher"))
    u2 = researchers["org/p2/u2"]
    assert (u2["owed_gpu_hours"], u2["received_gpu_hours"], u2["wait_p90_s"], u2["discarded_gpu_hours"]) == \
        pytest.approx((12, 4, 7_200, 0.0))
    assert researchers["org/p2/u1"]["discarded_gpu_hours"] == pytest.approx(DISCARDED)
    assert researchers["org/p2/u1"]["wait_p90_s"] == 0.0
    # the org (16 GPUs): asks 16, 24, 16; runs 12, 12, 16: 40 of 48; its four first waits 0, 0, 30 min, 2 h:
    # p90 at rank 2.7, 1,800 + 0.7 x 5,400 = 5,580 s
    org = nodes(audit(three_hours(), level="org"))["org"]
    assert (org["owed_gpu_hours"], org["received_gpu_hours"], org["wait_p90_s"], org["discarded_gpu_hours"]) == \
        pytest.approx((48, 40, 5_580, DISCARDED))


def test_the_short_projects_line_and_table_give_the_projects_own_wait_and_discards() -> None:
    data = audit(three_hours(), details=REPORT_TABLES)
    lines = headline(data)
    assert lines[0] == ("GPU-hours received / owed per project (the team level): 90.0% hour by hour, "
                        "100.0% over each week")
    text = " ".join(line.strip() for line in lines)
    assert ("Under 95% of what they were owed, per project (the team level): 1 of 2 hour by hour, 0 of 2 over their "
            "weeks (worst first, by the hour) org/p2: 83.3% hour by hour, 100.0% over its weeks, of 24 owed "
            "GPU-hours; first-wait p90 108.0 min; 5.3 GPU-hours discarded") in text
    page = html(data)
    row = re.search(r"<tr[^>]*><td>org/p2</td>(.*?)</tr>", page)
    assert row is not None
    assert re.findall(r">([^<]+)</td>", row.group(1)) == ["83.3%", "100.0%", "24.0", "24.0", "108.0 min", "5.3"]
    assert "<th>project</th><th>hour ratio</th><th>week ratio</th>" in page


def test_every_table_of_the_text_audit_names_its_level_and_time_scale() -> None:
    data = audit(three_hours())
    cols, rows = tables(data, "owed_hours")["owed_hours"]
    assert cols[4:] == ["hour_ratio", "day_ratio", "week_ratio"]
    assert rows[0][4:] == pytest.approx([36 / 40, 1.0, 1.0])  # (overall): 16 + 20 of 16 + 24 hour by hour


class Cards(HTMLParser):
    """The headline's cards, row by row: (figure, label)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str]]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        if tag == "div" and cls == "kpis":
            self.rows.append([])
        elif tag == "div" and cls.startswith("kpi"):
            self.rows[-1].append(("", ""))
        elif tag in ("b", "span") and self.rows and self.rows[-1]:
            self._in = tag

    def handle_data(self, data: str) -> None:
        if self._in and self.rows:
            figure, label = self.rows[-1][-1]
            self.rows[-1][-1] = (figure + data, label) if self._in == "b" else (figure, label + data)

    def handle_endtag(self, tag: str) -> None:
        self._in = None


def cards(page: str) -> list[list[tuple[str, str]]]:
    parser = Cards()
    parser.feed(page)
    return parser.rows


def test_the_cards_show_the_hour_and_the_week_side_by_side_each_labelled() -> None:
    first, second, _ = cards(html(audit(three_hours(), details=REPORT_TABLES)))
    assert first == [
        ("90.0%", "received / owed GPU-hours hour by hour, per project (the team level)"),
        ("100.0%", "received / owed GPU-hours over each week, per project (the team level)"),
        ("100.0%", "at most possible hour by hour this month (the hourly bound), per project"),
    ]
    assert second == [("1 of 2", "projects under 95% of owed hour by hour"),
                      ("0 of 2", "projects under 95% of owed over their weeks")]


def test_a_tree_without_level_names_is_said_once_with_how_to_name_them(tmp_path: Path) -> None:
    data = audit(three_hours(named=False), details=REPORT_TABLES)
    lines = headline(data)
    assert lines[0].startswith("GPU-hours received / owed per budget at depth 2 (the deepest level): ")
    assert sum("names no levels" in line for line in lines) == 1
    assert "`levels: [org, program, team, user]`" in " ".join(line.strip() for line in lines)
    page = html(data)
    assert page.count("names no levels") == 1 and "<code>levels: [org, program, team, user]</code>" in page
    both = compare_html(["one", "two"], [{"audit": data, "replay": {}}, {"audit": data, "replay": {}}])
    assert both.count("names no levels") == 1  # once for the page, not once per run
    named = audit(three_hours(), details=REPORT_TABLES)
    assert "names no levels" not in html(named) and "names no levels" not in " ".join(headline(named))
