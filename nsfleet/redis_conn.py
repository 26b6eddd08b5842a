"""Connecting to Redis from a URL, and refusing a Redis that could lose route data."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import (
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

MIN_VERSION = (6, 2)
POOL_SIZE = 64  # Redis connections per worker; more rarely helps (the Python client
POOL_WAIT = 10.0  # is the bottleneck), and a burst beyond it waits up to POOL_WAIT seconds
# Redis is on the LAN: a connect slower than this (one lost SYN is retransmitted after 1 s) is a
# dead or unreachable host. Without it a connect waits for the OS (~2 min), and the retry makes
# up to 4 connect attempts per command.
CONNECT_TIMEOUT = 2.0
# Connections a worker opens before it serves: opened on demand, at the first burst of a storm
# (a fleet restarting while its brokers register), each reply waited for a new connection, and
# route reads took 100-160 ms instead of a few (bench/scale.py, 60 x 10k). Enough for the
# registration calls and chunks a store keeps in Redis at once (store/script_calls.py) and reads.
WARM_CONNECTIONS = 16


class UnsuitableRedis(RuntimeError):
    """The Redis server is too old, or configured to evict keys."""


def redacted(url: str) -> str:
    """``url`` without its user and password, fit for a log line."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if sep and "@" in netloc:
        return f"{scheme}://***@{netloc.rsplit('@', 1)[1]}{slash}{path}"
    return url


def retry_once() -> Retry:
    """Run a command again, at once, on a fresh socket of the same pooled connection, when it
    failed with ConnectionError (also LOADING, and READONLY from a demoted Sentinel master) or
    TimeoutError. A pooled connection that sat idle through a Redis restart fails once on first
    use; the retry hides that. Safe because every nsfleet write is one idempotent Lua script
    (docs/reliability.md), and no socket_timeout is set, so a TimeoutError only comes from
    connecting: a slow command is never sent twice. Once, with no backoff: a Redis still down
    fails the request at once (503) rather than holding it."""
    return Retry(NoBackoff(), 1)


class _ResetAware:
    """uvloop (which the worker runs on) raises RuntimeError, not OSError, when a command is
    written to a transport the peer has reset (a network partition, a proxy or load balancer
    dropping the connection): redis-py would pass it up as it is instead of treating the
    connection as lost and retrying the command on a new one."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except RuntimeError as exc:  # redis-py has disconnected the connection already
            raise RedisConnectionError(f"Error writing to a closed connection: {exc}") from exc


class _Connection(_ResetAware, Connection):
    pass


class _SSLConnection(_ResetAware, SSLConnection):
    pass


class _UnixConnection(_ResetAware, UnixDomainSocketConnection):
    pass


class _SentinelConnection(_ResetAware, SentinelManagedConnection):
    pass


class _SentinelSSLConnection(_ResetAware, SentinelManagedSSLConnection):
    pass


_CONNECTIONS = {"redis": _Connection, "rediss": _SSLConnection, "unix": _UnixConnection}


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


def connect(url: str, username: str = "", password: str = "") -> aioredis.Redis | RedisCluster:
    """A client for redis://, rediss://, unix://, redis+sentinel://[user:pw@]h:p[,h:p]/service[/db]
    or redis+cluster://[user:pw@]h:p[,h:p][?options] (``rediss+`` for TLS).

    ``username``/``password`` apply when the URL carries none (e.g. a password from a Secret).
    """
    if url.startswith(("redis+sentinel://", "rediss+sentinel://")):
        return _sentinel_master(url, username, password)
    if url.startswith(("redis+cluster://", "rediss+cluster://")):
        return cluster_client(url, username, password)
    kwargs: dict[str, object] = {"decode_responses": True, "health_check_interval": 30,
                                 "max_connections": POOL_SIZE, "timeout": POOL_WAIT,
                                 "retry": retry_once(),
                                 "socket_connect_timeout": CONNECT_TIMEOUT}
    parts = urlsplit(url)
    if parts.scheme in _CONNECTIONS:
        kwargs["connection_class"] = _CONNECTIONS[parts.scheme]
    if password and not parts.password:
        kwargs["password"] = password
    if username and not parts.username:
        kwargs["username"] = username
    # A blocking pool: a burst of requests waits for a connection instead of failing with
    # "Too many connections" (redis-py's default pool raises past 100).
    pool = aioredis.BlockingConnectionPool.from_url(url, **kwargs)  # type: ignore[arg-type]
    # The client owns its pool: closing it closes every pooled connection (a worker opens 16
    # before it serves, and one stopped in a longer-lived process must not leave them open).
    return _Redis.from_pool(pool)


async def open_connections(client: aioredis.Redis | RedisCluster,
                           count: int = WARM_CONNECTIONS) -> int:
    """Opens up to ``count`` connections of a client's pool and leaves them idle in it; how many
    it opened. Best effort: one Redis refuses (its maxclients reached) is opened on demand
    later, as without this (a cluster client opens its nodes' on demand anyway)."""
    if isinstance(client, RedisCluster):
        return 0
    pool = client.connection_pool
    opened = await asyncio.gather(*(pool.get_connection() for _ in range(count)),
                                  return_exceptions=True)
    connections = [c for c in opened if not isinstance(c, BaseException)]
    for connection in connections:
        await pool.release(connection)
    return len(connections)


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
    return sentinel.master_for(service, redis_class=_Redis, max_connections=1000,
                               connection_class=(_SentinelSSLConnection if ssl
                                                 else _SentinelConnection))


class BoundedRedisCluster(RedisCluster):
    """A RedisCluster whose commands wait for one of ``POOL_SIZE`` slots, as the blocking pool
    of the other URL kinds does: redis-py's cluster nodes fail at once ("Too many connections")
    past their limit instead of waiting, so a burst of registrations would get errors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._command_slots = asyncio.Semaphore(POOL_SIZE)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(POOL_WAIT):
                await self._command_slots.acquire()
        except TimeoutError:
            raise RedisConnectionError(
                f"no free Redis Cluster connection within {POOL_WAIT:g} s") from None
        try:
            return await super().execute_command(*args, **kwargs)
        finally:
            self._command_slots.release()


def cluster_client(url: str, username: str = "", password: str = "") -> RedisCluster:
    """A client for redis+cluster://[user:pw@]h1:p1[,h2:p2...][/0][?options] (rediss+cluster://
    for TLS). The hosts are startup nodes: any reachable one yields the cluster's layout. Options
    are redis-py's URL query options (e.g. ``ssl_cert_reqs``, ``ssl_ca_certs``)."""
    if not hasattr(RedisCluster, "pubsub"):  # the change feed needs it
        raise ValueError("redis+cluster:// needs redis-py >= 8.0 (asyncio cluster pub/sub)")
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("a Redis Cluster has database 0 only: drop the /<db> of the URL")
    nodes = []
    for hp in filter(None, netloc.split(",")):
        if hp.startswith("["):  # [IPv6]:port
            host, _, port = hp[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = hp.partition(":")
        if not port.isdigit() and port:
            raise ValueError(f"bad port in redis+cluster:// URL: {hp!r}")
        nodes.append(ClusterNode(host, int(port or 6379)))
    if not nodes:
        raise ValueError("a redis+cluster:// URL needs at least one host:port")
    # redis-py's own URL reader for the credentials and options, on a one-host form of the URL.
    scheme = "rediss" if url.startswith("rediss+") else "redis"
    auth = parts.netloc.rpartition("@")[0]
    kwargs: dict[str, Any] = parse_url(
        f"{scheme}://{auth + '@' if auth else ''}{netloc.split(',')[0]}/?{parts.query}")
    for name in ("host", "port", "db"):
        kwargs.pop(name, None)
    if kwargs.pop("connection_class", None) is not None:
        kwargs["ssl"] = True
    if "password" not in kwargs and password:
        kwargs["password"] = password
    if "username" not in kwargs and username:
        kwargs["username"] = username
    if {"read_from_replicas", "load_balancing_strategy"} & kwargs.keys():
        # A replica lags its master: a worker would not read its own writes.
        raise ValueError("reading from replicas is not supported: nsfleet reads from masters")
    # Per node: POOL_SIZE commands (BoundedRedisCluster) plus room for the change-feed
    # subscription and the few pipelines (admin listings).
    kwargs.setdefault("max_connections", 2 * POOL_SIZE)
    # A namespace needs its own slot only: a layout with another shard's slots unserved
    # (cluster-require-full-coverage no) must not stop this worker.
    kwargs.setdefault("require_full_coverage", False)
    try:
        return BoundedRedisCluster(startup_nodes=nodes, decode_responses=True,
                                   health_check_interval=30, **kwargs)
    except TypeError as exc:  # an option RedisCluster does not take
        raise ValueError(f"unsupported redis+cluster:// URL option: {exc}") from None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


async def check_server(client: aioredis.Redis | RedisCluster) -> dict[str, str]:
    """Refuse Redis older than 6.2, or with a maxmemory-policy that may evict our keys; on a
    Redis Cluster, every master is checked (any of them may come to hold a namespace)."""
    if isinstance(client, RedisCluster):
        answer = await client.info(target_nodes=RedisCluster.PRIMARIES)
        # redis-py answers {node name: info} for several nodes, the info itself for one.
        per_node = {"": answer} if "redis_version" in answer else answer
        checked = [_check_one(info, f" (cluster node {name})" if name else "")
                   for name, info in sorted(per_node.items())]
        return {**checked[0], "cluster_masters": str(len(checked))}
    return _check_one(await client.info())


def _check_one(info: dict[str, Any], where: str = "") -> dict[str, str]:
    version = str(info.get("redis_version", "0"))
    if _version(version) < MIN_VERSION:
        raise UnsuitableRedis(f"Redis {version}{where} is too old: nsfleet needs Redis >= 6.2")
    policy = str(info.get("maxmemory_policy", "noeviction"))
    if policy != "noeviction":
        raise UnsuitableRedis(
            f"Redis maxmemory-policy is {policy!r}{where}: nsfleet's route tables must never be "
            "evicted (a broker or topic would silently vanish). Set maxmemory-policy noeviction.")
    return {"server": server_name(info), "redis_version": version, "maxmemory_policy": policy}


def server_name(info: dict[str, Any]) -> str:
    """``valkey 9.1.2`` or ``redis 7.2.4``: Valkey answers redis_version 7.2.4 (what it is
    compatible with) and names itself in server_name / valkey_version."""
    name = str(info.get("server_name") or "redis")
    version = info.get(f"{name}_version", info.get("redis_version", "?"))
    return f"{name} {version}"
