"""Times given on the command line (--since, --until): ISO 8601, within the span an event log can hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ledger.errors import ConfigError
from ledger.events import EARLIEST, LATEST

FIRST_INSTANT = EARLIEST
LAST_INSTANT = LATEST - timedelta(microseconds=1)  # events lie before 2100: the replay clock stops here


def _text(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def within_log_span(flag: str, text: str, t: datetime | None, *, shown: bool = False) -> datetime:
    """Return ``t`` if an event log can hold it; raise ConfigError naming the flag, its value and the limit.

    ``t`` None stands for a time too far off to represent (past year 9999); ``shown`` adds ``t`` to
    the message, for a value that is not itself a time (a duration after the first input).
    """
    at = f" ({_text(t)})" if shown and t is not None else ""
    if t is None or t > LAST_INSTANT:
        raise ConfigError(f"{flag} {text!r}{at}: after the last instant an event log can hold ({_text(LAST_INSTANT)})")
    if t < FIRST_INSTANT:
        raise ConfigError(
            f"{flag} {text!r}{at}: before the first instant an event log can hold ({_text(FIRST_INSTANT)})"
        )
    return t


def flag_time(flag: str, text: str, *, expected: str | None = None) -> datetime:
    """Return the UTC time of an ISO 8601 flag value (UTC when it has no offset) that an event log can hold.

    ``expected`` says what the flag takes, for the error when ``text`` is not a time.
    """
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        what = f"expected {expected}" if expected else "not an ISO 8601 time (e.g. 2026-03-02T00:00:00Z)"
        raise ConfigError(f"{flag} {text!r}: {what}") from None
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t
    # checked before the move to UTC, which overflows for a time near the end of year 9999
    return within_log_span(flag, text, t).astimezone(UTC)


__all__ = ["FIRST_INSTANT", "LAST_INSTANT", "flag_time", "within_log_span"]
