"""The chart renders offline and every manifest is valid Kubernetes."""

from __future__ import annotations

import copy
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest

from tests.support.chartlib import (
    CHART_DIR,
    CI_FILES,
    FULLNAME,
    MIN_KUBE,
    MINIMAL,
    ci_values,
    kube_versions,
    validate_manifest,
)

CI_IDS = [p.stem for p in CI_FILES]


def test_renders_with_the_helm_go_sdk_and_no_binary() -> None:
    # The native library bundled in the wheel is Helm's own Go SDK: rendering
    # below is Helm's template engine, not a re-implementation.
    assert Path(helm.library_path).is_file()
    assert helm.helm_sdk_version().startswith("v")


def test_validates_against_kubernetes_1_29_and_newest_schemas() -> None:
    newest = kubernetes_validate.latest_version()
    assert tuple(int(x) for x in newest.split(".")[:2]) >= (1, 29)
    assert kube_versions() == [MIN_KUBE, newest]


def test_ci_value_files_cover_the_issue_scenarios() -> None:
    scenarios = {p.stem: ci_values(p) for p in CI_FILES}
    assert any("url" in v.get("externalRedis", {}) for v in scenarios.values())
    assert any(
        v.get("externalRedis", {}).get("tls", {}).get("enabled")
        and v["externalRedis"].get("host")
        and v["externalRedis"].get("existingSecret")
        for v in scenarios.values()
    )
    assert any(v.get("redis", {}).get("enabled") for v in scenarios.values())
    assert any(
        v.get("autoscaling", {}).get("enabled") is False and "replicaCount" in v
        for v in scenarios.values()
    )
    assert any(
        v.get("metrics", {}).get("serviceMonitor", {}).get("enabled")
        and v.get("networkPolicy", {}).get("enabled")
        for v in scenarios.values()
    )


def test_default_values_refuse_to_render_without_redis(chart) -> None:
    with pytest.raises(helm.HelmRenderError, match="nsfleet: no Redis configured"):
        chart.render({}, name="nsf", namespace="rmq")


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_ci_values_render_and_validate_strictly(render, path: Path) -> None:
    out = render(ci_values(path))
    assert out.docs, "nothing rendered"
    for doc in out.docs:
        checked = validate_manifest(doc)
        assert checked, doc["kind"]
    kinds = set(out.kinds())
    assert {"ConfigMap", "Deployment", "Service", "ServiceAccount", "Pod"} <= kinds
    assert "nsfleet" in out.notes


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_helm_lint_strict_is_clean(path: Path) -> None:
    report = helm.lint(CHART_DIR, ci_values(path), strict=True, kube_version="v1.29.0")
    assert report["errors"] == []
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert serious == []


def test_strict_validation_catches_an_unknown_field(render) -> None:
    # A negative control: the validator must reject what the API server would.
    deployment = copy.deepcopy(render(MINIMAL).deployment)
    deployment["spec"]["template"]["spec"]["containers"][0]["bogusField"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_manifest(deployment)


def test_servicemonitor_structural_check_catches_an_unknown_field(render) -> None:
    values = {**MINIMAL, "metrics": {"serviceMonitor": {"enabled": True}}}
    monitor = copy.deepcopy(render(values).one("ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["prot"] = "metrics"
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        validate_manifest(monitor)


def test_every_resource_is_named_and_labelled_for_the_release(render) -> None:
    for path in CI_FILES:
        for doc in render(ci_values(path)).docs:
            meta = doc["metadata"]
            assert meta["name"].startswith(FULLNAME), meta["name"]
            assert meta["namespace"] == "rmq"
            assert meta["labels"]["app.kubernetes.io/instance"] == "nsf"
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_optional_objects_are_off_by_default(render) -> None:
    kinds = set(render(MINIMAL).kinds())
    assert kinds == {
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Pod",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    }


def test_packaged_chart_renders_like_the_directory(render, tmp_path: Path) -> None:
    archive = Path(helm.package(CHART_DIR, destination=tmp_path))
    assert archive.name.startswith("nsfleet-")
    values = ci_values(CI_FILES[0])
    with helm.Chart.load_archive(archive.read_bytes()) as packaged:
        assert not any(f["name"].startswith("ci/") for f in packaged.files)
        files = packaged.render(values, name="nsf", namespace="rmq")
    assert files == render(values).files
