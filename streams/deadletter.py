"""Dead letters: the original bytes, with why and where from in the record headers."""

from __future__ import annotations

__all__ = ["deadletter_headers", "parse_headers", "source_of"]


def source_of(topic: str, partition: int, offset: int) -> str:
    """Return the ``source`` header value that names one input record."""
    return f"{topic}/{partition}/{offset}"


def deadletter_headers(reason: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """Return the headers of a dead letter: ``reason`` and ``source`` (topic/partition/offset)."""
    return [("reason", reason.encode("utf-8", "replace")), ("source", source_of(topic, partition, offset).encode())]


def parse_headers(headers: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...]) -> dict[str, str]:
    """Return a dead letter's headers as text."""
    return {k: v.decode("utf-8", "replace") for k, v in headers}
