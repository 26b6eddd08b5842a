"""Offline rendering of helm/nsfleet for the chart tests.

Rendering uses ``helm-python-sdk`` (import name ``helm_python``): a ctypes
binding to ``libhelm_c``, a C ABI over Helm's own Go SDK (v4), shipped inside
the wheel. ``Chart.render`` runs Helm's real template engine, including
``values.schema.json`` validation and ``fail``, with no ``helm`` binary, no
cluster and no network (``lookup`` returns nothing, ``.Capabilities`` are
Helm's defaults). Manifests are then checked against the Kubernetes JSON
schemas that ``kubernetes-validate`` ships offline, in strict mode.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "helm" / "nsfleet"
CI_DIR = CHART_DIR / "ci"
CI_FILES = sorted(CI_DIR.glob("*.yaml"))
RELEASE = "nsf"
NAMESPACE = "rmq"
FULLNAME = f"{RELEASE}-nsfleet"

# The smallest values that render: an external Redis by URL.
MINIMAL: dict[str, Any] = {"externalRedis": {"url": "redis://redis.data.svc:6379/0"}}


def ci_values(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge override into a copy of base (how Helm layers -f/--set values)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Rendered:
    """The parsed output of one render."""

    files: dict[str, str]
    docs: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, text in sorted(self.files.items()):
            if not name.endswith(".yaml"):
                continue
            self.docs.extend(doc for doc in yaml.safe_load_all(text) if doc)

    @property
    def notes(self) -> str:
        return self.files.get("nsfleet/templates/NOTES.txt", "")

    def kinds(self) -> list[str]:
        return sorted(d["kind"] for d in self.docs)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
        return found[0]

    def maybe(self, kind: str) -> dict[str, Any] | None:
        found = self.all(kind)
        return found[0] if found else None

    # -- the worker -------------------------------------------------------
    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment", FULLNAME)

    @property
    def pod_spec(self) -> dict[str, Any]:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod_spec["containers"]
        return container

    @property
    def config(self) -> dict[str, str]:
        return self.one("ConfigMap", FULLNAME)["data"]

    @property
    def service(self) -> dict[str, Any]:
        return self.one("Service", FULLNAME)


# -- Kubernetes schema validation ----------------------------------------------

# The chart declares kubeVersion ">=1.29.0-0": validate against the oldest
# supported minor and the newest schemas kubernetes-validate ships.
MIN_KUBE = "1.29.0"


def kube_versions() -> list[str]:
    import kubernetes_validate

    return [MIN_KUBE, kubernetes_validate.latest_version()]


# kubernetes-validate ships only core Kubernetes schemas. ServiceMonitor is a
# prometheus-operator CRD, so it is checked structurally against this
# hand-written subset of monitoring.coreos.com/v1 ServiceMonitor (the fields the
# chart emits, with the CRD's types; unknown fields rejected).
_STR = {"type": "string"}
_STRMAP = {"type": "object", "additionalProperties": _STR}
_DURATION = {
    "type": "string",
    "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    "(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_RELABEL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "action": _STR,
        "modulus": {"type": "integer"},
        "regex": _STR,
        "replacement": _STR,
        "separator": _STR,
        "sourceLabels": {"type": "array", "items": _STR},
        "targetLabel": _STR,
    },
}
SERVICEMONITOR_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {
                    "type": "string",
                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                    "maxLength": 253,
                },
                "namespace": _STR,
                "labels": _STRMAP,
                "annotations": _STRMAP,
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": _STR},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _STRMAP, "matchExpressions": {"type": "array"}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": _STR,
                            "targetPort": {"type": ["string", "integer"]},
                            "path": _STR,
                            "scheme": {"enum": ["http", "https"]},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                            "honorLabels": {"type": "boolean"},
                            "relabelings": {"type": "array", "items": _RELABEL},
                            "metricRelabelings": {"type": "array", "items": _RELABEL},
                        },
                    },
                },
            },
        },
    },
}


# PrometheusRule (monitoring.coreos.com/v1), the same way: the fields the chart emits.
_RULE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expr"],
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": _STR,
        "record": _STR,
        "expr": {"type": ["string", "integer"]},
        "for": _DURATION,
        "keep_firing_for": _DURATION,
        "labels": _STRMAP,
        "annotations": _STRMAP,
    },
}
PROMETHEUSRULE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": SERVICEMONITOR_SCHEMA["properties"]["metadata"],
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": _STR,
                            "interval": _DURATION,
                            "rules": {"type": "array", "items": _RULE},
                        },
                    },
                },
            },
        },
    },
}
_CRD_SCHEMAS = {"ServiceMonitor": SERVICEMONITOR_SCHEMA, "PrometheusRule": PROMETHEUSRULE_SCHEMA}


@functools.cache
def _cache_schema_files() -> None:
    """kubernetes-validate re-reads and re-parses its (multi-MB) schema files on every
    call; parse each once per session. Validation itself is unchanged."""
    from kubernetes_validate import utils

    utils.schema_contents = functools.lru_cache(maxsize=None)(utils.schema_contents)


def validate_manifest(doc: dict[str, Any]) -> list[str]:
    """Validate one manifest; return the schema versions it was checked against.

    Raises on any violation, and on any kind without a schema other than the
    ServiceMonitor and PrometheusRule CRDs (no manifest is silently skipped).
    """
    import jsonschema
    import kubernetes_validate

    if doc.get("apiVersion") == "monitoring.coreos.com/v1":
        kind = doc.get("kind", "")
        jsonschema.Draft202012Validator(_CRD_SCHEMAS.get(kind, {"not": {}})).validate(doc)
        return [f"{kind.lower()}-structural"]
    _cache_schema_files()
    return [kubernetes_validate.validate(doc, v, strict=True) for v in kube_versions()]


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def ci(stem: str) -> dict[str, Any]:
    """The values of helm/nsfleet/ci/<stem>.yaml."""
    return ci_values(CI_DIR / f"{stem}.yaml")
