"""values.schema.json, the cross-field checks, and the values documentation."""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml

from tests.support.chartlib import CHART_DIR, CI_FILES, MINIMAL, ci_values, merge

SCHEMA = json.loads((CHART_DIR / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART_DIR / "values.yaml").read_text())


def render_error(chart, values: dict[str, Any]) -> str:
    with pytest.raises(helm.HelmError) as caught:
        chart.render(values, name="nsf", namespace="rmq")
    return str(caught.value)


# -- the schema rejects bad values (Helm validates it before rendering) ----------------

BAD_VALUES = [
    pytest.param({"config": {"httpPort": 70000}}, "/config/httpPort", id="port-70000"),
    pytest.param({"config": {"remotingPort": 0}}, "/config/remotingPort", id="port-0"),
    pytest.param({"config": {"metricsPort": -1}}, "/config/metricsPort", id="metrics-negative"),
    pytest.param({"config": {"httpPort": "8080"}}, "/config/httpPort", id="port-as-string"),
    pytest.param({"config": {"brokerTimeout": "2m"}}, "/config/brokerTimeout", id="timeout-string"),
    pytest.param({"config": {"logFormat": "xml"}}, "/config/logFormat", id="bad-enum"),
    pytest.param({"config": {"logLevel": "critical"}}, "/config/logLevel", id="bad-log-level"),
    pytest.param({"config": {"namespace": "prod east"}}, "/config/namespace", id="bad-namespace"),
    pytest.param({"config": {"maxBodySize": 100}}, "/config/maxBodySize", id="tiny-body-size"),
    pytest.param({"config": {"sweepInterval": 0}}, "/config/sweepInterval", id="below-minimum"),
    pytest.param({"config": {"colour": "blue"}}, "colour", id="unknown-nested-key"),
    pytest.param({"replicas": 3}, "replicas", id="unknown-top-level-key"),
    pytest.param({"processes": 0}, "/processes", id="no-processes"),
    pytest.param({"processes": "many"}, "/processes", id="processes-not-auto"),
    pytest.param({"externalRedis": {"password": "hunter2"}}, "password", id="no-inline-password"),
    pytest.param(
        {"externalRedis": {"url": "http://redis:6379"}}, "/externalRedis/url", id="bad-url-scheme"
    ),
    pytest.param({"externalRedis": {"port": 70000}}, "/externalRedis/port", id="redis-port"),
    pytest.param({"externalRedis": {"tls": "yes"}}, "/externalRedis/tls", id="tls-not-object"),
    pytest.param({"redis": {"enabled": "true"}}, "/redis/enabled", id="bool-as-string"),
    pytest.param({"redis": {"appendfsync": "sometimes"}}, "/redis/appendfsync", id="fsync-enum"),
    pytest.param({"autoscaling": {"minReplicas": 0}}, "/autoscaling/minReplicas", id="min-0"),
    pytest.param(
        {"autoscaling": {"targetCPUUtilizationPercentage": "70%"}},
        "/autoscaling/targetCPUUtilizationPercentage",
        id="cpu-target-string",
    ),
    pytest.param(
        {"podDisruptionBudget": {"maxUnavailable": "half"}},
        "/podDisruptionBudget/maxUnavailable",
        id="pdb-not-int-or-percent",
    ),
    pytest.param({"service": {"type": "ExternalName"}}, "/service/type", id="service-type"),
    pytest.param({"preStop": {"mode": "nap"}}, "/preStop/mode", id="prestop-mode"),
    pytest.param({"image": {"digest": "latest"}}, "/image/digest", id="digest-format"),
    pytest.param(
        {"metrics": {"serviceMonitor": {"interval": "often"}}},
        "/metrics/serviceMonitor/interval",
        id="duration",
    ),
    pytest.param(
        {"networkPolicy": {"egress": {"redisPorts": [6379, 99999]}}},
        "/networkPolicy/egress/redisPorts/1",
        id="egress-port",
    ),
    pytest.param(
        {"resources": {"requests": {"cpu": "lots"}}}, "/resources/requests/cpu", id="quantity"
    ),
]


@pytest.mark.parametrize(("override", "where"), BAD_VALUES)
def test_schema_rejects_bad_values(chart, override: dict[str, Any], where: str) -> None:
    values = merge(MINIMAL, override)
    message = render_error(chart, values)
    assert "values don't meet the specifications of the schema" in message
    assert where in message
    # the same verdict from an independent JSON-schema implementation
    merged = merge(DEFAULTS, values)
    assert list(jsonschema.Draft7Validator(SCHEMA).iter_errors(merged))


def test_schema_is_valid_draft7_and_accepts_the_defaults() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(DEFAULTS)
    for path in CI_FILES:
        jsonschema.Draft7Validator(SCHEMA).validate(merge(DEFAULTS, ci_values(path)))


def walk_schema(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key, sub in node.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        out.append((here, sub))
        out.extend(walk_schema(sub, here))
    return out


def test_every_object_level_the_chart_defines_is_closed() -> None:
    assert SCHEMA["additionalProperties"] is False
    for path, sub in walk_schema(SCHEMA):
        if sub.get("type") == "object" and "properties" in sub:
            assert sub.get("additionalProperties") is False, path


def test_every_port_is_bounded() -> None:
    for path, sub in walk_schema(SCHEMA):
        if path.lower().endswith("port"):
            assert sub.get("maximum") == 65535, path
            assert sub.get("minimum") in (0, 1), path


# -- Redis must be configured exactly once --------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"externalRedis": {"url": ""}},
        {"redis": {"enabled": False}, "externalRedis": {"host": ""}},
    ],
)
def test_neither_redis_is_refused(chart, values: dict[str, Any]) -> None:
    message = render_error(chart, values)
    assert "nsfleet: no Redis configured" in message
    assert "externalRedis.url" in message and "redis.enabled=true" in message


@pytest.mark.parametrize("external", [{"url": "redis://r:6379/0"}, {"host": "r"}])
def test_both_redis_are_refused(chart, external: dict[str, Any]) -> None:
    message = render_error(chart, {"redis": {"enabled": True}, "externalRedis": external})
    assert "nsfleet: both the in-chart Redis" in message
    assert "choose exactly one" in message


def test_url_and_host_together_are_refused(chart) -> None:
    message = render_error(chart, {"externalRedis": {"url": "redis://r:6379/0", "host": "r"}})
    assert "set either externalRedis.url or externalRedis.host, not both" in message


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@r:6379/0",
        "rediss://user:s3cret@r:6380/1",
        "redis+sentinel://s0:26379/mymaster/0?sentinel_password=s3cret",
        "redis+cluster://u:s3cret@n0:7000,n1:7001",
    ],
)
def test_a_password_in_the_url_is_refused(chart, url: str) -> None:
    message = render_error(chart, {"externalRedis": {"url": url}})
    assert "must not contain a password" in message
    assert "s3cret" not in message.split("execution error")[0]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"config": {"metricsPort": 8080}}, "must differ"),
        ({"config": {"remotingPort": 8080}}, "must differ"),
        ({"config": {"sweepInterval": 120}}, "sweepInterval must be smaller"),
        ({"autoscaling": {"minReplicas": 5, "maxReplicas": 3}}, "minReplicas must not exceed"),
        ({"autoscaling": {"targetCPUUtilizationPercentage": None}}, "at least one metric"),
        (
            {"resources": {"requests": {"cpu": None}}},
            "CPU autoscaling needs resources.requests.cpu",
        ),
        ({"podDisruptionBudget": {"maxUnavailable": None}}, "needs maxUnavailable or minAvailable"),
        (
            {"externalRedis": {"url": None, "host": "r", "tls": {"caSecret": "ca"}}},
            "need externalRedis.tls.enabled=true",
        ),
        (
            {"externalRedis": {"tls": {"enabled": True}}},
            "tls.enabled applies to externalRedis.host",
        ),
    ],
)
def test_cross_field_checks(chart, override: dict[str, Any], expected: str) -> None:
    assert expected in render_error(chart, merge(MINIMAL, override))


# -- documentation -------------------------------------------------------------------------


def leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in values.items():
        here = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value and here not in OPAQUE:
            keys.extend(leaf_keys(value, here))
        else:
            keys.append(here)
    return keys


# Kubernetes objects passed through whole: documented as one key.
OPAQUE = {
    "resources",
    "redis.resources",
    "tests.resources",
    "podSecurityContext",
    "securityContext",
}


def readme_table() -> dict[str, list[str]]:
    text = (CHART_DIR / "README.md").read_text()
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = [c.strip() for c in match.group(2).split("|")]
    return rows


def test_readme_documents_every_value() -> None:
    rows = readme_table()
    missing = [key for key in leaf_keys(DEFAULTS) if key not in rows]
    assert missing == []
    for key, (kind, default, description) in rows.items():
        assert kind and default and description, key


def test_readme_documents_only_real_values() -> None:
    documented = set(readme_table())
    known = {path for path, _ in walk_schema(SCHEMA)}
    assert documented - known == set()


def test_readme_defaults_match_values_yaml() -> None:
    rows = readme_table()
    for key in leaf_keys(DEFAULTS):
        value: Any = DEFAULTS
        for part in key.split("."):
            value = value[part]
        shown = rows[key][1]
        assert shown.startswith("`") and shown.endswith("`"), key
        assert json.loads(shown[1:-1].replace("\\|", "|")) == value, key
