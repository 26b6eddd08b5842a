"""The change feed's subscription on a real redis-server: it ends whenever messages may have been
missed, even when redis-py reconnects and re-subscribes without a word, as it does for a pub/sub
connection found disconnected (a Redis Cluster client disconnects every node's connections on
each layout refresh). A cache built on it would otherwise keep what changed in the gap."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.errors import StoreUnavailable
from nsfleet.redis_server import RedisServer
from nsfleet.store.change_feed import ChangeFeed, Subscription

pytestmark = pytest.mark.redis


async def _sync_token(subscription: Subscription) -> str | None:
    for _ in range(20):
        change = await subscription.next(0.1)
        if change is not None:
            return change.sync_token
    return None


async def test_a_silent_reconnection_ends_the_subscription(redis_server: RedisServer) -> None:
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    feed = ChangeFeed(client, "test-gap:changes")
    try:
        async with feed.subscribe() as subscription:
            await feed.publish_sync("before")
            assert await _sync_token(subscription) == "before"
            await subscription._pubsub.connection.disconnect()  # type: ignore[union-attr]
            await feed.publish_sync("missed")
            with pytest.raises(StoreUnavailable, match="reconnected"):
                await _sync_token(subscription)
        async with feed.subscribe() as subscription:  # a new subscription is live again
            await feed.publish_sync("after")
            assert await _sync_token(subscription) == "after"
    finally:
        await client.aclose()
