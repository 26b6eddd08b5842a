"""The change feed on ``P:changes``: its one message format, and the subscription to it.

The Lua scripts publish through ``lua/includes/changes.lua`` (``publish_changes``), which writes
the first three forms; workers publish the last two. Every message is ``"<rev> <what>"``:

  ``"<rev> <topic>,<topic>"``  these topics' routes changed; ``rev`` is the new ``P:rev``
                               (a topic may be named twice)
  ``"<rev> *"``                any route may have changed (a group removed, filter servers)
  ``"<rev> "``                 the cluster tables changed and no route did
  ``"0 @config"``              the fleet-wide NamesrvConfig (``P:config``) changed
  ``"0 @expired:<c>\t<a>\n…"``  the sweep expired these brokers (cluster, address): every
                               worker closes their connections (``lua/sweep.lua`` writes it)
  ``"0 @sync:<token>"``        one worker's read-your-writes marker (see RouteCache.sync)

A topic name never starts with ``@`` or contains ``,`` or ``*`` (TopicValidator), so the forms
cannot be confused.

A subscription ends (raises) whenever messages may have been missed, so a cache built on it can
never stay stale: when its connection breaks, when redis-py reconnects it silently (it does so
for a pub/sub connection it finds disconnected, re-subscribing after the gap), and, on a Redis
Cluster, when the namespace's slot is no longer served by the master it listens on. On a cluster
it listens on that master, the node whose scripts publish the changes: a message is then either
delivered or its connection breaks, whereas another node gets it over the cluster bus, which a
dying master may never flush. Classic PUBLISH (not sharded SPUBLISH, Redis 7+) keeps Redis 6.2
supported; a cluster broadcasts it to every node (docs/config.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError

from nsfleet.store.redis_errors import translating_redis_errors

CONFIG = "@config"
SYNC = "@sync:"
EXPIRED = "@expired:"
ALL = "*"


@dataclass(frozen=True, slots=True)
class Change:
    """One parsed feed message."""

    rev: int
    topics: tuple[str, ...] = ()
    all_routes: bool = False
    config: bool = False
    sync_token: str | None = None
    expired: tuple[tuple[str, str], ...] = ()


def parse(message: str) -> Change:
    rev, _, what = message.partition(" ")
    number = int(rev) if rev.isdigit() else 0
    if what.startswith(SYNC):
        return Change(number, sync_token=what[len(SYNC):])
    if what == CONFIG:
        return Change(number, config=True)
    if what.startswith(EXPIRED):
        brokers = (entry.partition("\t") for entry in what[len(EXPIRED):].split("\n"))
        return Change(number, expired=tuple((c, a) for c, _, a in brokers if a))
    if what == ALL:
        return Change(number, all_routes=True)
    return Change(number, topics=tuple(filter(None, what.split(","))))


def config_message() -> str:
    return f"0 {CONFIG}"


def sync_message(token: str) -> str:
    return f"0 {SYNC}{token}"


@translating_redis_errors
class ChangeFeed:
    """Publishing to and subscribing to one namespace's change channel."""

    def __init__(self, redis: Redis | RedisCluster, channel: str) -> None:
        self._redis = redis
        self.channel = channel

    async def publish_sync(self, token: str) -> None:
        await self._publish(sync_message(token))

    async def publish_config_changed(self) -> None:
        await self._publish(config_message())

    async def _publish(self, message: str) -> None:
        if isinstance(self._redis, RedisCluster):
            # On the master whose scripts publish the changes and where the subscribers listen,
            # so a sync marker follows every change this worker made before it.
            await self._redis.publish(self.channel, message, target_nodes=self._master())
        else:
            await self._redis.publish(self.channel, message)

    def _master(self) -> ClusterNode:
        assert isinstance(self._redis, RedisCluster)
        return self._redis.get_node_from_key(self.channel)

    def _master_name(self) -> str:
        return str(self._master().name)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """A live subscription; the feed may have gaps before it is entered and after it
        breaks, which callers must treat as "anything may have changed"."""
        if isinstance(self._redis, RedisCluster):
            # The layout as the cluster tells it now: a (re)subscription often follows a
            # failover that no command of this worker has noticed yet.
            await self._redis.nodes_manager.initialize()
            pubsub: PubSub = self._redis.pubsub(node=self._master(),
                                                ignore_subscribe_messages=True)
            subscription = Subscription(pubsub, self._master_name)
        else:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            subscription = Subscription(pubsub)
        try:
            await pubsub.subscribe(self.channel)
            subscription.live = True
            yield subscription
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()


@translating_redis_errors
class Subscription:
    """One subscription; ``next`` raises once messages may have been missed."""

    def __init__(self, pubsub: PubSub,
                 current_master: Callable[[], str] | None = None) -> None:
        self._pubsub = pubsub
        self.live = False  # subscribed; a (re)connection from now on means a gap
        self._gap = False
        self._current_master = current_master  # on a cluster: who serves the slot now
        self._master = current_master() if current_master is not None else None
        # redis-py re-subscribes on its own after a reconnection; hear of it (a gap).
        self._resubscribe = pubsub.on_connect
        pubsub.on_connect = self._on_connect  # type: ignore[method-assign]

    async def _on_connect(self, connection: Any) -> None:
        if self.live:
            self._gap = True
        await self._resubscribe(connection)

    async def next(self, wait: float) -> Change | None:
        """The next change, or None when none came within ``wait`` seconds. Raises when
        messages may have been missed (see the module docstring)."""
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
        if self._gap:
            raise RedisConnectionError("the change feed reconnected: messages may be missing")
        if self._current_master is not None and self._current_master() != self._master:
            raise RedisConnectionError("the namespace's slot moved to another Redis Cluster "
                                       "master: resubscribing there")
        if message is None or message["type"] != "message":
            return None
        return parse(message["data"])
