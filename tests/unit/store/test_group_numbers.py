"""Layout 1 (docs/queue-data-layouts.md, what stores written before layout 2 hold until they
move): the route index names groups by number (lua/includes/rows/group_ids.lua): P:idx:topic:<t>
is an intset on a real Redis, a group keeps its number for good, and a set written by a build
before group numbers (brokerNames as members) is still read, removed from and deleted from."""

from __future__ import annotations

import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, QueueData, TopicConfig
from nsfleet.store import RouteStore
from tests.support.invariants import orphans


def reg(name: str, addr: str, topics: list[str], cluster: str = "c1") -> BrokerRegistration:
    return BrokerRegistration(cluster, addr, name, 0,
                              topic_configs=[TopicConfig(t, 4, 4, 6) for t in topics])


async def test_topic_sets_hold_group_numbers_kept_for_good(real_redis: aioredis.Redis) -> None:
    store = RouteStore(real_redis, "numbers")
    await real_redis.set(store.keys.layout, "1")
    await store.load_scripts()
    k = store.keys
    await store.register_broker(reg("a", "10.0.0.1:1", ["T", "U"]))
    # (One topic from an unknown broker is refused, as in Java: two each.)
    await store.register_broker(reg("b", "10.0.0.2:1", ["T", "W"]))
    assert await real_redis.hgetall(k.group_ids) == {"a": "-1", "b": "-2"}
    assert await real_redis.hgetall(k.group_names) == {"-1": "a", "-2": "b"}
    assert await real_redis.smembers(k.topic("T")) == {"-1", "-2"}
    assert await real_redis.object("encoding", k.topic("T")) == "intset"
    route = (await store.pickup_route("T")).route  # type: ignore[union-attr]
    assert [q.broker_name for q in route.queue_datas] == ["a", "b"]
    # A removed group that comes back gets its number back; a new one the next number.
    assert await store.unregister_broker("c1", "10.0.0.1:1", "a") == 1
    assert await real_redis.smembers(k.topic("T")) == {"-2"}
    await store.register_broker(reg("c", "10.0.0.3:1", ["T", "W"]))
    await store.register_broker(reg("a", "10.0.0.1:1", ["T", "W"]))
    assert await real_redis.smembers(k.topic("T")) == {"-1", "-2", "-3"}
    await store.register_topic("V", [QueueData("c", 4, 4, 6, 0)])
    assert await real_redis.smembers(k.topic("V")) == {"-3"}
    assert await orphans(real_redis, k) == []


async def test_sets_written_before_group_numbers_are_still_read(real_redis: aioredis.Redis
                                                                ) -> None:
    """A rolling upgrade: brokerNames an older build wrote into a topic's set, beside numbers."""
    store = RouteStore(real_redis, "legacy")
    await real_redis.set(store.keys.layout, "1")
    await store.load_scripts()
    k = store.keys
    await store.register_broker(reg("a", "10.0.0.1:1", ["T", "U"]))
    await store.register_broker(reg("b", "10.0.0.2:1", ["T", "U"], cluster="c2"))
    await store.register_broker(reg("old", "10.0.0.3:1", ["T", "U"]))
    for topic in ("T", "U"):  # as the older build wrote them
        await real_redis.srem(k.topic(topic), "-1", "-3")
        await real_redis.sadd(k.topic(topic), "a", "old")
    route = (await store.pickup_route("T")).route  # type: ignore[union-attr]
    assert [q.broker_name for q in route.queue_datas] == ["a", "b", "old"]
    assert await store.topic_list("unit") == []
    overview = await store.topic_summary_rows.rows(["T"])
    assert [q[0] for q in overview[0].queues] == ["a", "b", "old"]
    assert await orphans(real_redis, k) == []
    # Removing a group removes its name as well as its number.
    assert await store.unregister_broker("c1", "10.0.0.3:1", "old") == 1
    assert await real_redis.smembers(k.topic("T")) == {"a", "-2"}
    # Deleting a topic's queue data of one cluster finds the groups written by name too.
    assert await store.delete_topic("T", "c1") == 1
    assert await real_redis.smembers(k.topic("T")) == {"-2"}
    assert await store.delete_topic("U") == 2
    assert await real_redis.exists(k.topic("U")) == 0
    assert await store.all_topics() == ["T"]
    assert await orphans(real_redis, k) == []
