"""Dead letters: the original bytes, with why and where from in the record headers."""

from __future__ import annotations

__all__ = ["MARK_PREFIX", "deadletter_headers", "mark_key", "parse_headers", "source_of"]

# key prefix, in the worker's ``clusters`` table, of each input partition's dead-letter mark: the
# dead-letter offset from which that partition's letters not yet covered by a checkpoint can be found
MARK_PREFIX = "\x00deadletters/"


def mark_key(partition: int) -> str:
    """Return the table key of an input partition's dead-letter mark."""
    return f"{MARK_PREFIX}{partition}"


def source_of(topic: str, partition: int, offset: int) -> str:
    """Return the ``source`` header value that names one input record."""
    return f"{topic}/{partition}/{offset}"


def deadletter_headers(reason: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """Return the headers of a dead letter: ``reason`` and ``source`` (topic/partition/offset)."""
    return [("reason", reason.encode("utf-8", "replace")), ("source", source_of(topic, partition, offset).encode())]


def parse_headers(headers: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...]) -> dict[str, str]:
    """Return a dead letter's headers as text."""
    return {k: v.decode("utf-8", "replace") for k, v in headers}
