"""The change feed on ``P:changes``: its one message format, and the subscription to it.

The Lua scripts publish through ``lua/includes/changes.lua`` (``publish_changes``), which writes
the first three forms; workers publish the last two. Every message is ``"<rev> <what>"``:

  ``"<rev> <topic>,<topic>"``  these topics' routes changed; ``rev`` is the new ``P:rev``
  ``"<rev> *"``                any route may have changed (a group removed, filter servers)
  ``"<rev> "``                 the cluster tables changed and no route did
  ``"0 @config"``              the fleet-wide NamesrvConfig (``P:config``) changed
  ``"0 @expired:<c>\t<a>\n…"``  the sweep expired these brokers (cluster, address): every
                               worker closes their connections (``lua/sweep.lua`` writes it)
  ``"0 @sync:<token>"``        one worker's read-your-writes marker (see RouteCache.sync)

A topic name never starts with ``@`` or contains ``,`` or ``*`` (TopicValidator), so the forms
cannot be confused.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

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
        await self._redis.publish(self.channel, sync_message(token))

    async def publish_config_changed(self) -> None:
        await self._redis.publish(self.channel, config_message())

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """A live subscription; the feed may have gaps before it is entered and after it
        breaks, which callers must treat as "anything may have changed"."""
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            yield Subscription(pubsub)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()


@translating_redis_errors
class Subscription:
    def __init__(self, pubsub: object) -> None:
        self._pubsub = pubsub

    async def next(self, wait: float) -> Change | None:
        """The next change, or None when none came within ``wait`` seconds. A broken
        connection raises."""
        message = await self._pubsub.get_message(  # type: ignore[attr-defined]
            ignore_subscribe_messages=True, timeout=wait)
        if message is None or message["type"] != "message":
            return None
        return parse(message["data"])
