"""Times as the audits print them: ISO 8601 in UTC with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso(us: int | None) -> str | None:
    """Return integer microseconds since the epoch as ISO 8601 UTC (``...Z``), or None."""
    if us is None:
        return None
    t = _EPOCH + timedelta(microseconds=int(us))
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond:06d}"
    return text + "Z"


def parse_iso(text: str) -> int:
    """Return an ISO 8601 time (UTC when it has no offset) as integer microseconds since the epoch."""
    t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


__all__ = ["iso", "parse_iso"]
