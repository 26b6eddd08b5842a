"""The chart's Grafana dashboard ConfigMap and PrometheusRule (metrics.grafanaDashboard,
metrics.prometheusRule): off by default, rendered from files/ when on, and naming only metrics
the workers export."""

from __future__ import annotations

import json
import re

import helm_python as helm
import pytest
import yaml

from nsfleet.config import Settings
from nsfleet.metrics import Metrics
from nsfleet.security.wiring import build as build_security
from tests.support.chartlib import CHART_DIR, FULLNAME, MINIMAL, ci, merge

ALERTS = yaml.safe_load((CHART_DIR / "files" / "alerts.yaml").read_text())
DASHBOARD = json.loads((CHART_DIR / "files" / "dashboard.json").read_text())
ON = merge(MINIMAL, {"metrics": {"prometheusRule": {"enabled": True},
                                 "grafanaDashboard": {"enabled": True}}})
ALERT_NAMES = {"NsfleetStoreUnreachable", "NsfleetClusterWithoutLiveBroker", "NsfleetExpiryStorm",
               "NsfleetWorkerNotReady", "NsfleetHighErrorRate", "NsfleetBrokerSetWithoutMaster"}


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", [])]


def exported_metric_names() -> set[str]:
    """Every sample name a worker's /metrics can show (counters with their _total)."""
    metrics = Metrics()
    build_security(Settings(), metrics.registry)  # registers nsfleet_access_denied
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        names.update(family.name + s for s in suffixes.get(family.type, []))
    return names


def test_dashboard_and_rules_are_off_by_default(render) -> None:
    out = render(MINIMAL)
    assert out.maybe("PrometheusRule") is None
    assert [c["metadata"]["name"] for c in out.all("ConfigMap")] == [FULLNAME]


def test_dashboard_configmap_carries_the_sidecar_label_and_the_dashboard(render) -> None:
    cm = render(ON).one("ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "rmq"
    assert "annotations" not in cm["metadata"]
    assert json.loads(cm["data"]["nsfleet.json"]) == DASHBOARD


def test_dashboard_label_folder_and_namespace_follow_the_values(render) -> None:
    values = merge(ON, {"metrics": {"grafanaDashboard": {
        "label": "dashboards", "labelValue": "nsfleet", "folder": "RocketMQ",
        "namespace": "monitoring"}}})
    cm = render(values).one("ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["metadata"]["labels"]["dashboards"] == "nsfleet"
    assert "grafana_dashboard" not in cm["metadata"]["labels"]
    assert cm["metadata"]["annotations"] == {"grafana_folder": "RocketMQ"}
    assert cm["metadata"]["namespace"] == "monitoring"


def test_dashboard_covers_what_an_operator_watches() -> None:
    titles = " | ".join(p["title"] for p in DASHBOARD["panels"]).lower()
    for topic in ("reads", "registrations", "latency", "cache hit rate", "store availability",
                  "expiries", "guard holds", "access denials",
                  "answered from a stale view during a store outage"):
        assert topic in titles, topic
    assert {v["name"] for v in DASHBOARD["templating"]["list"]} == {"datasource", "job"}
    for panel in DASHBOARD["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
            assert 'job=~"$job"' in target["expr"], target["expr"]


def test_dashboard_and_alerts_name_only_exported_metrics() -> None:
    exported = exported_metric_names()
    exprs = dashboard_exprs() + [r["expr"] for g in ALERTS["groups"] for r in g["rules"]]
    used = {name for e in exprs for name in re.findall(r"\bnsfleet_[a-z_]+", e)}
    assert used, "no metric found"
    assert used - exported == set()


def test_prometheus_rule_is_the_alerts_file_with_the_rule_labels(render) -> None:
    values = merge(ON, {"metrics": {"prometheusRule": {
        "labels": {"release": "kps"}, "ruleLabels": {"team": "messaging", "severity": "page"}}}})
    rule = render(values).one("PrometheusRule", FULLNAME)
    assert rule["metadata"]["labels"]["release"] == "kps"
    groups = rule["spec"]["groups"]
    assert [g["name"] for g in groups] == [g["name"] for g in ALERTS["groups"]]
    rendered = [r for g in groups for r in g["rules"]]
    source = [r for g in ALERTS["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rendered} == ALERT_NAMES
    for got, want in zip(rendered, source, strict=True):
        assert got["expr"] == want["expr"] and got["annotations"] == want["annotations"]
        # The alert's own severity wins over ruleLabels; team is added to every alert.
        assert got["labels"] == {**want["labels"], "team": "messaging"}


def test_every_alert_has_a_runbook_in_docs_and_the_base_url_can_move(render) -> None:
    runbooks = (CHART_DIR.parents[1] / "docs" / "alerts.md").read_text()
    anchors = {m.lower() for m in re.findall(r"^## (Nsfleet\w+)", runbooks, re.M)}
    rules = [r for g in ALERTS["groups"] for r in g["rules"]]
    for r in rules:
        assert r["annotations"]["runbook_url"].endswith("#" + r["alert"].lower())
        assert r["alert"].lower() in anchors
    values = merge(ON, {"metrics": {"prometheusRule": {
        "runbookBaseUrl": "https://wiki.example.com/nsfleet/alerts/"}}})
    moved = render(values).one("PrometheusRule")["spec"]["groups"][0]["rules"]
    assert moved[0]["annotations"]["runbook_url"] == (
        "https://wiki.example.com/nsfleet/alerts#nsfleetstoreunreachable")


def test_the_monitoring_ci_scenario_turns_everything_on(render) -> None:
    kinds = set(render(ci("monitoring-netpol-values")).kinds())
    assert {"ServiceMonitor", "PrometheusRule", "ConfigMap"} <= kinds


@pytest.mark.parametrize(("bad", "path"), [
    ({"grafanaDashboard": {"labelValue": "not a label value"}}, "grafanaDashboard/labelValue"),
    ({"grafanaDashboard": {"namespace": "Monitoring"}}, "grafanaDashboard/namespace"),
    ({"prometheusRule": {"runbookBaseUrl": "wiki/alerts"}}, "prometheusRule/runbookBaseUrl"),
    ({"prometheusRule": {"ruleLabels": {"team": 3}}}, "prometheusRule/ruleLabels/team"),
    ({"prometheusRule": {"enable": True}}, "prometheusRule"),
])
def test_schema_refuses_bad_monitoring_values(chart, bad: dict, path: str) -> None:
    with pytest.raises(helm.HelmError) as caught:
        chart.render(merge(ON, {"metrics": bad}), name="nsf", namespace="rmq")
    assert f"/metrics/{path}" in str(caught.value)
