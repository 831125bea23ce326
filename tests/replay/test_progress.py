"""The progress bar: silent for short runs, a redrawn line on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

from ledger.replay.progress import ProgressBar

DAY = 86_400 * 1_000_000


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_short_run_shows_nothing() -> None:
    out = io.StringIO()
    bar = ProgressBar("fairshare", stream=out, after_s=60)
    bar(0, 3 * DAY, 30 * DAY)
    bar.close()
    assert out.getvalue() == ""


def test_on_a_terminal_the_bar_redraws_one_line_with_days_done_of_total() -> None:
    out = Terminal()
    bar = ProgressBar("fairshare", stream=out, after_s=0, width=10)
    bar(0, 15 * DAY, 30 * DAY)
    bar(0, 30 * DAY, 30 * DAY)
    bar.close()
    assert out.getvalue() == (
        "\rfairshare [#####.....] day  15.0 of 30.0\rfairshare [##########] day  30.0 of 30.0\n"
    )


def test_elsewhere_it_writes_a_plain_line_now_and_then() -> None:
    out = io.StringIO()
    bar = ProgressBar("priority", stream=out, after_s=0, width=4)
    bar(0, 15 * DAY, 30 * DAY)
    bar(0, 16 * DAY, 30 * DAY)  # within five seconds of the last line: not repeated
    assert out.getvalue() == "priority [##..] day  15.0 of 30.0\n"
