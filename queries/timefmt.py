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


def duration(seconds: float) -> str:
    """Return a duration as a person reads it: 45 s, 12.5 min, 3.4 h, 2.1 d."""
    v = float(seconds)
    if abs(v) < 120:
        return f"{v:.0f} s"
    if abs(v) < 7200:
        return f"{v / 60:.1f} min"
    if abs(v) < 172_800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86_400:.1f} d"


__all__ = ["duration", "iso", "parse_iso"]
