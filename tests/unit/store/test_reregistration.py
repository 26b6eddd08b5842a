"""The O(1) re-registration never hides a real change: whenever Java's registerBroker would
write queue data that differs from what Redis holds (a topic missing after a delete on the name
server, a new topic in the table, a changed role or member, a changed DataVersion after a row was
changed by the name server), the full registration runs. Every case runs with the digest probe
(tables of these tests are past the probe threshold)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis.asyncio as aioredis
from msgspec import structs

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
    original = store.calls.call

    async def recording(name: str, args: object = (), keys: object = ()) -> object:
        seen.append(args.mode if name == "register_broker" else name)  # type: ignore[attr-defined]
        return await original(name, args, keys)  # type: ignore[arg-type]

    store.calls.call = recording  # type: ignore[method-assign]
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
                      topic_configs=[structs.replace(t, read_queue_nums=4) for t in TOPICS])
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
    """Java keeps the name server's perm when the DataVersion is unchanged (the topic is there).
    The wipe changed the group's rows, so the registration is not skipped, but it writes only
    missing rows, as Java's does; the one after it is O(1) again."""
    assert await store.wipe_write_perm("g") == len(TOPICS)
    seen = await calls(store)
    await store.register_broker(MASTER)
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 4
    seen.clear()
    await store.register_broker(MASTER)
    assert seen == ["probe"]


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


# --- the same table under a new DataVersion ------------------------------------------------------
# Java rewrites every topic (isTopicConfigChanged) with the values the table has; when Redis
# already holds exactly those rows, that writes nothing, and nsfleet records the new DataVersion
# in O(1). Each test below changes a row some other way first, so the rewrite must happen.

def next_version(reg: BrokerRegistration, n: int) -> BrokerRegistration:
    return replace(reg, data_version=DataVersion(reg.data_version.counter + n,
                                                 reg.data_version.timestamp + n))


async def test_the_same_table_under_a_new_data_version_is_one_probe(store: RouteStore) -> None:
    seen = await calls(store)
    result = await store.register_broker(next_version(MASTER, 1))
    assert seen == ["probe"] and not result.changed
    changed, stored = await store.query_data_version("c1", MASTER.addr, DataVersion(2, 101))
    assert not changed and stored == DataVersion(2, 101)
    seen.clear()
    await store.register_broker(next_version(MASTER, 2))  # and again
    assert seen == ["probe"]


async def test_a_new_data_version_restores_a_wiped_write_perm(store: RouteStore) -> None:
    assert await store.wipe_write_perm("g") == len(TOPICS)
    seen = await calls(store)
    await store.register_broker(next_version(MASTER, 1))
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 6
    seen.clear()
    await store.register_broker(next_version(MASTER, 2))
    assert seen == ["probe"]


async def test_a_wipe_kept_by_an_unchanged_registration_is_undone_by_the_next_version(
        store: RouteStore) -> None:
    """The unchanged registration after a wipe writes only missing rows, so the rows are not
    the table's any more: the next DataVersion must rewrite them."""
    await store.wipe_write_perm("g")
    await store.register_broker(MASTER)  # same DataVersion: the wipe stays
    seen = await calls(store)
    await store.register_broker(next_version(MASTER, 1))
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T7")
    assert read is not None and read.route.queue_datas[0].perm == 6


async def test_a_new_data_version_restores_queue_data_changed_by_register_topic(
        store: RouteStore) -> None:
    assert await store.register_topic("T3", [QueueData("g", 2, 2, 4)]) == 1
    seen = await calls(store)
    await store.register_broker(next_version(MASTER, 1))
    assert seen == ["probe", "full"]
    read = await store.pickup_route("T3")
    assert read is not None
    assert (read.route.queue_datas[0].read_queue_nums, read.route.queue_datas[0].perm) == (8, 6)


async def test_a_new_data_version_brings_back_a_deleted_topic(store: RouteStore) -> None:
    assert await store.delete_topic("T5") == 1
    seen = await calls(store)
    await store.register_broker(next_version(MASTER, 1))
    assert seen == ["probe", "full"]
    assert await store.pickup_route("T5") is not None


async def test_a_master_back_after_a_prime_slave_wrote_the_group_rewrites_it(
        store: RouteStore) -> None:
    """A prime slave wrote the group's rows (without the write perm) while the master was away;
    the master's return rewrites them, after which its next DataVersion is O(1) again."""
    slave = replace(MASTER, addr="10.0.0.2:10911", broker_id=1, enable_acting_master=True)
    await store.register_broker(slave)
    await store.unregister_broker("c1", MASTER.addr, "g")
    await store.register_broker(next_version(slave, 1))  # prime slave: rows without write perm
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 4
    master = replace(next_version(MASTER, 5), enable_acting_master=True)
    await store.register_broker(master)
    seen = await calls(store)
    await store.register_broker(next_version(master, 1))
    assert seen == ["probe"]  # the master's own forced write made the rows its table's
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 6


async def test_static_topic_mappings_always_rewrite_under_a_new_data_version(
        store: RouteStore) -> None:
    info = {"topic": "T1", "bname": "g", "epoch": 1, "totalQueues": 8, "currIdMap": {"0": 0}}
    mapped = replace(MASTER, topic_queue_mappings={"T1": info})
    await store.register_broker(mapped)
    seen = await calls(store)
    await store.register_broker(next_version(mapped, 1))
    assert seen == ["probe", "full"]


async def test_a_slave_under_a_new_data_version_or_table_is_one_probe(store: RouteStore) -> None:
    """A slave writes no queue data (Java reads none of its table), whatever it sends."""
    slave = replace(MASTER, addr="10.0.0.2:10911", broker_id=1)
    await store.register_broker(slave)
    seen = await calls(store)
    await store.register_broker(replace(next_version(slave, 1),
                                        topic_configs=[*TOPICS, TopicConfig("OnlyOnSlave")]))
    assert seen == ["probe"]
    assert await store.pickup_route("OnlyOnSlave") is None
