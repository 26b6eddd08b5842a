"""Change announcements (lua/includes/changes.lua): P:rev bumps on every change of the route or
cluster tables and "<rev> <topics|*>" is published on P:changes; nothing is written per topic.
Operations that change nothing a reader sees (heartbeats, reads, a re-registration with the same
data, an idempotent KV put) do not bump anything."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio.client import PubSub

from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.store import RouteStore, scripts
from nsfleet.store.keys import ORDER_TOPIC_CONFIG

MASTER = BrokerRegistration("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                            enable_acting_master=True, data_version=DataVersion(1, 100),
                            topic_configs=[TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)])
SLAVE = BrokerRegistration("c1", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912",
                           enable_acting_master=True, data_version=DataVersion(1, 100),
                           topic_configs=MASTER.topic_configs)
EMPTY_GROUP = BrokerRegistration("c2", "10.0.1.1:10911", "broker-b", 0, enable_acting_master=False)


@pytest.fixture
async def changes(store: RouteStore) -> AsyncIterator[PubSub]:
    pubsub = store.redis.pubsub()
    await pubsub.subscribe(store.keys.changes)
    msg = await pubsub.get_message(timeout=1.0)
    assert msg is not None and msg["type"] == "subscribe"
    yield pubsub
    await pubsub.aclose()


async def next_change(pubsub: PubSub) -> str | None:
    for _ in range(20):
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if msg is not None:
            return str(msg["data"])
    return None


async def no_counter_per_topic(store: RouteStore) -> bool:
    """No key under P:rev but P:rev itself: a change writes nothing per topic."""
    return [k async for k in store.redis.scan_iter(f"{store.keys.rev}*")] in ([], [store.keys.rev])


async def expect_change(store: RouteStore, pubsub: PubSub, call: Callable[[], Awaitable[Any]],
                        topics: str) -> int:
    """Run ``call``; P:rev must go up by one, and the message must name ``topics``."""
    before = await store.rev()
    await call()
    rev = await store.rev()
    assert rev == before + 1
    msg = await next_change(pubsub)
    assert msg is not None
    number, _, what = msg.partition(" ")
    assert int(number) == rev
    assert sorted(filter(None, what.split(","))) == sorted(filter(None, topics.split(",")))
    return rev


async def expect_no_change(store: RouteStore, pubsub: PubSub,
                           call: Callable[[], Awaitable[Any]]) -> None:
    before = await store.rev()
    await call()
    assert await store.rev() == before
    assert await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05) is None


async def test_every_table_change_bumps_and_publishes(store: RouteStore, changes: PubSub) -> None:
    s = store
    await expect_change(s, changes, lambda: s.register_broker(MASTER), "*")
    await expect_change(s, changes, lambda: s.register_broker(SLAVE), "T1,T2")

    await expect_change(s, changes, lambda: s.wipe_write_perm("broker-a"), "T1,T2")
    await expect_change(s, changes, lambda: s.add_write_perm("broker-a"), "T1,T2")
    await expect_change(s, changes, lambda: s.register_topic(
        "T3", [QueueData("broker-a", 4, 4, 6)]), "T3")
    await expect_change(s, changes, lambda: s.delete_topic("T3"), "T3")
    await expect_change(s, changes, lambda: s.kv_put(ORDER_TOPIC_CONFIG, "T1", "broker-a:8"), "T1")
    await expect_change(s, changes, lambda: s.kv_put("other", "k", "v"), "")
    await expect_change(s, changes, lambda: s.kv_delete("other", "k"), "")
    await expect_change(s, changes, lambda: s.kv_delete(ORDER_TOPIC_CONFIG, "T1"), "T1")

    # A new DataVersion with a changed topic rewrites that topic only.
    changed = replace(MASTER, data_version=DataVersion(2, 200),
                      topic_configs=[TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 16, 16, 6)])
    await expect_change(s, changes, lambda: s.register_broker(changed), "T2")

    # Layout 2 lists a group's topics as a superset of its rows: T3, deleted by DELETE_TOPIC,
    # stays listed until the group's next registration settles its lists, and is named too.
    listed = "T1,T2,T3" if s.calls.layout == scripts.LAYOUT_TOPICS else "T1,T2"
    await expect_change(s, changes, lambda: s.unregister_broker("c1", SLAVE.addr, "broker-a"),
                        listed)
    await expect_change(s, changes, lambda: s.unregister_broker("c1", MASTER.addr, "broker-a"), "*")
    assert await no_counter_per_topic(s)


async def test_cluster_table_changes_bump_even_without_topics(store: RouteStore,
                                                              changes: PubSub) -> None:
    # A group without topics shows only in GET_BROKER_CLUSTER_INFO; its changes still count.
    s = store
    await expect_change(s, changes, lambda: s.register_broker(EMPTY_GROUP), "*")
    zoned = BrokerRegistration("c2", EMPTY_GROUP.addr, "broker-b", 0, zone_name="z1",
                               enable_acting_master=False)
    await expect_change(s, changes, lambda: s.register_broker(zoned), "")
    slave = BrokerRegistration("c2", "10.0.1.2:10911", "broker-b", 1, zone_name="z1",
                               enable_acting_master=False)
    await expect_change(s, changes, lambda: s.register_broker(slave), "")
    await expect_change(s, changes, lambda: s.unregister_broker("c2", slave.addr, "broker-b"), "")


async def test_what_changes_nothing_bumps_nothing(store: RouteStore, changes: PubSub) -> None:
    s = store
    await s.register_broker(MASTER)
    await s.kv_put("ns", "k", "v")
    await next_change(changes)
    await next_change(changes)
    await expect_no_change(s, changes, lambda: s.register_broker(MASTER))  # the 30 s re-register
    await expect_no_change(s, changes, lambda: s.heartbeat("c1", MASTER.addr))
    await expect_no_change(s, changes, lambda: s.query_data_version("c1", MASTER.addr,
                                                                    DataVersion(9, 9)))
    await expect_no_change(s, changes, lambda: s.pickup_route("T1"))
    await expect_no_change(s, changes, lambda: s.cluster_info())
    await expect_no_change(s, changes, lambda: s.sweep())
    await expect_no_change(s, changes, lambda: s.kv_put("ns", "k", "v"))
    await expect_no_change(s, changes, lambda: s.kv_delete("ns", "missing"))
    await expect_no_change(s, changes, lambda: s.delete_topic("nope"))
    await expect_no_change(s, changes, lambda: s.unregister_broker(
        "c1", MASTER.addr, "broker-a", closed_connection="other-worker:1"))


async def test_many_subscribers_see_the_same_sequence(store: RouteStore) -> None:
    subs = []
    for _ in range(3):
        p = store.redis.pubsub()
        await p.subscribe(store.keys.changes)
        await p.get_message(timeout=1.0)
        subs.append(p)
    await store.register_broker(MASTER)
    await store.wipe_write_perm("broker-a")
    seen = await asyncio.gather(*[asyncio.gather(next_change(p), next_change(p)) for p in subs])
    assert all(s == seen[0] for s in seen) and None not in seen[0]
    for p in subs:
        await p.aclose()


async def test_kv_put_of_the_same_value_changes_nothing(store: RouteStore) -> None:
    assert await store.kv_put("ns", "k", "v")
    assert not await store.kv_put("ns", "k", "v")
    assert await store.kv_put("ns", "k", "")  # an empty value is a value
    assert await store.kv_list("ns") == {"k": ""}
