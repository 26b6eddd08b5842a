"""The Redis suitability check and URL handling."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from nsfleet.redis_conn import (
    CONNECT_TIMEOUT,
    POOL_SIZE,
    WARM_CONNECTIONS,
    BoundedRedisCluster,
    UnsuitableRedis,
    check_server,
    connect,
    open_connections,
)
from nsfleet.redis_server import RedisServer


class _Info:
    def __init__(self, **info: Any) -> None:
        self._info = info

    async def info(self) -> dict[str, Any]:
        return self._info


@pytest.mark.parametrize(("info", "message"), [
    ({"redis_version": "6.0.9", "maxmemory_policy": "noeviction"}, "too old"),
    ({"redis_version": "5.0.14"}, "too old"),
    ({"redis_version": "7.2.4", "maxmemory_policy": "allkeys-lru"}, "maxmemory-policy"),
    ({"redis_version": "7.2.4", "maxmemory_policy": "volatile-ttl"}, "maxmemory-policy"),
])
async def test_unsuitable_redis_is_refused(info: dict[str, str], message: str) -> None:
    with pytest.raises(UnsuitableRedis, match=message):
        await check_server(_Info(**info))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["6.2.0", "6.2.5", "7.0.15", "7.4.1", "8.0.0"])
async def test_suitable_redis_passes(version: str) -> None:
    info = await check_server(_Info(redis_version=version,
                                    maxmemory_policy="noeviction"))  # type: ignore[arg-type]
    assert info["redis_version"] == version


async def test_password_from_settings_only_when_the_url_has_none() -> None:
    client = connect("redis://127.0.0.1:6379/2", "user", "secret")
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("user", "secret", 2)
    assert isinstance(client.connection_pool, aioredis.BlockingConnectionPool)
    await client.aclose()
    client = connect("redis://u:inurl@127.0.0.1:6379/0", "user", "secret")
    assert client.connection_pool.connection_kwargs["password"] == "inurl"
    await client.aclose()


def test_sentinel_url_needs_a_service() -> None:
    with pytest.raises(ValueError, match="service name"):
        connect("redis+sentinel://127.0.0.1:26379")


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server (the session one must not be restarted under other tests)."""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    yield server
    server.stop()


async def _restart(server: RedisServer) -> None:
    server.stop()
    await asyncio.sleep(0.2)
    server.start()


async def test_idle_pooled_connections_survive_a_restart(restartable_redis: RedisServer) -> None:
    """Each connection that sat idle through a restart fails once; the retry hides it."""
    client = connect(restartable_redis.url)
    try:
        script = "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])"
        burst = [client.eval(script, 1, f"k{i}", str(i)) for i in range(30)]
        assert await asyncio.gather(*burst) == [str(i) for i in range(30)]
        await _restart(restartable_redis)
        burst = [client.eval(script, 1, f"k{i}", str(i)) for i in range(30)]
        assert await asyncio.gather(*burst) == [str(i) for i in range(30)]
    finally:
        await client.aclose()


async def test_a_worker_opens_its_connections_before_it_serves(
        restartable_redis: RedisServer) -> None:
    """They wait idle in the pool: the first burst finds them open. Best effort: those Redis
    refuses (maxclients reached) are opened on demand later."""
    client = connect(restartable_redis.url)
    assert isinstance(client, aioredis.Redis)
    try:
        assert await open_connections(client) == WARM_CONNECTIONS <= POOL_SIZE
        assert len(client.connection_pool._available_connections) == WARM_CONNECTIONS
        assert len(await client.client_list()) == WARM_CONNECTIONS  # the one asking is one
        await client.config_set("maxclients", WARM_CONNECTIONS + 2)
        other = connect(restartable_redis.url)
        assert isinstance(other, aioredis.Redis)
        assert await open_connections(other) == 2
        assert await other.ping()
        await other.aclose()
        # Closing a client closes its pool's connections (a stopped worker leaves none open).
        await client.aclose()
        probe = aioredis.Redis(host=restartable_redis.host, port=restartable_redis.port)
        assert len(await probe.client_list()) == 1
        await probe.aclose()
    finally:
        await client.aclose()


async def test_without_the_retry_the_same_restart_fails(restartable_redis: RedisServer) -> None:
    """The test above would fail without retry_once (it is what makes it pass)."""
    client = connect(restartable_redis.url)
    client.connection_pool.connection_kwargs["retry"] = Retry(NoBackoff(), 0)
    try:
        await asyncio.gather(*(client.set(f"k{i}", i) for i in range(10)))
        await _restart(restartable_redis)
        results = await asyncio.gather(*(client.get(f"k{i}") for i in range(10)),
                                       return_exceptions=True)
        assert any(isinstance(r, RedisConnectionError) for r in results)
    finally:
        await client.aclose()


async def test_a_subscription_breaks_instead_of_reconnecting(
        restartable_redis: RedisServer) -> None:
    """Messages published while a subscription is down are lost: it must raise (the route
    cache then drops everything), not resubscribe silently as a retrying connection would."""
    client = connect(restartable_redis.url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe("ch")
        assert pubsub.connection is not None
        assert pubsub.connection.retry.get_retries() == 0
        await _restart(restartable_redis)
        with pytest.raises(RedisConnectionError):  # redis-py notices on the 1st or 2nd read
            for _ in range(3):
                await pubsub.get_message(timeout=0.5)
        connection = pubsub.connection
        await pubsub.aclose()
        assert connection.retry.get_retries() == 1  # back in the pool, with the pool's retry
        assert await client.publish("ch", "x") == 0
    finally:
        await client.aclose()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "unix:///tmp/nsfleet-none.sock",
                                 "rediss://127.0.0.1:1/0"])
async def test_every_url_kind_retries_once_and_bounds_connects(url: str) -> None:
    client = connect(url)
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["retry"].get_retries() == 1
    assert kwargs["socket_connect_timeout"] == CONNECT_TIMEOUT
    await client.aclose()


def test_sentinel_connections_retry_once() -> None:
    client = connect("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster")
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["retry"].get_retries() == 1
    assert kwargs["socket_connect_timeout"] == CONNECT_TIMEOUT
    assert isinstance(client.pubsub(), type(connect("redis://127.0.0.1:1").pubsub()))
    sentinel_kwargs = client.connection_pool.sentinel_manager.sentinel_kwargs
    assert sentinel_kwargs["retry"].get_retries() == 1
    assert sentinel_kwargs["socket_connect_timeout"] == CONNECT_TIMEOUT


async def test_cluster_url_names_startup_nodes_credentials_and_tls() -> None:
    client = connect("rediss+cluster://u:p%40w@h1:7000,[::1]:7001,h3,[fd00::2]"
                     "?ssl_cert_reqs=none", "user", "secret")
    assert isinstance(client, BoundedRedisCluster)
    nodes = client.nodes_manager.startup_nodes.values()
    assert sorted((n.host, n.port) for n in nodes) == [("::1", 7001), ("fd00::2", 6379),
                                                       ("h1", 7000), ("h3", 6379)]
    kwargs = client.connection_kwargs
    assert (kwargs["username"], kwargs["password"]) == ("u", "p@w")  # the URL's, decoded
    assert kwargs["ssl_cert_reqs"] == "none"
    assert kwargs["connection_class"] is SSLConnection
    assert kwargs["max_connections"] == 2 * POOL_SIZE
    await client.aclose()
    client = connect("redis+cluster://h1:7000/0", "user", "secret")
    kwargs = client.connection_kwargs
    assert (kwargs["username"], kwargs["password"]) == ("user", "secret")
    assert kwargs["connection_class"] is not SSLConnection
    await client.aclose()


@pytest.mark.parametrize(("url", "message"), [
    ("redis+cluster://", "at least one host"),
    ("redis+cluster://h1:7000/2", "database 0 only"),
    ("redis+cluster://h1:70x0", "bad port"),
    ("redis+cluster://h1:7000?read_from_replicas=true", "replicas"),
    ("redis+cluster://h1:7000?no_such_option=1", "unsupported"),
])
def test_bad_cluster_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        connect(url)


def test_a_pooled_connection_the_peer_reset_is_retried_under_uvloop(tmp_path: Path) -> None:
    """uvloop raises RuntimeError (not OSError) when a command is written to a transport the peer
    has reset; the worker runs on uvloop, so such a connection must count as lost and the
    command be retried on a new one, not fail with a RuntimeError (seen as a 500 from /readyz
    after a network partition)."""
    uvloop = pytest.importorskip("uvloop")
    from tests.support.tcp_proxy import TcpProxy

    with RedisServer(tmp_path / "r", appendonly=False) as server:
        proxy = TcpProxy(server.port).start()

        async def scenario() -> None:
            client = connect(proxy.url)
            try:
                await client.set("k", "1")
                proxy.cut()  # RST on the pooled connection
                proxy.restore()
                await asyncio.sleep(0.1)  # uvloop has closed the transport by now
                assert await client.get("k") == "1"
            finally:
                await client.aclose()

        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(scenario())
        finally:
            proxy.stop()
