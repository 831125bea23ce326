"""The operations guide (docs/deploy.md) names only metrics, settings, topics and commands the code has."""

from __future__ import annotations

import re

from ledger.streams import topics
from ledger.streams.security import ENV_VARS
from tests.deploy.names import AWAITED, ROOT, metric_named, option_strings, registered_metrics, subcommands


def _section() -> str:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    start = text.index("<!-- section: deploy -->")
    return text[start:]  # the operations guide is the whole of docs/deploy.md


def test_every_metric_in_the_guide_is_registered_or_openly_awaited() -> None:
    for name in set(re.findall(r"\bgpuledger_worker_[a-z_]+", _section())):
        family = {m.name for m in registered_metrics()}
        assert metric_named(name) or name in family or f"metric:{name}" in AWAITED, f"the README names {name}"


def test_every_kafka_setting_in_the_guide_is_read_by_the_workers() -> None:
    named = set(re.findall(r"\bGPULEDGER_KAFKA_[A-Z_]+", _section()))
    assert named == set(ENV_VARS)


def test_every_topic_in_the_guide_is_one_the_worker_uses() -> None:
    named = set(re.findall(r"\bgpuledger\.[a-z]+\b(?!\.)", _section())) - {"gpuledger.json"}
    assert named <= {topics.EVENTS, topics.DECISIONS, topics.DEADLETTER}
    assert {f"<app-id>-{t}-changelog" for t in topics.TABLES} <= set(
        re.findall(r"<app-id>-[a-z]+-changelog", _section())
    )


def test_every_gpuledger_command_in_the_guide_exists_with_its_flags() -> None:
    for line in re.findall(r"\bgpuledger (\w+)([^`\n]*)", _section()):
        command, rest = line
        if command not in subcommands():
            continue  # prose such as "gpuledger on Apache Kafka"
        for flag in re.findall(r"(--[a-z-]+)", rest):
            assert flag in option_strings(command), f"README: gpuledger {command} has no {flag}"
    for flag in re.findall(r"`(--[a-z-]+)`", _section()):
        kafka_tools = {"--reset-offsets", "--command-config"}  # flags of Kafka's own scripts
        assert flag in option_strings("worker") or flag in kafka_tools, f"README names worker flag {flag}"
