"""Static checks of the worker image recipe (no Docker engine is available here).

The image cannot be built in this environment; these tests pin what the chart
relies on: the uid the pods run as, the entrypoint, the ports, and a build
context that carries what `pip wheel .` needs.
"""

from __future__ import annotations

import fnmatch
import json
import re

import yaml

from tests.support.chartlib import CHART_DIR, REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
DOCKERIGNORE = (REPO / ".dockerignore").read_text()


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for word, rest in instructions():
        if word == "FROM":
            out.append([])
        if out:
            out[-1].append((word, rest))
    return out


def test_multi_stage_on_python_311_slim() -> None:
    build, runtime = stages()
    args = dict(rest.split("=", 1) for word, rest in instructions()[:1] if word == "ARG")
    assert args == {"PYTHON_IMAGE": "python:3.11-slim"}
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert runtime[0] == ("FROM", "${PYTHON_IMAGE} AS runtime")
    build_runs = " ".join(rest for word, rest in build if word == "RUN")
    assert "pip wheel" in build_runs
    assert "pip install /dist/nsfleet-" in build_runs
    # the runtime stage adds only the virtualenv built in stage one
    copies = [rest for word, rest in runtime if word == "COPY"]
    assert copies == ["--from=build /opt/nsfleet /opt/nsfleet"]
    runtime_runs = " ".join(rest for word, rest in runtime if word == "RUN")
    assert "apt-get" not in runtime_runs and "pip install" not in runtime_runs


def test_runs_as_uid_10001_like_the_chart() -> None:
    runtime = stages()[-1]
    users = [rest for word, rest in runtime if word == "USER"]
    assert users == ["10001:10001"]
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert values["podSecurityContext"]["runAsGroup"] == 10001


def test_entrypoint_cmd_and_ports() -> None:
    runtime = dict(stages()[-1])
    assert json.loads(runtime["ENTRYPOINT"]) == ["nsfleet"]
    assert json.loads(runtime["CMD"]) == ["serve"]
    assert runtime["EXPOSE"].split() == ["8080", "9876"]


def test_build_context_carries_the_package_sources() -> None:
    # .dockerignore ignores everything, then re-includes what the wheel needs.
    patterns = [p.strip() for p in DOCKERIGNORE.splitlines() if p.strip() and not p.startswith("#")]
    assert patterns[0] == "*"

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pat) or path.startswith(pat + "/"):
                keep = negate
        return keep

    for path in (
        "pyproject.toml",
        "README.md",
        "nsfleet/__init__.py",
        "nsfleet/cli.py",
        "lua/route.lua",
    ):
        assert included(path), path
    for path in (
        "tests/helm/test_render.py",
        "helm/nsfleet/values.yaml",
        ".venv/bin/python",
        ".git/config",
        "nsfleet/__pycache__/cli.cpython-311.pyc",
    ):
        assert not included(path), path


def test_chart_default_image_is_this_image() -> None:
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert values["image"]["repository"] == "ghcr.io/nsfleet/nsfleet"
    assert values["image"]["tag"] == ""  # = appVersion
    pyproject = (REPO / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert version is not None
    assert chart["appVersion"] == version.group(1)
    assert f"ARG VERSION={chart['appVersion']}" in DOCKERFILE
