"""`GET /v1/routes/{topic}` answered straight from the route cache keeps every behaviour of the
full path: the same body and ETag, 304 for a current ETag, an immediate answer to a long-poll
whose ETag is stale, the long-poll itself for a current one, errors, and the metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient

from nsfleet.service.nameserver import NameServer
from tests.unit.http import test_api as api

# The HTTP API suite's fixtures: an app over a fakeredis store with the route cache on.
http_store, ns, client = api.http_store, api.ns, api.client
_register = api._register
ROUTE = "/v1/routes/T1"


def _sample(ns: NameServer, name: str, labels: dict[str, str]) -> float:
    return ns.metrics.registry.get_sample_value(name, labels) or 0.0


def _hits(ns: NameServer) -> float:
    return _sample(ns, "nsfleet_route_cache_total", {"result": "hit"})


async def test_a_cached_read_answers_what_the_filling_read_answered(
        client: TestClient, ns: NameServer) -> None:
    await _register(client)
    first = await client.get(ROUTE)  # a miss fills the cache
    hits = _hits(ns)
    second = await client.get(ROUTE)
    assert _hits(ns) == hits + 1
    assert second.status == first.status == 200
    assert await second.read() == await first.read()
    assert second.headers["ETag"] == first.headers["ETag"]
    assert second.headers["Content-Type"] == "application/json"
    served = _sample(ns, "nsfleet_http_requests_total",
                     {"route": "/v1/routes/{topic}", "method": "GET", "status": "200"})
    assert served == 2


async def test_a_current_etag_is_not_modified_at_once_without_wait(
        client: TestClient, ns: NameServer) -> None:
    await _register(client)
    etag = (await client.get(ROUTE)).headers["ETag"]
    resp = await client.get(ROUTE, headers={"If-None-Match": f"W/{etag}"})
    assert resp.status == 304 and resp.headers["ETag"] == etag


async def test_a_stale_etag_long_poll_answers_at_once_and_a_current_one_waits(
        client: TestClient, ns: NameServer) -> None:
    await _register(client)
    etag = (await client.get(ROUTE)).headers["ETag"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await client.get(f"{ROUTE}?wait=5", headers={"If-None-Match": '"1-stale"'})
    assert resp.status == 200 and resp.headers["ETag"] == etag
    assert loop.time() - started < 1.0
    started = loop.time()
    resp = await client.get(f"{ROUTE}?wait=0.3", headers={"If-None-Match": etag})
    assert resp.status == 304 and loop.time() - started >= 0.25


async def test_errors_are_those_of_the_full_path(client: TestClient, ns: NameServer) -> None:
    await _register(client)
    await client.get(ROUTE)
    missing: Any = await (await client.get("/v1/routes/Nowhere")).json()
    assert missing["code"] == 17
    bad = await client.get("/v1/routes/@bad")
    assert bad.status == 400
    assert (await client.get(f"{ROUTE}?wait=x")).status == 400
    assert (await client.get(f"{ROUTE}?wait=99")).status == 400
