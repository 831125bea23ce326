"""deploy/k8s: a Kustomize base whose workers run a real CLI command with settings the code reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ledger.streams.security import ENV_VARS
from tests.deploy.names import (
    DEPLOY,
    called_names,
    check_command,
    expand_k8s,
    http_port,
    in_code,
    k8s_expanded,
    load_yaml,
    load_yaml_all,
    provided,
    script_reads,
)

K8S = DEPLOY / "k8s"


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    out = {}
    for resource in kustomization["resources"]:
        path = K8S / resource
        assert path.is_file(), f"kustomization names {resource}, which is missing"
        for doc in load_yaml_all(path):
            assert {"apiVersion", "kind", "metadata"} <= set(doc), f"{resource}: not a Kubernetes object"
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    for generator in kustomization.get("configMapGenerator", []):
        files = {Path(f).name: (K8S / f).read_text(encoding="utf-8") for f in generator["files"]}
        out[("ConfigMap", generator["name"])] = {
            "kind": "ConfigMap",
            "metadata": {"name": generator["name"]},
            "data": files,
        }
    return out


def _pod(objects: dict[tuple[str, str], Any], kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = objects[(kind, name)]["spec"]["template"]["spec"]
    return spec


def _worker(objects: dict[tuple[str, str], Any]) -> dict[str, Any]:
    (container,) = _pod(objects, "Deployment", "gpuledger-worker")["containers"]
    return dict(container)


def _config(objects: dict[tuple[str, str], Any]) -> dict[str, str]:
    return dict(objects[("ConfigMap", "gpuledger-worker")]["data"])


def _cpu(value: str) -> float:
    return float(value[:-1]) / 1000 if str(value).endswith("m") else float(value)


def test_the_base_holds_the_objects_an_operator_expects(objects: dict[tuple[str, str], Any]) -> None:
    kinds = {kind for kind, _ in objects}
    assert kinds >= {"Deployment", "Service", "ConfigMap", "Secret", "Job", "PodDisruptionBudget", "Namespace"}
    assert load_yaml(K8S / "kustomization.yaml")["namespace"] == objects[("Namespace", "gpuledger")]["metadata"]["name"]


def test_the_workers_run_a_command_the_cli_has(objects: dict[tuple[str, str], Any]) -> None:
    worker = _worker(objects)
    assert worker["image"] == "gpuledger"
    assert {i["name"] for i in load_yaml(K8S / "kustomization.yaml")["images"]} == {"gpuledger"}
    args = worker["args"]
    assert k8s_expanded(args) <= set(_config(objects)), "args expand a variable the ConfigMap does not set"
    check_command(expand_k8s(args, _config(objects)), "Deployment gpuledger-worker")


def test_every_setting_given_to_the_workers_is_used(objects: dict[tuple[str, str], Any]) -> None:
    worker = _worker(objects)
    topic_script = script_reads(K8S / "create-topics.sh")
    expanded = k8s_expanded(worker["args"])
    for name in _config(objects):
        assert in_code(name) or name in expanded or name in topic_script, (
            f"ConfigMap sets {name}, but neither the worker's code, its args nor the topic script read it"
        )
    for env in worker["env"]:
        assert in_code(env["name"]), f"the Deployment sets {env['name']}, which no code reads"


def test_credentials_come_from_the_secret_and_the_rest_from_the_configmap(objects: dict[tuple[str, str], Any]) -> None:
    worker = _worker(objects)
    secret = objects[("Secret", "gpuledger-kafka")]["stringData"]
    for env in worker["env"]:
        if "fieldRef" in env["valueFrom"]:  # the pod's own name: the worker's static group member id
            field = env["valueFrom"]["fieldRef"]["fieldPath"]
            assert (env["name"], field) == ("GPULEDGER_INSTANCE_ID", "metadata.name")
            continue
        ref = env["valueFrom"]["secretKeyRef"]
        assert ("Secret", ref["name"]) in objects and ref["key"] in secret
    for source in worker["envFrom"]:
        assert ("ConfigMap", source["configMapRef"]["name"]) in objects
    config = _config(objects)
    assert not {k for k in config if "PASSWORD" in k or "USERNAME" in k}, "credentials belong in the Secret"
    kafka_settings = {k for k in [*config, *secret] if k.startswith("GPULEDGER_KAFKA_")}
    assert kafka_settings <= set(ENV_VARS), f"unknown TLS/SASL settings: {kafka_settings - set(ENV_VARS)}"


def test_tls_and_sasl_settings_reach_the_kafka_clients(objects: dict[tuple[str, str], Any]) -> None:
    config = _config(objects)
    worker = _worker(objects)
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    ca = Path(config["GPULEDGER_KAFKA_SSL_CAFILE"])
    assert mounts[str(ca.parent)] == "kafka-tls"
    volumes = {v["name"]: v for v in _pod(objects, "Deployment", "gpuledger-worker")["volumes"]}
    assert volumes["kafka-tls"]["secret"]["secretName"] == "gpuledger-kafka-tls"
    # the worker must build its Kafka clients with streams.security (KafkaSecurity.from_env() ...)
    provided("call:KafkaSecurity", "KafkaSecurity" in called_names())


def test_the_probes_use_the_workers_own_endpoints(objects: dict[tuple[str, str], Any]) -> None:
    worker = _worker(objects)
    port = http_port(expand_k8s(worker["args"], _config(objects)))
    ports = {p["name"]: p["containerPort"] for p in worker["ports"]}
    assert ports == {"web": port}
    paths = {}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = worker[probe]["httpGet"]
        assert get["port"] in ports, f"{probe} uses port {get['port']}, which the container does not name"
        assert in_code(get["path"]), f"{probe}: the worker serves no {get['path']}"
        paths[probe] = get["path"]
    assert paths["readinessProbe"] != paths["livenessProbe"], "a recovering worker is alive but not ready"


def test_a_headless_service_selects_the_worker_pods(objects: dict[tuple[str, str], Any]) -> None:
    service = objects[("Service", "gpuledger-worker")]
    deployment = objects[("Deployment", "gpuledger-worker")]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    worker = _worker(objects)
    assert port["targetPort"] in {p["name"] for p in worker["ports"]}
    port_number = http_port(expand_k8s(worker["args"], _config(objects)))
    assert port["port"] == port_number
    for notes in (service["metadata"]["annotations"], deployment["spec"]["template"]["metadata"]["annotations"]):
        assert int(notes["prometheus.io/port"]) == port_number
        assert in_code(notes["prometheus.io/path"])
    pdb = objects[("PodDisruptionBudget", "gpuledger-worker")]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_resources_are_sized_for_two_cores(objects: dict[tuple[str, str], Any]) -> None:
    deployment = objects[("Deployment", "gpuledger-worker")]
    resources = _worker(objects)["resources"]
    replicas = deployment["spec"]["replicas"]
    assert replicas >= 2, "two workers, so a rebalance hands clusters over instead of stopping them"
    assert _cpu(resources["requests"]["cpu"]) * replicas <= 2.0
    assert _cpu(resources["limits"]["cpu"]) * replicas <= 2.0
    assert _cpu(resources["limits"]["cpu"]) <= 1.0, "one event loop never uses more than a core"
    partitions = int(_config(objects)["GPULEDGER_PARTITIONS"])
    assert replicas <= partitions, "a worker beyond the partition count would sit idle"


def test_the_workers_write_only_to_mounted_volumes(objects: dict[tuple[str, str], Any]) -> None:
    worker = _worker(objects)
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"] for v in _pod(objects, "Deployment", "gpuledger-worker")["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    assert set(mounts.values()) <= volumes
    assert "/tmp" in mounts
    assert "/var/lib/gpuledger" in mounts, "the image's home and working directory must be writable"


def test_the_topic_job_runs_the_generated_script(objects: dict[tuple[str, str], Any]) -> None:
    pod = _pod(objects, "Job", "gpuledger-topics")
    (container,) = pod["containers"]
    script = Path(container["command"][-1])
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = {v["name"]: v for v in pod["volumes"]}[mounts[str(script.parent)]]
    generated = objects[("ConfigMap", volume["configMap"]["name"])]
    assert script.name in generated["data"]
    assert container["image"] == load_yaml(DEPLOY / "compose.yaml")["services"]["topics"]["image"]
    sources = {s.get("configMapRef", s.get("secretRef", {}))["name"] for s in container["envFrom"]}
    assert sources == {"gpuledger-worker", "gpuledger-kafka"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_renders_the_base_with_its_image_namespace_and_generated_script() -> None:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    namespaced = [d for d in docs if d["kind"] != "Namespace"]
    assert {d["metadata"].get("namespace") for d in namespaced} == {"gpuledger"}
    (worker,) = by_kind[("Deployment", "gpuledger-worker")]["spec"]["template"]["spec"]["containers"]
    tag = load_yaml(K8S / "kustomization.yaml")["images"][0]["newTag"]
    assert worker["image"] == f"gpuledger:{tag}"
    job = by_kind[("Job", "gpuledger-topics")]["spec"]["template"]["spec"]
    script_map = next(v["configMap"]["name"] for v in job["volumes"] if "configMap" in v)
    assert ("ConfigMap", script_map) in by_kind, "the Job mounts the generated (hash-suffixed) ConfigMap"
    assert by_kind[("ConfigMap", script_map)]["data"]["create-topics.sh"] == (K8S / "create-topics.sh").read_text(
        encoding="utf-8"
    )
