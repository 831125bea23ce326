"""The topic script creates exactly the worker's topics, with the partition counts and cleanup policies it needs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ledger.streams import topics
from tests.deploy.names import DEPLOY, expand_k8s, flag_value, load_yaml, script_reads, subcommands

SCRIPT = DEPLOY / "k8s" / "create-topics.sh"


def created(path: Path = SCRIPT) -> dict[str, tuple[str, dict[str, str]]]:
    """Return {topic: (partitions as written, {config: value})} from the script's ``create`` lines."""
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for line in path.read_text(encoding="utf-8").replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0] != "create":
            continue
        name, partitions, rest = words[1], words[2], words[3:]
        configs = dict(rest[i + 1].split("=", 1) for i, w in enumerate(rest) if w == "--config")
        assert name not in out, f"{path.name}: topic {name} created twice"
        out[name] = (partitions, configs)
    return out


def _partitions(written: str, events_partitions: int) -> int:
    return events_partitions if written in ("$PARTITIONS", "${PARTITIONS}") else int(written)


def _deployment(source: str) -> tuple[dict[str, str], list[str]]:
    """Return (settings given to the topic script, the workers' args with settings expanded) of a deployment."""
    if source == "compose":
        services = load_yaml(DEPLOY / "compose.yaml")["services"]
        return services["topics"]["environment"], services["worker"]["command"]
    env = load_yaml(DEPLOY / "k8s" / "configmap.yaml")["data"]
    (worker,) = load_yaml(DEPLOY / "k8s" / "deployment.yaml")["spec"]["template"]["spec"]["containers"]
    return env, expand_k8s(worker["args"], env)


@pytest.mark.parametrize("source", ["compose", "configmap"])
def test_the_script_creates_every_topic_the_worker_uses_with_its_partition_count(source: str) -> None:
    env, worker_args = _deployment(source)
    partitions, app_id = int(env["GPULEDGER_PARTITIONS"]), env["GPULEDGER_APP_ID"]
    assert flag_value(worker_args, "--partitions") == str(partitions), "workers and topics disagree on partitions"
    assert flag_value(worker_args, "--app-id") == app_id, "workers and topics disagree on the changelog prefix"
    have = {name.replace("${APP_ID}", app_id): _partitions(p, partitions) for name, (p, _) in created().items()}
    assert have == topics.worker_topics(partitions, app_id)


def test_the_script_defaults_to_the_workers_defaults() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    default_app_id = text.split("GPULEDGER_APP_ID:-", 1)[1].split("}", 1)[0]
    assert default_app_id == topics.WORKER_APP_ID == subcommands()["worker"].get_default("app_id")


def test_events_and_decisions_expire_while_changelogs_are_compacted() -> None:
    made = created()
    for name in (topics.EVENTS, topics.DECISIONS, topics.DEADLETTER):
        configs = made[name][1]
        assert configs.get("cleanup.policy") == "delete", name
        assert "retention.ms" in configs, f"{name} needs an explicit retention"
    for name in topics.changelog_topics("${APP_ID}"):
        # the script keeps changelogs for good and otherwise creates them as the worker would
        want = {**topics.topic_configs(name.replace("${APP_ID}", topics.WORKER_APP_ID)), "retention.ms": "-1"}
        assert made[name][1] == want, name


@pytest.mark.parametrize("where", ["script default", "compose", "configmap"])
def test_events_are_kept_for_good_by_default(where: str) -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    values = {
        "script default": text.split("GPULEDGER_EVENTS_RETENTION_MS:-", 1)[1].split("}", 1)[0],
        "compose": load_yaml(DEPLOY / "compose.yaml")["services"]["topics"]["environment"][
            "GPULEDGER_EVENTS_RETENTION_MS"
        ],
        "configmap": load_yaml(DEPLOY / "k8s" / "configmap.yaml")["data"]["GPULEDGER_EVENTS_RETENTION_MS"],
    }
    ms = int(values[where])
    assert ms == -1 or ms >= 14 * 86_400_000, "a rebuild needs every budget tree; at least two windows of events"


def test_every_setting_the_script_reads_is_given_or_defaulted() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    reads = {n for n in script_reads(SCRIPT) if n.startswith("GPULEDGER_")}
    required = set(re.findall(r"\$\{(GPULEDGER_[A-Z0-9_]+):\?", text))
    defaulted = set(re.findall(r"\$\{(GPULEDGER_[A-Z0-9_]+):-", text))
    compose = set(load_yaml(DEPLOY / "compose.yaml")["services"]["topics"]["environment"])
    k8s = set(load_yaml(DEPLOY / "k8s" / "configmap.yaml")["data"]) | set(
        load_yaml(DEPLOY / "k8s" / "secret.yaml")["stringData"]
    )
    assert reads <= required | defaulted, f"read without a default or a check: {reads - required - defaulted}"
    sasl_only = {"GPULEDGER_KAFKA_SASL_USERNAME", "GPULEDGER_KAFKA_SASL_PASSWORD"}  # checked only under SASL_*
    assert required - sasl_only <= compose, "compose's topics service misses a required setting"
    assert required <= k8s, "the Kubernetes Job misses a required setting"
    assert (compose | k8s) & reads >= {"GPULEDGER_BOOTSTRAP", "GPULEDGER_PARTITIONS"}
