"""deploy/compose.yaml: Kafka in KRaft mode, topics created before the workers start, workers the CLI knows."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest

from tests.deploy.names import DEPLOY, ROOT, check_command, flag_value, http_port, in_code, load_yaml

COMPOSE = DEPLOY / "compose.yaml"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    doc = load_yaml(COMPOSE)
    assert set(doc) >= {"services", "volumes"}
    return dict(doc["services"])


def _kafka(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: s
        for name, s in services.items()
        if str(s.get("image", "")).startswith("apache/kafka:") and "KAFKA_NODE_ID" in s.get("environment", {})
    }


def test_every_image_is_pinned_to_a_version(services: dict[str, Any]) -> None:
    for name, service in services.items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", f"service {name}: image {image!r} is not pinned"
    assert {s["image"] for s in _kafka(services).values()} == {services["topics"]["image"]}


def test_the_tests_run_the_kafka_version_the_brokers_run(services: dict[str, Any]) -> None:
    pom = ElementTree.parse(DEPLOY / "kafka" / "pom.xml").getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pinned = pom.findtext("m:properties/m:kafka.version", namespaces=ns)
    images = {s["image"] for s in _kafka(services).values()}
    assert images == {f"apache/kafka:{pinned}"}, f"deploy/kafka/pom.xml pins {pinned}, the brokers run {images}"


def test_kafka_runs_in_kraft_mode_with_a_consistent_quorum(services: dict[str, Any]) -> None:
    brokers = _kafka(services)
    assert len(brokers) >= 3, "three nodes, so acks=all survives one broker down"
    ids = {}
    for name, service in brokers.items():
        env = service["environment"]
        assert "zookeeper" not in str(env).lower()
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        ids[int(env["KAFKA_NODE_ID"])] = service["hostname"]
        listeners = dict(x.split("://") for x in env["KAFKA_LISTENERS"].split(","))
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners
        advertised = dict(x.split("://") for x in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
        assert advertised["INTERNAL"] == f"{service['hostname']}:9092"
        external_port = advertised["EXTERNAL"].rsplit(":", 1)[1]
        assert f"{external_port}:{listeners['EXTERNAL'].lstrip(':')}" in service["ports"], name
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", "topics are created with their partition counts"
    voters = brokers[next(iter(brokers))]["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert {int(v.split("@")[0]): v.split("@")[1].split(":")[0] for v in voters.split(",")} == ids
    min_isr = int(brokers[next(iter(brokers))]["environment"]["KAFKA_MIN_INSYNC_REPLICAS"])
    assert 1 < min_isr < len(brokers)


def test_the_topics_service_runs_the_topic_script_before_the_workers(services: dict[str, Any]) -> None:
    topics = services["topics"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in topics["volumes"]}
    script = mounts[topics["entrypoint"][-1]]
    assert (DEPLOY / script).resolve() == (DEPLOY / "k8s" / "create-topics.sh").resolve()
    assert set(topics["depends_on"]) == set(_kafka(services))
    assert services["worker"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    bootstrap = topics["environment"]["GPULEDGER_BOOTSTRAP"]
    assert {h.split(":")[0] for h in bootstrap.split(",")} == {s["hostname"] for s in _kafka(services).values()}


def test_the_worker_service_runs_a_command_the_cli_has(services: dict[str, Any]) -> None:
    worker = services["worker"]
    build = worker["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (DEPLOY / "Dockerfile").resolve()
    assert (DEPLOY / build["context"]).resolve() == ROOT
    args = worker["command"]
    assert args[0] == "worker"
    assert flag_value(args, "--bootstrap") == services["topics"]["environment"]["GPULEDGER_BOOTSTRAP"]
    check_command(args, "compose service worker")


def test_the_worker_environment_is_read_by_the_code(services: dict[str, Any]) -> None:
    for name in services["worker"]["environment"]:
        assert in_code(name), f"compose sets {name} for the worker but no code reads it"


def test_several_workers_and_their_health_check_use_the_worker_port(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert worker["deploy"]["replicas"] >= 2
    port = http_port(worker["command"])
    assert flag_value(worker["command"], "--http") == f"0.0.0.0:{port}", "listen beyond the container's loopback"
    check = " ".join(worker["healthcheck"]["test"])
    path = check.split(f"localhost:{port}", 1)[1].split("'", 1)[0]
    assert path == "/healthz" and in_code(path), f"the worker serves no {path}"


def test_prometheus_and_grafana_mount_files_that_exist(services: dict[str, Any]) -> None:
    for name in ("prometheus", "grafana"):
        for mount in services[name]["volumes"]:
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts {source}, which is missing"
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (DEPLOY / "grafana" / "dashboards" / home.rsplit("/", 1)[1]).is_file()
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]


def test_every_named_volume_is_declared() -> None:
    doc = load_yaml(COMPOSE)
    used = {v.split(":")[0] for s in doc["services"].values() for v in s.get("volumes", []) if not v.startswith(".")}
    assert used == set(doc["volumes"])
