"""Kafka connection security (TLS, SASL) from environment variables, for the aiokafka clients.

A deployment sets these (Kubernetes: plain settings from a ConfigMap, the password from a Secret):

======================================  ==========================================================
``GPULEDGER_KAFKA_SECURITY_PROTOCOL``   ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``
``GPULEDGER_KAFKA_SASL_MECHANISM``      ``PLAIN``, ``SCRAM-SHA-256`` (default with SASL), ``SCRAM-SHA-512``
``GPULEDGER_KAFKA_SASL_USERNAME``       SASL user
``GPULEDGER_KAFKA_SASL_PASSWORD``       SASL password
``GPULEDGER_KAFKA_SSL_CAFILE``          PEM bundle of the CAs that signed the brokers' certificates
``GPULEDGER_KAFKA_SSL_CERTFILE``        client certificate (PEM) for mutual TLS
``GPULEDGER_KAFKA_SSL_KEYFILE``         its private key (PEM)
``GPULEDGER_KAFKA_SSL_KEY_PASSWORD``    the key's password, if it has one
``GPULEDGER_KAFKA_SSL_CHECK_HOSTNAME``  ``true`` (default) or ``false``
======================================  ==========================================================

An unset or empty variable means "not given". Anything inconsistent (SASL without a user, a CA
file that does not exist, an unknown protocol) raises ConfigError naming the variable and value,
before any connection is tried.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import ConfigError

__all__ = ["ENV_VARS", "KafkaSecurity"]

ENV_PROTOCOL = "GPULEDGER_KAFKA_SECURITY_PROTOCOL"
ENV_MECHANISM = "GPULEDGER_KAFKA_SASL_MECHANISM"
ENV_USERNAME = "GPULEDGER_KAFKA_SASL_USERNAME"
ENV_PASSWORD = "GPULEDGER_KAFKA_SASL_PASSWORD"
ENV_CAFILE = "GPULEDGER_KAFKA_SSL_CAFILE"
ENV_CERTFILE = "GPULEDGER_KAFKA_SSL_CERTFILE"
ENV_KEYFILE = "GPULEDGER_KAFKA_SSL_KEYFILE"
ENV_KEY_PASSWORD = "GPULEDGER_KAFKA_SSL_KEY_PASSWORD"
ENV_CHECK_HOSTNAME = "GPULEDGER_KAFKA_SSL_CHECK_HOSTNAME"
ENV_VARS = (
    ENV_PROTOCOL, ENV_MECHANISM, ENV_USERNAME, ENV_PASSWORD, ENV_CAFILE, ENV_CERTFILE, ENV_KEYFILE,
    ENV_KEY_PASSWORD, ENV_CHECK_HOSTNAME,
)  # fmt: skip

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _file(env: Mapping[str, str], name: str) -> str | None:
    value = _get(env, name)
    if value is not None and not Path(value).is_file():
        raise ConfigError(f"{name}={value!r}: no such file")
    return value


@dataclass(frozen=True)
class KafkaSecurity:
    """How to authenticate to the brokers and encrypt the connection."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Read the ``GPULEDGER_KAFKA_*`` variables (default: ``os.environ``); raise ConfigError if inconsistent."""
        env = os.environ if env is None else env
        protocol = (_get(env, ENV_PROTOCOL) or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ConfigError(f"{ENV_PROTOCOL}={protocol!r}: expected one of {', '.join(PROTOCOLS)}")
        sasl = protocol.startswith("SASL_")
        tls = protocol.endswith("SSL")
        mechanism = _get(env, ENV_MECHANISM)
        username, password = _get(env, ENV_USERNAME), _get(env, ENV_PASSWORD)
        if sasl:
            mechanism = (mechanism or "SCRAM-SHA-256").upper()
            if mechanism not in MECHANISMS:
                raise ConfigError(f"{ENV_MECHANISM}={mechanism!r}: expected one of {', '.join(MECHANISMS)}")
            for name, value in ((ENV_USERNAME, username), (ENV_PASSWORD, password)):
                if value is None:
                    raise ConfigError(f"{name} is empty but {ENV_PROTOCOL}={protocol} needs it")
        elif mechanism or username or password:
            raise ConfigError(f"SASL settings given but {ENV_PROTOCOL}={protocol}: set SASL_PLAINTEXT or SASL_SSL")
        check = (_get(env, ENV_CHECK_HOSTNAME) or "true").lower()
        if check not in _BOOL:
            raise ConfigError(f"{ENV_CHECK_HOSTNAME}={check!r}: expected true or false")
        certfile, keyfile = _file(env, ENV_CERTFILE), _file(env, ENV_KEYFILE)
        if (certfile is None) != (keyfile is None):
            raise ConfigError(f"{ENV_CERTFILE} and {ENV_KEYFILE} go together: set both for mutual TLS, or neither")
        cafile = _file(env, ENV_CAFILE)
        if not tls and (cafile or certfile):
            raise ConfigError(f"TLS files given but {ENV_PROTOCOL}={protocol}: set SSL or SASL_SSL")
        return cls(
            protocol=protocol,
            sasl_mechanism=mechanism if sasl else None,
            sasl_username=username if sasl else None,
            sasl_password=password if sasl else None,
            ssl_cafile=cafile,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
            ssl_key_password=_get(env, ENV_KEY_PASSWORD),
            ssl_check_hostname=_BOOL[check],
        )

    @property
    def uses_tls(self) -> bool:
        """Return whether connections are encrypted."""
        return self.protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """Return the TLS context (system CAs unless a CA file is given), or None without TLS."""
        if not self.uses_tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.ssl_cafile)
            if self.ssl_certfile and self.ssl_keyfile:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_key_password)
        except (ssl.SSLError, OSError) as exc:
            files = ", ".join(f for f in (self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile) if f)
            raise ConfigError(f"cannot load TLS files ({files}): {exc}") from None
        context.check_hostname = self.ssl_check_hostname
        return context

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Return the keyword arguments that AIOKafkaProducer/Consumer/AdminClient take for this security."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        if self.sasl_mechanism:
            kwargs.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        return kwargs
