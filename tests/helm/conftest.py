"""Fixtures rendering helm/nsfleet offline (see chartlib.py for how)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chartlib import CHART_DIR, NAMESPACE, RELEASE, Rendered, validate_manifest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is needed to render the chart")


@pytest.fixture(scope="session")
def chart() -> Iterator[Any]:
    with helm.Chart.load(CHART_DIR) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def render(chart: Any):
    """render(values) -> Rendered; raises helm_python.HelmError on failure.

    Every successful render is also validated, manifest by manifest, against the
    Kubernetes schemas (strict), so no test can pass on an invalid object.
    """
    cache: dict[str, Rendered] = {}

    def _render(values: dict[str, Any] | None = None, **opts: Any) -> Rendered:
        key = json.dumps([values, opts], sort_keys=True)
        if key not in cache:
            files = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, **opts)
            rendered = Rendered(files)
            for doc in rendered.docs:
                validate_manifest(doc)
            cache[key] = rendered
        return copy.deepcopy(cache[key])

    return _render
