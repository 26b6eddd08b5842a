"""The cached-route shortcut in front of the application (nsfleet/http/cached_routes.py): a hit
answers what the application answers, byte for byte, without the router and middlewares; every
other request (a miss, a query, If-None-Match, a bad name, another path) reaches the application
unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from nsfleet.http.app import create_app
from nsfleet.http.cached_routes import answer_cached_routes_first
from nsfleet.service.nameserver import NameServer
from tests.unit.http import test_api as api

http_store, ns = api.http_store, api.ns
_register = api._register


def _latency_count(ns: NameServer) -> float:
    """Requests that went through the application's middleware for the route path."""
    return ns.metrics.registry.get_sample_value(
        "nsfleet_http_request_seconds_count",
        {"route": "/v1/routes/{topic}", "method": "GET"}) or 0.0


def _served(ns: NameServer) -> float:
    return ns.metrics.registry.get_sample_value(
        "nsfleet_http_requests_total",
        {"route": "/v1/routes/{topic}", "method": "GET", "status": "200"}) or 0.0


@pytest.fixture
async def plain(ns: NameServer, aiohttp_client: Any) -> TestClient:
    """The application alone: the reference answers."""
    return await aiohttp_client(create_app(ns))


@pytest.fixture
async def fronted(ns: NameServer, aiohttp_client: Any) -> TestClient:
    """The same application behind the shortcut, installed before the first connection."""
    client = await aiohttp_client(create_app(ns))
    answer_cached_routes_first(client.server.runner.server, ns)
    return client


async def test_a_hit_answers_what_the_application_answers(
        fronted: TestClient, plain: TestClient, ns: NameServer) -> None:
    await _register(fronted)
    reference = await plain.get("/v1/routes/T1")  # a miss: fills the cache
    through = _latency_count(ns)
    hit = await fronted.get("/v1/routes/T1")
    assert _latency_count(ns) == through  # answered before the middleware
    assert hit.status == reference.status == 200
    assert await hit.read() == await reference.read()
    assert hit.headers["ETag"] == reference.headers["ETag"]
    assert hit.headers["Content-Type"] == reference.headers["Content-Type"]
    assert _served(ns) == 2  # counted under the route's name, as the middleware counts


async def test_a_change_is_seen_by_the_next_hit(fronted: TestClient, ns: NameServer) -> None:
    """The shortcut reads the coherent cache: after a write the next read has the new route."""
    await _register(fronted)
    before = await fronted.get("/v1/routes/T1")
    body = dict(api.MASTER, topicConfigTable={"T1": {"perm": 4}, "T2": {}},
                dataVersion={"counter": 2, "timestamp": 2})
    await _register(fronted, body)
    after = await fronted.get("/v1/routes/T1")
    assert after.headers["ETag"] != before.headers["ETag"]
    assert b'"perm":4' in await after.read()


@pytest.mark.parametrize("path,headers,status", [
    ("/v1/routes/T1?wait=0", {}, 200),
    ("/v1/routes/T1", {"If-None-Match": "*"}, 200),
    ("/v1/routes/Unknown", {}, 404),
    ("/v1/routes/bad%01name", {}, 400),
    ("/v1/routes/T1/extra", {}, 404),
])
async def test_everything_else_reaches_the_application(
        fronted: TestClient, ns: NameServer, path: str, headers: dict[str, str],
        status: int) -> None:
    await _register(fronted)
    await fronted.get("/v1/routes/T1")  # T1 is cached
    through = _latency_count(ns)
    resp = await fronted.get(path, headers=headers)
    assert resp.status == status, await resp.text()
    if path.startswith("/v1/routes/T1") and "extra" not in path:
        assert _latency_count(ns) == through + 1  # the application answered
    if status != 200:
        assert (await resp.json())["code"] in (17, 400, 404)
