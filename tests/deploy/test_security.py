"""TLS/SASL settings from GPULEDGER_KAFKA_* reach the aiokafka clients, and bad ones are refused clearly."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import uuid
from pathlib import Path

import pytest

from ledger.errors import ConfigError
from ledger.streams.security import ENV_VARS, KafkaSecurity


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Return (certificate, key) of a throwaway self-signed CA, in PEM."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    crt, key = folder / "ca.crt", folder / "ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=kafka.test",
         "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def test_nothing_set_means_plaintext() -> None:
    security = KafkaSecurity.from_env({})
    assert security.aiokafka_kwargs() == {"security_protocol": "PLAINTEXT"}


def test_sasl_over_tls_gives_aiokafka_the_credentials_and_the_ca(cert: tuple[Path, Path]) -> None:
    env = {
        "GPULEDGER_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "GPULEDGER_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "GPULEDGER_KAFKA_SASL_USERNAME": "ledger",
        "GPULEDGER_KAFKA_SASL_PASSWORD": "s3cret",
        "GPULEDGER_KAFKA_SSL_CAFILE": str(cert[0]),
    }
    security = KafkaSecurity.from_env(env)
    for kwargs in (security.aiokafka_kwargs(),):
        assert kwargs["security_protocol"] == "SASL_SSL"
        assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
        assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("ledger", "s3cret")
        context = kwargs["ssl_context"]
        assert isinstance(context, ssl.SSLContext) and context.check_hostname
        assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "kafka.test"),),)]


def test_the_aiokafka_clients_accept_the_settings(cert: tuple[Path, Path]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    env = {
        "GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SSL",
        "GPULEDGER_KAFKA_SSL_CAFILE": str(cert[0]),
        "GPULEDGER_KAFKA_SSL_CERTFILE": str(cert[0]),
        "GPULEDGER_KAFKA_SSL_KEYFILE": str(cert[1]),
        "GPULEDGER_KAFKA_SSL_CHECK_HOSTNAME": "false",
    }
    kwargs = KafkaSecurity.from_env(env).aiokafka_kwargs()
    assert kwargs["ssl_context"].check_hostname is False

    async def build() -> None:  # the clients validate protocol, mechanism and context when constructed
        AIOKafkaProducer(bootstrap_servers="127.0.0.1:9", **kwargs)
        AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9", **kwargs)

    asyncio.run(build())


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "TLS"}, "GPULEDGER_KAFKA_SECURITY_PROTOCOL='TLS'"),
        ({"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "GPULEDGER_KAFKA_SASL_USERNAME": "u"},
         "GPULEDGER_KAFKA_SASL_PASSWORD is empty"),
        ({"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "GPULEDGER_KAFKA_SASL_MECHANISM": "GSSAPI",
          "GPULEDGER_KAFKA_SASL_USERNAME": "u", "GPULEDGER_KAFKA_SASL_PASSWORD": "p"},
         "GPULEDGER_KAFKA_SASL_MECHANISM='GSSAPI'"),
        ({"GPULEDGER_KAFKA_SASL_USERNAME": "u"}, "SASL settings given but GPULEDGER_KAFKA_SECURITY_PROTOCOL=PLAINTEXT"),
        ({"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SSL", "GPULEDGER_KAFKA_SSL_CAFILE": "/nonexistent/ca.crt"},
         "GPULEDGER_KAFKA_SSL_CAFILE='/nonexistent/ca.crt': no such file"),
        ({"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SSL", "GPULEDGER_KAFKA_SSL_CHECK_HOSTNAME": "maybe"},
         "GPULEDGER_KAFKA_SSL_CHECK_HOSTNAME='maybe'"),
    ],
)  # fmt: skip
def test_inconsistent_settings_are_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        KafkaSecurity.from_env(env)


def test_a_client_certificate_needs_its_key(cert: tuple[Path, Path]) -> None:
    env = {"GPULEDGER_KAFKA_SECURITY_PROTOCOL": "SSL", "GPULEDGER_KAFKA_SSL_CERTFILE": str(cert[0])}
    with pytest.raises(ConfigError, match="GPULEDGER_KAFKA_SSL_CERTFILE and GPULEDGER_KAFKA_SSL_KEYFILE go together"):
        KafkaSecurity.from_env(env)


def test_every_variable_is_documented_for_operators() -> None:
    doc = (Path(__file__).resolve().parents[2] / "streams" / "security.py").read_text(encoding="utf-8")
    for name in ENV_VARS:
        assert f"``{name}``" in doc


@pytest.mark.kafka
def test_plaintext_settings_from_the_environment_talk_to_a_real_broker(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPULEDGER_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
    kwargs = KafkaSecurity.from_env().aiokafka_kwargs()

    name = f"deploy-security-{uuid.uuid4().hex[:8]}"

    async def create_and_list() -> list[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap, request_timeout_ms=10_000, **kwargs)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(name, 1, 1)])
            return list(await admin.list_topics())
        finally:
            await admin.close()

    assert name in asyncio.run(create_and_list())
