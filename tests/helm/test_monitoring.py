"""The chart's Grafana dashboard ConfigMap and PrometheusRule (metrics.grafanaDashboard,
metrics.prometheusRule): off by default, rendered from files/ when on, naming only metrics the
workers export, its queries valid PromQL (promtool) and its panels laid out without overlap."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

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
               "NsfleetWorkerNotReady", "NsfleetHighErrorRate", "NsfleetBrokerSetWithoutMaster",
               "NsfleetOldWorkersAfterLayoutMove"}


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
                  "answered from a stale view during a store outage",
                  "broker sets without a master", "controller elections",
                  "in-sync replicas by broker set"):
        assert topic in titles, topic
    assert {v["name"] for v in DASHBOARD["templating"]["list"]} == {"datasource", "job"}
    for panel in DASHBOARD["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
            assert 'job=~"$job"' in target["expr"], target["expr"]


def test_dashboard_layout_has_unique_ids_and_no_overlap() -> None:
    """Panel ids are unique; every panel lies within Grafana's 24 columns, none overlaps
    another, and each row spans the width above its panels."""
    panels = DASHBOARD["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, (p["id"], g)
        if p["type"] == "row":
            assert (g["x"], g["w"], g["h"]) == (0, 24, 1), (p["id"], g)
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['id']} overlaps {cells[(x, y)]} at {x},{y}"
                cells[(x, y)] = p["id"]
    # In the file's order, top to bottom: each panel below its row (a new row starts lower).
    tops = [(p["gridPos"]["y"], p["gridPos"]["x"]) for p in panels]
    assert tops == sorted(tops)


def test_the_controller_row_is_last_and_aggregates_like_the_alert() -> None:
    rows = [i for i, p in enumerate(DASHBOARD["panels"]) if p["type"] == "row"]
    controller = DASHBOARD["panels"][rows[-1]:]
    assert controller[0]["title"] == "Controller"
    exprs = [t["expr"] for p in controller[1:] for t in p["targets"]]
    assert {m for e in exprs for m in re.findall(r"nsfleet_\w+", e)} == {
        "nsfleet_controller_sets_without_master", "nsfleet_controller_elections_total",
        "nsfleet_controller_sync_state_set_size"}
    # Every worker exports the fleet's count: as NsfleetBrokerSetWithoutMaster, the lowest
    # worker's count per fleet, never the workers' sum; red from one set on.
    alert = next(r["expr"] for g in ALERTS["groups"] for r in g["rules"]
                 if r["alert"] == "NsfleetBrokerSetWithoutMaster")
    per_fleet = alert.split(" > ")[0].replace(
        "without_master)", 'without_master{job=~"$job"})')
    stat = next(p for p in controller if p["type"] == "stat")
    assert [t["expr"] for t in stat["targets"]] == [f"sum({per_fleet})"]
    steps = stat["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["color"] for s in steps] == ["green", "red"] and steps[1]["value"] == 1
    # A gauge every worker exports per set: the highest worker's value, never a sum.
    (sss,) = [e for e in exprs if "sync_state_set_size" in e]
    assert sss.startswith("max by (broker_name) (")


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian: prometheus) missing")
def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each query as Grafana sends it ($job: every job), a recording rule promtool parses."""
    exprs = [e.replace('"$job"', '".+"').replace("$__rate_interval", "1m")
             for e in dashboard_exprs()]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump(rules))
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "dashboard.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


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
