"""The O(1) unchanged re-registration never hides a real change: whenever Java's registerBroker
would write queue data (a changed DataVersion, a topic missing after a delete on the name server,
a new topic in the table, a changed role or member), the full registration runs. Every case runs
with the digest probe (tables of PROBE tests are at the probe threshold)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.store import RouteStore
from tests.support.invariants import orphans

TOPICS = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(70)]
MASTER = BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, data_version=DataVersion(1, 100),
                            topic_configs=TOPICS)


@pytest.fixture
async def store(any_redis: aioredis.Redis) -> RouteStore:
    s = RouteStore(any_redis, "rereg")
    await s.load_scripts()
    await s.register_broker(MASTER)
    return s


async def calls(store: RouteStore) -> list[str]:
    """The script calls the next register_broker makes (probe, then full if needed)."""
    seen: list[str] = []
    original = store._call

    async def recording(name: str, args: object = (), keys: object = ()) -> object:
        seen.append(args[19] if name == "register_broker" else name)  # type: ignore[index]
        return await original(name, args, keys)  # type: ignore[arg-type]

    store._call = recording  # type: ignore[method-assign]
    return seen


async def test_unchanged_is_one_probe(store: RouteStore) -> None:
    seen = await calls(store)
    await store.register_broker(MASTER)
    assert seen == ["probe"]


async def test_a_topic_deleted_on_the_name_server_comes_back(store: RouteStore) -> None:
    """Java: the topic lacks this group's queue data, so it is written again."""
    assert await store.delete_topic("T5") == 1
    seen = await calls(store)
    await store.register_broker(MASTER)
    assert seen == ["probe", "full"]
    assert await store.pickup_route("T5") is not None
    assert await orphans(store.redis, store.keys) == []


async def test_a_changed_data_version_rewrites_the_queue_data(store: RouteStore) -> None:
    changed = replace(MASTER, data_version=DataVersion(2, 200),
                      topic_configs=[replace(t, read_queue_nums=4) for t in TOPICS])
    seen = await calls(store)
    await store.register_broker(changed)
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].read_queue_nums == 4


async def test_a_new_topic_with_the_same_data_version_is_created(store: RouteStore) -> None:
    seen = await calls(store)
    await store.register_broker(replace(MASTER, topic_configs=[*TOPICS, TopicConfig("New")]))
    assert seen == ["probe", "full"]
    assert await store.pickup_route("New") is not None


async def test_delete_absent_removes_a_topic_registered_on_the_name_server(
        store: RouteStore) -> None:
    """deleteTopicWithBrokerRegistration: a queue row added by REGISTER_TOPIC for the group is
    absent from its table, so the next registration removes it, unchanged DataVersion or not."""
    assert await store.register_topic("Extra", [QueueData("g", 2, 2, 6)]) == 1
    await store.register_broker(MASTER, delete_absent_topics=True)
    assert await store.pickup_route("Extra") is None
    assert await orphans(store.redis, store.keys) == []


async def test_a_wiped_write_perm_stays_wiped(store: RouteStore) -> None:
    """Java keeps the name server's perm when the DataVersion is unchanged (the topic is there):
    so does the O(1) path."""
    assert await store.wipe_write_perm("g") == len(TOPICS)
    seen = await calls(store)
    await store.register_broker(MASTER)
    assert seen == ["probe"]
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 4


async def test_a_role_or_member_change_does_the_full_work(store: RouteStore) -> None:
    slave = replace(MASTER, addr="10.0.0.2:10911", broker_id=1)
    await store.register_broker(slave)
    seen = await calls(store)
    await store.register_broker(slave)  # unchanged slave: probe only
    assert seen == ["probe"]
    seen.clear()
    # The slave takes over id 0 with the same DataVersion: a member change.
    await store.register_broker(replace(slave, broker_id=0))
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T1")
    assert read is not None and read.route.broker_datas[0].broker_addrs[0] == "10.0.0.2:10911"
    assert await orphans(store.redis, store.keys) == []


async def test_a_registration_after_the_row_expired_does_the_full_work(
        store: RouteStore) -> None:
    await store.redis.delete(store.keys.broker("c1", MASTER.addr))  # the row's TTL fired
    seen = await calls(store)
    await store.register_broker(MASTER)
    assert seen == ["probe", "full"]
    assert await store.pickup_route("T1") is not None


async def test_a_slave_that_becomes_a_prime_slave_writes_its_topics(store: RouteStore) -> None:
    """The same table and DataVersion, but the slave now says it is a new-version broker
    (enableActingMaster present) with no master left: it writes the queue data (Java's prime
    slave), so the role is part of what must be unchanged."""
    slave = replace(MASTER, addr="10.0.0.2:10911", broker_id=1, enable_acting_master=None)
    await store.register_broker(slave)
    await store.unregister_broker("c1", MASTER.addr, "g")  # the group keeps its queue data
    seen = await calls(store)
    await store.register_broker(replace(slave, enable_acting_master=False))
    assert seen == ["probe", "full"]
    assert await store.pickup_route("T1") is not None
