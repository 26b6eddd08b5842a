"""Port of RocketMQ's RouteInfoManagerTest (namesrv unit test; the same broker as
RequestProcessorTest.registerRouteInfoManager) onto RouteStore.

Its ``setup`` runs ``testRegisterBroker``: default-cluster / 127.0.0.1:10911 / default-broker,
brokerId 1234, ha 127.0.0.1:1001, DataVersion {10, 100}, topics unit-test0/1 (default TopicConfig),
through the 10-argument overload (``enableActingMaster=false``, so a new-version broker). Java's
``@After`` unregister is not needed: every test gets a fresh store. Java's "encode() is not null"
checks become checks of the actual contents. Differences are marked "nsfleet:".
"""

from __future__ import annotations

import json

import pytest

from nsfleet.domain.model import (
    PERM_READ,
    PERM_WRITE,
    BrokerRegistration,
    DataVersion,
    QueueData,
    TopicConfig,
)
from nsfleet.store import RouteStore

CLUSTER, ADDR, NAME, BROKER_ID = "default-cluster", "127.0.0.1:10911", "default-broker", 1234


def registration(cluster: str = CLUSTER, name: str = NAME, dv: DataVersion | None = None,
                 topics: tuple[str, ...] = ("unit-test0", "unit-test1")) -> BrokerRegistration:
    return BrokerRegistration(cluster, ADDR, name, BROKER_ID, "127.0.0.1:1001", "", None, False,
                              dv or DataVersion(counter=10, timestamp=100),
                              [TopicConfig(t) for t in topics], [])


@pytest.fixture
async def rim(store: RouteStore) -> RouteStore:
    """The store after RouteInfoManagerTest.setup (testRegisterBroker)."""
    result = await store.register_broker(registration())
    assert result is not None and not result.fenced
    return store


async def inject_queue(store: RouteStore, cluster: str, topic: str, broker: str,
                       perm: int) -> None:
    """Java replaces topicQueueTable by reflection with {topic: {broker: QueueData(perm)}}.
    nsfleet: the same state is made through the API, a master with no topics of its own plus
    REGISTER_TOPIC_IN_NAMESRV."""
    await store.register_broker(BrokerRegistration(cluster, "10.0.0.9:10911", broker, 0,
                                                   enable_acting_master=False))
    assert await store.register_topic(topic, [QueueData(broker, 8, 8, perm)]) == 1


async def perm_of(store: RouteStore, topic: str, broker: str) -> int:
    read = await store.pickup_route(topic)
    assert read is not None
    [perm] = [q.perm for q in read.route.queue_datas if q.broker_name == broker]
    return perm


async def test_register_broker(rim: RouteStore) -> None:
    # A prime slave (id 1234 is the lowest id, no master): its topics are routed, unchanged perm.
    read = await rim.pickup_route("unit-test0")
    assert read is not None
    assert read.route.broker_datas[0].broker_addrs == {BROKER_ID: ADDR}
    assert [q.perm for q in read.route.queue_datas] == [6]
    assert (read.route.queue_datas[0].read_queue_nums,
            read.route.queue_datas[0].write_queue_nums) == (16, 16)


async def test_get_all_cluster_info(rim: RouteStore) -> None:
    encoded = json.dumps((await rim.cluster_info()).to_dict())
    assert json.loads(encoded)["clusterAddrTable"] == {CLUSTER: [NAME]}


async def test_query_broker_topic_config(rim: RouteStore) -> None:
    target = DataVersion(counter=10, timestamp=100)
    assert (await rim.query_data_version(CLUSTER, ADDR, target)) == (False, target)

    # The same address registers under another cluster and group: brokerLiveTable is keyed by
    # (cluster, addr), so the two DataVersions stay apart.
    target1 = DataVersion(counter=20, timestamp=200)
    result = await rim.register_broker(registration("default-cluster-1", "default-broker-1",
                                                    target1, ("unit-test-0", "unit-test-1")))
    assert result is not None and not result.fenced
    changed0, dv0 = await rim.query_data_version(CLUSTER, ADDR, target1)
    assert changed0 and dv0 == target
    assert await rim.query_data_version("default-cluster-1", ADDR, target1) == (False, target1)

    await rim.unregister_broker("default-cluster-1", ADDR, "default-broker-1")
    assert (await rim.query_data_version(CLUSTER, ADDR, target))[1] is not None
    assert (await rim.query_data_version("default-cluster-1", ADDR, target1))[1] is None


async def test_get_all_topic_list(rim: RouteStore) -> None:
    assert await rim.all_topics() == ["unit-test0", "unit-test1"]


async def test_wipe_write_perm_of_broker_by_lock(rim: RouteStore) -> None:
    await inject_queue(rim, "cluster-a", "topic-a", "broker-a", PERM_READ | PERM_WRITE)
    assert await rim.wipe_write_perm("broker-a") == 1
    assert await perm_of(rim, "topic-a", "broker-a") == PERM_READ


async def test_add_write_perm_of_broker_by_lock(rim: RouteStore) -> None:
    await inject_queue(rim, "cluster-a", "topic-a", "broker-a", PERM_READ)
    assert await rim.add_write_perm("broker-a") == 1
    assert await perm_of(rim, "topic-a", "broker-a") == PERM_READ | PERM_WRITE


async def test_pickup_topic_route_data(rim: RouteStore) -> None:
    assert await rim.pickup_route("unit_test") is None


async def test_get_system_topic_list(rim: RouteStore) -> None:
    assert await rim.system_topic_list() == (sorted([CLUSTER, NAME]), ADDR)


async def test_get_topics_by_cluster(rim: RouteStore) -> None:
    assert await rim.topic_list("cluster", CLUSTER) == ["unit-test0", "unit-test1"]
    assert await rim.topic_list("cluster", "no-such-cluster") == []


async def test_unit_topic_lists(rim: RouteStore) -> None:
    # testGetUnitTopics / testGetHasUnitSubTopicList / testGetHasUnitSubUnUnitTopicList: Java
    # only checks the encoded lists are not null. Here: empty, then one topic per flag combination.
    assert await rim.topic_list("unit") == []
    assert await rim.topic_list("unit-sub") == []
    assert await rim.topic_list("unit-sub-ununit") == []
    await rim.register_broker(BrokerRegistration(
        "unit-cluster", "10.0.0.8:10911", "unit-broker", 0, enable_acting_master=False,
        topic_configs=[TopicConfig("u1", topic_sys_flag=1), TopicConfig("u2", topic_sys_flag=2),
                       TopicConfig("u3", topic_sys_flag=3)]))
    assert await rim.topic_list("unit") == ["u1", "u3"]
    assert await rim.topic_list("unit-sub") == ["u2", "u3"]
    assert await rim.topic_list("unit-sub-ununit") == ["u2"]


# The store-level part of RequestProcessorTest (its registerRouteInfoManager broker, as the
# remoting tests register it);
# the wire-level checks belong to the remoting tests.

async def test_request_processor_register_broker(store: RouteStore) -> None:
    # Java registers addr "10.10.1.1" (no port) with ha "10.10.2.1".
    # nsfleet: addresses must be host:port, so both get a port; the bare address is refused.
    from nsfleet.domain.errors import ValidationError

    with pytest.raises(ValidationError) as err:
        await store.register_broker(BrokerRegistration("cluster", "10.10.1.1", "broker", 2333))
    assert err.value.field == "brokerAddr"
    await store.register_broker(BrokerRegistration(
        "cluster", "10.10.1.1:10911", "broker", 2333, "10.10.2.1:10912", enable_acting_master=False,
        topic_configs=[TopicConfig("unit-test1"), TopicConfig("unit-test2")]))
    info = await store.cluster_info()
    assert info.broker_addr_table["broker"].broker_addrs == {2333: "10.10.1.1:10911"}


async def test_request_processor_unregister_broker(store: RouteStore) -> None:
    # Java: brokerAddrTable is still not empty after UNREGISTER_BROKER, because the request is
    # only queued and the batch service is not started. nsfleet: unregister is synchronous.
    await store.register_broker(BrokerRegistration(
        "cluster", "10.10.1.1:10911", "broker", 2333, enable_acting_master=False,
        topic_configs=[TopicConfig("unit-test1"), TopicConfig("unit-test2")]))
    assert await store.unregister_broker("cluster", "10.10.1.1:10911", "broker") == 1
    assert (await store.cluster_info()).broker_addr_table == {}
