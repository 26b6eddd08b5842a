"""Connecting to Redis from a URL, and refusing a Redis that could lose route data."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

MIN_VERSION = (6, 2)
POOL_SIZE = 64  # Redis connections per worker; more rarely helps (the Python client
POOL_WAIT = 10.0  # is the bottleneck), and a burst beyond it waits up to POOL_WAIT seconds
# Redis is on the LAN: a connect slower than this (one lost SYN is retransmitted after 1 s) is a
# dead or unreachable host. Without it a connect waits for the OS (~2 min), and the retry makes
# up to 4 connect attempts per command.
CONNECT_TIMEOUT = 2.0


class UnsuitableRedis(RuntimeError):
    """The Redis server is too old, or configured to evict keys."""


def retry_once() -> Retry:
    """Run a command again, at once, on a fresh socket of the same pooled connection, when it
    failed with ConnectionError (also LOADING, and READONLY from a demoted Sentinel master) or
    TimeoutError. A pooled connection that sat idle through a Redis restart fails once on first
    use; the retry hides that. Safe because every nsfleet write is one idempotent Lua script
    (docs/reliability.md), and no socket_timeout is set, so a TimeoutError only comes from
    connecting: a slow command is never sent twice. Once, with no backoff: a Redis still down
    fails the request at once (503) rather than holding it."""
    return Retry(NoBackoff(), 1)


class _Subscription(PubSub):
    """A subscription that does not retry: redis-py would reconnect and resubscribe inside
    get_message, hiding the messages published in the gap, and the route cache must learn of
    every gap (it drops everything then). Its connection gets the retry back when released."""

    _pooled_retry: Retry | None = None

    async def connect(self) -> None:
        await super().connect()
        if self._pooled_retry is None and self.connection is not None:
            self._pooled_retry = self.connection.retry
            self.connection.retry = Retry(NoBackoff(), 0)

    async def aclose(self) -> None:
        if self._pooled_retry is not None and getattr(self, "connection", None) is not None:
            self.connection.retry = self._pooled_retry  # type: ignore[union-attr]
        self._pooled_retry = None
        await super().aclose()


class _Redis(aioredis.Redis):
    def pubsub(self, **kwargs: Any) -> PubSub:
        return _Subscription(self.connection_pool, event_dispatcher=self._event_dispatcher,
                             **kwargs)


def connect(url: str, username: str = "", password: str = "") -> aioredis.Redis:
    """A client for redis://, rediss://, unix:// or redis+sentinel://[user:pw@]h:p[,h:p]/service[/db].

    ``username``/``password`` apply when the URL carries none (e.g. a password from a Secret).
    """
    if url.startswith(("redis+sentinel://", "rediss+sentinel://")):
        return _sentinel_master(url, username, password)
    kwargs: dict[str, object] = {"decode_responses": True, "health_check_interval": 30,
                                 "max_connections": POOL_SIZE, "timeout": POOL_WAIT,
                                 "retry": retry_once(),
                                 "socket_connect_timeout": CONNECT_TIMEOUT}
    parts = urlsplit(url)
    if password and not parts.password:
        kwargs["password"] = password
    if username and not parts.username:
        kwargs["username"] = username
    # A blocking pool: a burst of requests waits for a connection instead of failing with
    # "Too many connections" (redis-py's default pool raises past 100).
    pool = aioredis.BlockingConnectionPool.from_url(url, **kwargs)  # type: ignore[arg-type]
    return _Redis(connection_pool=pool)


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
    # Sentinels are asked once each, with one retry (redis-py's default of 10 with backoff
    # would hold master discovery for seconds on a dead sentinel before trying the next).
    sentinel = Sentinel(hosts, sentinel_kwargs={"password": sentinel_pw, "ssl": ssl,
                                                "retry": retry_once(),
                                                "socket_connect_timeout": CONNECT_TIMEOUT},
                        decode_responses=True, username=user, password=pw, db=db, ssl=ssl,
                        retry=retry_once(), socket_connect_timeout=CONNECT_TIMEOUT)
    return sentinel.master_for(service, redis_class=_Redis, max_connections=1000)


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
