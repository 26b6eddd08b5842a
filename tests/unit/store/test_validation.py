"""Input validation: every bad field is refused with a ValidationError naming it, before any script
runs, so nothing at all is written; nothing valid is refused (names at their length limits,
topics with '%' and '|'); and a broker's registration is never held to stricter rules than the
Java NameServer holds it (RouteInfoManager.registerBroker checks nothing): a topic that cannot be
stored is dropped alone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from msgspec import structs

from nsfleet.domain.errors import ValidationError
from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.store import RouteStore
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from tests.support.invariants import dump, orphans

GOOD = BrokerRegistration("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", "zone-a", 30_000,
                          True, DataVersion(1, 100, 0),
                          [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)],
                          ["10.0.0.5:7000"])


def bad_topic(**kw: Any) -> BrokerRegistration:
    return replace(GOOD, topic_configs=[TopicConfig("T1"),
                                        structs.replace(TopicConfig("T2"), **kw)])


BAD_REGISTRATIONS: list[tuple[str, BrokerRegistration]] = [
    ("clusterName", replace(GOOD, cluster="")),
    ("clusterName", replace(GOOD, cluster="c:1")),
    ("clusterName", replace(GOOD, cluster="c\n1")),
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
    ("brokerId", replace(GOOD, broker_id=None)),
    ("brokerId", replace(GOOD, broker_id="x")),  # type: ignore[arg-type]
    ("brokerId", replace(GOOD, broker_id=True)),  # type: ignore[arg-type]
    ("haServerAddr", replace(GOOD, ha_server_addr="10.0.0.1\n")),
    ("zoneName", replace(GOOD, zone_name="z\n1")),
    ("zoneName", replace(GOOD, zone_name="z" * 256)),
    ("dataVersion.counter", replace(GOOD, data_version=DataVersion(2**63, 100, 0))),
    ("dataVersion.timestamp", replace(GOOD, data_version=DataVersion(1, 1.5, 0))),  # type: ignore[arg-type]
    ("filterServerList[1]", replace(GOOD, filter_server_list=["10.0.0.5:7000", "no\tpe"])),
]


@pytest.fixture
async def seeded(store: RouteStore) -> RouteStore:
    """A store with some state, so "nothing written" also means "nothing changed"."""
    await store.register_broker(GOOD)
    await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "broker-a:8")
    return store


async def key_names(store: RouteStore) -> set[str]:
    """Every key of the store's namespace, whatever its type (``dump`` reads the row types
    only). Not DBSIZE: the session's redis-server is shared, and CI once saw two keys appear
    mid-test, the count a worker's presence refresh writes in a namespace of its own."""
    return {k async for k in store.redis.scan_iter(match=f"{store.keys.prefix}:*", count=1000)}


async def assert_refused(store: RouteStore, field: str, call: Callable[[], Awaitable[Any]]) -> None:
    before, names = await dump(store.redis, store.keys), await key_names(store)
    with pytest.raises(ValidationError) as err:
        await call()
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(field)
    assert await key_names(store) == names
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
    ("topic", lambda s: s.pickup_route("T,1")),
    ("topic", lambda s: s.delete_topic("")),
    ("clusterName", lambda s: s.delete_topic("T1", "c:1")),
    ("topic", lambda s: s.register_topic("T\t1", [QueueData("broker-a", 8, 8, 6)])),
    ("queueDatas[1].brokerName",
     lambda s: s.register_topic("T3", [QueueData("broker-a", 8, 8, 6), QueueData("", 8, 8, 6)])),
    ("queueDatas[0].perm", lambda s: s.register_topic("T3", [QueueData("broker-a", 8, 8, 2**31)])),
    ("queueDatas[0].readQueueNums",
     lambda s: s.register_topic("T3", [QueueData("broker-a", -(2**31) - 1, 8, 6)])),
    ("brokerName", lambda s: s.wipe_write_perm("a:b")),
    ("brokerName", lambda s: s.add_write_perm("")),
    ("namespace", lambda s: s.kv_put(None, "k", "v")),  # type: ignore[arg-type]
    ("key", lambda s: s.kv_put("ns", "k" * 32_769, "v")),
    ("namespace", lambda s: s.kv_delete(None, "k")),  # type: ignore[arg-type]
    ("key", lambda s: s.kv_get("ns", None)),  # type: ignore[arg-type]
    ("namespace", lambda s: s.kv_list(None)),  # type: ignore[arg-type]
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
    assert await store.topic_list("cluster", cluster) == sorted(topics)
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


async def test_a_registration_keeps_every_topic_java_keeps(store: RouteStore) -> None:
    """Host-name brokerName and its topic, pop retry topics (KeyBuilder.buildPopRetryTopicV2), a
    255-character topic, 2048 queues, PERM_PRIORITY: all stored and routed as sent."""
    name, cluster = "broker-a.rmq.svc.cluster.local", "rmq.cluster-1"
    topics = [TopicConfig(name, 1, 1, 7), TopicConfig(cluster, 16, 16, 7),
              TopicConfig("%RETRY%group+TopicTest", 1, 1, 6), TopicConfig("T" * 255, 4, 4, 6),
              TopicConfig("Wide", 2048, 2048, 6), TopicConfig("Prio", 4, 4, 14),
              TopicConfig("with space:and colon", 2, 2, 6)]
    reg = replace(GOOD, cluster=cluster, name=name, topic_configs=topics)
    result = await store.register_broker(reg)
    assert result.dropped_topics == []
    assert await store.all_topics() == sorted(t.topic_name for t in topics)
    for tc in topics:
        read = await store.pickup_route(tc.topic_name)
        assert read is not None, tc.topic_name
        q = read.route.queue_datas[0]
        assert (q.broker_name, q.read_queue_nums, q.perm) == (name, tc.read_queue_nums, tc.perm)
    assert await store.wipe_write_perm(name) == len(topics)
    assert (await store.pickup_route("Prio")).route.queue_datas[0].perm == 12  # type: ignore[union-attr]
    assert await orphans(store.redis, store.keys) == []


@pytest.mark.parametrize("bad", [
    TopicConfig(""), TopicConfig("a,b"), TopicConfig("T\x01"), TopicConfig("@config"),
    TopicConfig("*"), TopicConfig("T" * 4097), TopicConfig("Big", 2**31, 8, 6),
    TopicConfig("Neg", 8, 8, -(2**31) - 1),
])
async def test_an_unstorable_topic_is_dropped_alone(store: RouteStore, bad: TopicConfig) -> None:
    topics = [TopicConfig("T1"), bad, TopicConfig("T2")]
    result = await store.register_broker(replace(GOOD, topic_configs=topics))
    assert [d.topic for d in result.dropped_topics] == [bad.topic_name]
    assert await store.all_topics() == ["T1", "T2"]
    assert await orphans(store.redis, store.keys) == []


async def test_single_topic_guard_counts_the_table_as_sent(store: RouteStore) -> None:
    """Two topics sent, one unstorable: not a single-topic registration (Java counts the
    table it received)."""
    result = await store.register_broker(replace(GOOD, topic_configs=[
        TopicConfig("T1"), TopicConfig("a,b")]))
    assert result.generation > 0 and await store.all_topics() == ["T1"]


async def test_a_topic_listed_twice_keeps_its_last_entry(store: RouteStore) -> None:
    await store.register_broker(replace(GOOD, topic_configs=[
        TopicConfig("T1", 4, 4), TopicConfig("T2"), TopicConfig("T1", 2, 2)]))
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].read_queue_nums == 2


async def test_kv_keys_java_stores(store: RouteStore) -> None:
    """KVConfigManager's long keys and odd characters are stored; a key name in Redis takes
    no empty part and no control character (docs/compatibility.md)."""
    assert await store.kv_put("ns", "k" * 2000, "long")
    assert await store.kv_put("ns", "a b:c/%é", "odd")
    assert await store.kv_list("ns") == {"k" * 2000: "long", "a b:c/%é": "odd"}
    assert await store.kv_delete("ns", "a b:c/%é")
    assert await orphans(store.redis, store.keys) == []


@pytest.mark.parametrize(("namespace", "key", "why"), [
    ("", "k", "must not be empty"), ("ns", "", "must not be empty"),
    ("ns\x00x", "k", "control character"), ("ns", "ok\nline", "control character"),
    ("ns", "tab\there", "control character"), ("del\x7f", "k", "control character"),
])
async def test_kv_names_redis_cannot_carry_are_refused_and_nothing_is_written(
        store: RouteStore, namespace: str, key: str, why: str) -> None:
    before = await key_names(store)
    with pytest.raises(ValidationError, match=why):
        await store.kv_put(namespace, key, "v")
    assert await key_names(store) == before
