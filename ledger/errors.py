"""The one exception tree of gpuledger: catch ``LedgerError`` to catch them all."""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error gpuledger raises on purpose."""


class EventValidationError(LedgerError, ValueError):
    """An event (or a field of one) breaks its schema or a domain rule.

    ``field`` and ``value`` name what is wrong; ``where`` names the source (file:line) when known.
    """

    def __init__(self, message: str, *, field: str | None = None, value: object = None, where: str | None = None):
        self.field = field
        self.value = value
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__(prefix + message)


class DecodeError(LedgerError, ValueError):
    """Bytes could not be decoded into an event (bad magic, unknown fingerprint, truncated body)."""


class LogError(LedgerError):
    """The embedded event log cannot be opened, read or appended to."""


class LogCorruptError(LogError):
    """A segment is damaged beyond its last complete batch."""


class InputError(LedgerError, ValueError):
    """A user-supplied file (trace, budgets, scheduler export) is malformed; the message names file, line and field."""


class ConfigError(LedgerError, ValueError):
    """A knob or setting has a value the system cannot use."""


class BrokerError(LedgerError):
    """Kafka could not be reached or refused a request, and the event could not be spooled either."""


class AllRejectedError(InputError):
    """Every record of an input was rejected: the command ran but had nothing to work on (exit code 1)."""
