"""Connecting to Redis from a URL, and refusing a Redis that could lose route data."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel

MIN_VERSION = (6, 2)
POOL_SIZE = 64  # Redis connections per worker; more rarely helps (the Python client
POOL_WAIT = 10.0  # is the bottleneck), and a burst beyond it waits up to POOL_WAIT seconds


class UnsuitableRedis(RuntimeError):
    """The Redis server is too old, or configured to evict keys."""


def connect(url: str, username: str = "", password: str = "") -> aioredis.Redis:
    """A client for redis://, rediss://, unix:// or redis+sentinel://[user:pw@]h:p[,h:p]/service[/db].

    ``username``/``password`` apply when the URL carries none (e.g. a password from a Secret).
    """
    if url.startswith(("redis+sentinel://", "rediss+sentinel://")):
        return _sentinel_master(url, username, password)
    kwargs: dict[str, object] = {"decode_responses": True, "health_check_interval": 30,
                                 "max_connections": POOL_SIZE, "timeout": POOL_WAIT}
    parts = urlsplit(url)
    if password and not parts.password:
        kwargs["password"] = password
    if username and not parts.username:
        kwargs["username"] = username
    # A blocking pool: a burst of requests waits for a connection instead of failing with
    # "Too many connections" (redis-py's default pool raises past 100).
    pool = aioredis.BlockingConnectionPool.from_url(url, **kwargs)  # type: ignore[arg-type]
    return aioredis.Redis(connection_pool=pool)


def _sentinel_master(url: str, username: str, password: str) -> aioredis.Redis:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    hosts = []
    for hp in netloc.split(","):
        host, _, port = hp.rpartition(":")
        hosts.append((host or hp, int(port) if host else 26379))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a redis+sentinel:// URL needs the service name: .../<service>[/<db>]")
    service, db = path[0], int(path[1]) if len(path) > 1 else 0
    user = unquote(parts.username) if parts.username else username or None
    pw = unquote(parts.password) if parts.password else password or None
    query = parse_qs(parts.query)
    ssl = url.startswith("rediss+")
    sentinel_pw = query.get("sentinel_password", [None])[0]
    sentinel = Sentinel(hosts, sentinel_kwargs={"password": sentinel_pw, "ssl": ssl},
                        decode_responses=True, username=user, password=pw, db=db, ssl=ssl)
    return sentinel.master_for(service, max_connections=1000)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


async def check_server(client: aioredis.Redis) -> dict[str, str]:
    """Refuse Redis older than 6.2, or with a maxmemory-policy that may evict our keys."""
    info = await client.info()
    version = str(info.get("redis_version", "0"))
    if _version(version) < MIN_VERSION:
        raise UnsuitableRedis(f"Redis {version} is too old: nsfleet needs Redis >= 6.2")
    policy = str(info.get("maxmemory_policy", "noeviction"))
    if policy != "noeviction":
        raise UnsuitableRedis(
            f"Redis maxmemory-policy is {policy!r}: nsfleet's route tables must never be evicted "
            "(a broker or topic would silently vanish). Set maxmemory-policy noeviction.")
    return {"redis_version": version, "maxmemory_policy": policy}
