"""The Redis suitability check and URL handling."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection

from nsfleet.redis_conn import (
    POOL_SIZE,
    BoundedRedisCluster,
    UnsuitableRedis,
    check_server,
    connect,
)


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
