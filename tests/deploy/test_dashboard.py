"""The Grafana dashboard and Prometheus config query only metrics, labels, jobs and ports the worker really has."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy import promql
from tests.deploy.names import (
    DEPLOY,
    called_names,
    http_port,
    in_code,
    load_yaml,
    metric_named,
    provided_all,
)

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "gpuledger.json"
PROMETHEUS_LABELS = {"instance", "job"}  # added to every scraped sample by Prometheus


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    with open(DASHBOARD, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]] + [
        (f"variable {v['name']}", v["query"].removeprefix("label_values(").split(",")[0])
        for v in dashboard["templating"]["list"]
    ]


def _prometheus() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEPLOY / "prometheus.yml")
    return data


def test_the_dashboard_covers_what_an_operator_watches(dashboard: dict[str, Any]) -> None:
    exprs = " ".join(e for _, e in _queries(dashboard))
    for needed in (
        "records_total",
        "consumer_lag",
        "decisions_total",
        "deadletters_total",
        "occupancy_gpu_seconds",
        "allocation_gpu_seconds",
    ):
        assert f"gpuledger_worker_{needed}" in exprs, f"no panel shows {needed}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert dashboard["uid"] and dashboard["title"]


def test_every_metric_the_dashboard_queries_is_registered_by_the_worker(dashboard: dict[str, Any]) -> None:
    jobs = {job["job_name"] for job in _prometheus()["scrape_configs"]}
    names: dict[str, bool] = {}
    for title, expr in _queries(dashboard):
        q = promql.parse(expr)
        assert q.selectors, f"panel {title!r}: no metric in {expr!r}"
        for name, labels in q.selectors.items():
            if name == "up":
                assert q.label_values["job"] <= jobs, f"panel {title!r}: no scrape job {q.label_values['job']}"
                continue
            metric = metric_named(name)
            names[f"metric:{name}"] = metric is not None
            if metric is None:
                continue
            unknown = labels - set(metric.labels) - PROMETHEUS_LABELS
            assert not unknown, f"panel {title!r}: {name} has no label(s) {unknown} (has {metric.labels})"
            grouping_ok = set(metric.labels) | PROMETHEUS_LABELS | ({"le"} if name.endswith("_bucket") else set())
            if len(q.selectors) == 1:
                assert q.grouping <= grouping_ok, f"panel {title!r}: {name} cannot be grouped by {q.grouping}"
    # the per-team gauges are defined in streams.budget_metrics; the worker must create (and update) them
    names["call:BudgetGauges"] = "BudgetGauges" in called_names()
    provided_all(names)


def test_panels_use_the_provisioned_datasource_and_defined_variables(dashboard: dict[str, Any]) -> None:
    sources = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")["datasources"]
    uids = {s["uid"] for s in sources if s["type"] == "prometheus"}
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] in uids, panel["title"]
        for target in panel["targets"]:
            for var in {w.split('"')[0] for w in target["expr"].split("$")[1:]}:
                assert var in variables, f"panel {panel['title']!r} uses ${var}, which is not defined"


def test_grafana_loads_the_dashboard_from_where_it_is_mounted() -> None:
    compose = load_yaml(DEPLOY / "compose.yaml")["services"]["grafana"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in compose["volumes"]}
    provider = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "gpuledger.yaml")["providers"][0]
    source = mounts[provider["options"]["path"]]
    assert (DEPLOY / source / DASHBOARD.name).resolve() == DASHBOARD.resolve()


def test_prometheus_scrapes_every_worker_replica_on_the_worker_port() -> None:
    services = load_yaml(DEPLOY / "compose.yaml")["services"]
    (job,) = [j for j in _prometheus()["scrape_configs"] if j["job_name"] == "gpuledger-worker"]
    assert job["metrics_path"] == "/metrics" and in_code("/metrics"), "the worker serves no /metrics"
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"] and "worker" in services, "scrape the compose service that runs the workers"
    assert sd["port"] == http_port(services["worker"]["command"])
