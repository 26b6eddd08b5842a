"""Input validation: every bad field is refused with a ValidationError naming it, before any script
runs, so nothing at all is written; and nothing valid is refused (names at their length limits,
topics with '%' and '|')."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from nsfleet.domain.errors import ValidationError
from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.keys import ORDER_TOPIC_CONFIG
from nsfleet.store import RouteStore
from tests.conformance.invariants import dump, orphans

GOOD = BrokerRegistration("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", "zone-a", 30_000,
                          True, DataVersion(1, 100, 0),
                          [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)],
                          ["10.0.0.5:7000"])


def bad_topic(**kw: Any) -> BrokerRegistration:
    return replace(GOOD, topic_configs=[TopicConfig("T1"), replace(TopicConfig("T2"), **kw)])


BAD_REGISTRATIONS: list[tuple[str, BrokerRegistration]] = [
    ("clusterName", replace(GOOD, cluster="")),
    ("clusterName", replace(GOOD, cluster="c:1")),
    ("clusterName", replace(GOOD, cluster="c 1")),
    ("clusterName", replace(GOOD, cluster="{c1}")),
    ("clusterName", replace(GOOD, cluster="c" * 256)),
    ("brokerAddr", replace(GOOD, addr="10.0.0.1")),
    ("brokerAddr", replace(GOOD, addr="10.0.0.1:65536")),
    ("brokerAddr", replace(GOOD, addr="10.0.0.1:port")),
    ("brokerAddr", replace(GOOD, addr="10.0.0.1 :10911")),
    ("brokerAddr", replace(GOOD, addr="")),
    ("brokerAddr", replace(GOOD, addr="h" * 250 + ":10911")),
    ("brokerName", replace(GOOD, name="")),
    ("brokerName", replace(GOOD, name="b:a")),
    ("brokerName", replace(GOOD, name="b" * 256)),
    ("brokerId", replace(GOOD, broker_id=-1)),
    ("brokerId", replace(GOOD, broker_id="x")),  # type: ignore[arg-type]
    ("brokerId", replace(GOOD, broker_id=True)),  # type: ignore[arg-type]
    ("haServerAddr", replace(GOOD, ha_server_addr="10.0.0.1")),
    ("zoneName", replace(GOOD, zone_name="z\n1")),
    ("zoneName", replace(GOOD, zone_name="z" * 256)),
    ("heartbeatTimeoutMillis", replace(GOOD, heartbeat_timeout_millis=-5)),
    ("heartbeatTimeoutMillis", replace(GOOD, heartbeat_timeout_millis=86_400_001)),
    ("dataVersion.counter", replace(GOOD, data_version=DataVersion(-1, 100, 0))),
    ("dataVersion.timestamp", replace(GOOD, data_version=DataVersion(1, 1.5, 0))),  # type: ignore[arg-type]
    ("dataVersion.state_version", replace(GOOD, data_version=DataVersion(1, 100, -2))),
    ("topicConfigTable", bad_topic(topic_name="")),
    ("topicConfigTable", bad_topic(topic_name="T 2")),
    ("topicConfigTable", bad_topic(topic_name="T:2")),
    ("topicConfigTable", bad_topic(topic_name="T" * 128)),
    ("topicConfigTable.T1", replace(GOOD, topic_configs=[TopicConfig("T1"), TopicConfig("T1")])),
    ("topicConfigTable.T2.readQueueNums", bad_topic(read_queue_nums=-1)),
    ("topicConfigTable.T2.writeQueueNums", bad_topic(write_queue_nums=1025)),
    ("topicConfigTable.T2.perm", bad_topic(perm=8)),
    ("topicConfigTable.T2.perm", bad_topic(perm=-1)),
    ("topicConfigTable.T2.topicSysFlag", bad_topic(topic_sys_flag=-1)),
    ("filterServerList[1]", replace(GOOD, filter_server_list=["10.0.0.5:7000", "nope"])),
]


@pytest.fixture
async def seeded(store: RouteStore) -> RouteStore:
    """A store with some state, so "nothing written" also means "nothing changed"."""
    await store.register_broker(GOOD)
    await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "broker-a:8")
    return store


async def assert_refused(store: RouteStore, field: str, call: Callable[[], Awaitable[Any]]) -> None:
    before, size = await dump(store.redis, store.keys), await store.redis.dbsize()
    with pytest.raises(ValidationError) as err:
        await call()
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(field)
    assert await store.redis.dbsize() == size
    assert await dump(store.redis, store.keys) == before


@pytest.mark.parametrize(("field", "reg"), BAD_REGISTRATIONS,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_REGISTRATIONS)])
async def test_bad_registration_field_is_named_and_nothing_written(
        seeded: RouteStore, field: str, reg: BrokerRegistration) -> None:
    await assert_refused(seeded, field, lambda: seeded.register_broker(reg))


BAD_CALLS: list[tuple[str, Callable[[RouteStore], Awaitable[Any]]]] = [
    ("clusterName", lambda s: s.unregister_broker("c:1", "10.0.0.1:10911", "broker-a")),
    ("brokerAddr", lambda s: s.unregister_broker("c1", "10.0.0.1", "broker-a")),
    ("brokerName", lambda s: s.unregister_broker("c1", "10.0.0.1:10911", "")),
    ("clusterName", lambda s: s.heartbeat("", "10.0.0.1:10911")),
    ("brokerAddr", lambda s: s.heartbeat("c1", "10.0.0.1:99999")),
    ("brokerAddr", lambda s: s.query_data_version("c1", "x", DataVersion())),
    ("topic", lambda s: s.pickup_route("T:1")),
    ("topic", lambda s: s.delete_topic("")),
    ("clusterName", lambda s: s.delete_topic("T1", "c 1")),
    ("topic", lambda s: s.register_topic("T 1", [QueueData("broker-a", 8, 8, 6)])),
    ("queueDatas[1].brokerName",
     lambda s: s.register_topic("T3", [QueueData("broker-a", 8, 8, 6), QueueData("", 8, 8, 6)])),
    ("queueDatas[0].perm", lambda s: s.register_topic("T3", [QueueData("broker-a", 8, 8, 9)])),
    ("queueDatas[0].readQueueNums",
     lambda s: s.register_topic("T3", [QueueData("broker-a", 2000, 8, 6)])),
    ("queueDatas[0].topicSysFlag",
     lambda s: s.register_topic("T3", [QueueData("broker-a", 8, 8, 6, -1)])),
    ("brokerName", lambda s: s.wipe_write_perm("a:b")),
    ("brokerName", lambda s: s.add_write_perm("")),
    ("namespace", lambda s: s.kv_put("", "k", "v")),
    ("key", lambda s: s.kv_put("ns", "", "v")),
    ("key", lambda s: s.kv_put("ns", "k" * 1025, "v")),
    ("namespace", lambda s: s.kv_delete("", "k")),
    ("key", lambda s: s.kv_get("ns", "")),
    ("namespace", lambda s: s.kv_list("")),
    ("brokerName", lambda s: s.broker_member_group("c1", "")),
]


@pytest.mark.parametrize(("field", "call"), BAD_CALLS,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_CALLS)])
async def test_bad_argument_is_named_and_nothing_written(
        seeded: RouteStore, field: str, call: Callable[[RouteStore], Awaitable[Any]]) -> None:
    await assert_refused(seeded, field, lambda: call(seeded))


def test_bad_store_namespace() -> None:
    with pytest.raises(ValidationError) as err:
        RouteStore(None, "a:b")  # type: ignore[arg-type]
    assert err.value.field == "namespace"


async def test_names_at_their_limits_are_accepted(store: RouteStore) -> None:
    """RouteStore refuses nothing valid: RocketMQ topic characters including '%' and '|', a
    127-character topic, 255-character cluster and broker names, a 255-character address."""
    cluster, name = "C" * 255, "b.%|-_" + "B" * 249
    addr = "h" * 249 + ":10911"
    topics = ["a%b|c", "%RETRY%group|x", "T" * 127, "rmq_sys_SYNC_BROKER_MEMBER_b"]
    assert len(name) == 255 and len(addr) == 255
    await store.register_broker(BrokerRegistration(
        cluster, addr, name, 0, addr, "zone:1 with spaces", 86_400_000, True,
        DataVersion(2**62, 2**62, 2**62), [TopicConfig(t, 1024, 0, 7, 3) for t in topics],
        [addr]))
    assert await store.all_topics() == sorted(topics)
    assert await store.topics_by_cluster(cluster) == sorted(topics)
    for topic in topics:
        read = await store.pickup_route(topic)
        assert read is not None
        assert read.route.broker_datas[0].broker_addrs == {0: addr}
        assert read.route.broker_datas[0].zone_name == "zone:1 with spaces"
        assert read.route.filter_server_table == {addr: [addr]}
        assert read.route.queue_datas[0].read_queue_nums == 1024
    assert await store.query_data_version(cluster, addr, DataVersion(2**62, 2**62, 2**62)) == (
        False, DataVersion(2**62, 2**62, 2**62))
    await store.kv_put(ORDER_TOPIC_CONFIG, topics[0], f"{name}:8")
    assert (await store.pickup_route(topics[0], order_conf=True)).route.order_topic_conf == \
        f"{name}:8"  # type: ignore[union-attr]
    assert await store.register_topic(topics[2], [QueueData(name, 4, 4, 6)]) == 1
    assert await store.wipe_write_perm(name) == len(topics)
    assert await store.delete_topic(topics[0], cluster) == 1
    assert await orphans(store.redis, store.keys) == []
    assert await store.unregister_broker(cluster, addr, name) == 1
    assert await store.all_topics() == []
    assert (await store.cluster_info()).cluster_addr_table == {}
    assert await orphans(store.redis, store.keys) == []
