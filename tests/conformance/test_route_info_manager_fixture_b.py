"""Ports of RouteInfoManagerBrokerRegisterTest, RouteInfoManagerStaticRegisterTest and
RouteInfoManagerBrokerPermTest (namesrv unit tests; fixture B:
RouteInfoManagerTestBase.registerCluster).

Fixture B: cluster ``cluster``, broker names ``broker-0..2`` x ids ``0..2``, addresses
``cluster-broker-N:id``, topics ``topic-0..9`` (8/8, perm 6), through the 10-argument overload
(``enableActingMaster=false``) with haServerAddr "" and zoneName = the broker address (the Java
helper's argument order), the wrapper's default DataVersion, and an empty filter server list.
Differences are marked "nsfleet:".
"""

from __future__ import annotations

import pytest

from nsfleet.domain.model import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    BrokerRegistration,
    DataVersion,
    QueueData,
    TopicConfig,
)
from nsfleet.store import RouteStore

CLUSTER = "cluster"
BROKER_NAMES = [f"broker-{i}" for i in range(3)]
TOPICS = [f"topic-{i}" for i in range(10)]
NOW = 1_700_000_000_000


def broker_addr(name: str, broker_id: int) -> str:
    return f"{CLUSTER}-{name}:{broker_id}"


def expected_broker_data(name: str) -> BrokerData:
    return BrokerData(CLUSTER, name, {i: broker_addr(name, i) for i in range(3)})


def topic_configs() -> list[TopicConfig]:
    return [TopicConfig(t, 8, 8, 6) for t in TOPICS]


async def register_with_topic_config(store: RouteStore, addr: str, name: str, broker_id: int,
                                     configs: list[TopicConfig]) -> None:
    # Java passes ("", haServerAddr=addr) into the (haServerAddr, zoneName) slots.
    await store.register_broker(BrokerRegistration(
        CLUSTER, addr, name, broker_id, ha_server_addr="", zone_name=addr,
        enable_acting_master=False, data_version=DataVersion(timestamp=NOW),
        topic_configs=configs, filter_server_list=[]))


@pytest.fixture
async def fixture_b(store: RouteStore) -> RouteStore:
    for name in BROKER_NAMES:
        for broker_id in range(3):
            await register_with_topic_config(store, broker_addr(name, broker_id), name, broker_id,
                                             topic_configs())
    return store


def by_name(datas: list[BrokerData], name: str) -> BrokerData:
    [found] = [b for b in datas if b.broker_name == name]
    return found


# --- RouteInfoManagerBrokerRegisterTest -----------------------------------------------------

async def test_master_change_from_slave(fixture_b: RouteStore) -> None:
    read = await fixture_b.pickup_route("topic-0")
    assert read is not None
    origin = by_name(read.route.broker_datas, "broker-0")
    assert origin.broker_addrs[0] == broker_addr("broker-0", 0)

    # The slave at cluster-broker-0:1 registers as id 0: its id-1 entry goes, it becomes master.
    new_master = broker_addr("broker-0", 1)
    await register_with_topic_config(fixture_b, new_master, "broker-0", 0, topic_configs())
    read = await fixture_b.pickup_route("topic-0")
    assert read is not None
    addrs = by_name(read.route.broker_datas, "broker-0").broker_addrs
    assert addrs[0] == new_master
    assert addrs == {0: new_master, 2: broker_addr("broker-0", 2)}


async def test_unregister_broker(fixture_b: RouteStore) -> None:
    assert await fixture_b.unregister_broker(CLUSTER, broker_addr("broker-0", 2), "broker-0") == 0
    read = await fixture_b.pickup_route("topic-0")
    assert read is not None
    assert 2 not in by_name(read.route.broker_datas, "broker-0").broker_addrs


# --- RouteInfoManagerStaticRegisterTest -----------------------------------------------------
# Despite its name this class registers no static-topic mappings (topicQueueMappingInfo), which
# nsfleet does not store anyway: routes carry no topicQueueMappingByBroker.

async def test_static_get_all_cluster_info(fixture_b: RouteStore) -> None:
    info = await fixture_b.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: BROKER_NAMES}
    # The last registration of each group set its zone (Java: brokerData.setZoneName).
    assert {n: b.zone_name for n, b in info.broker_addr_table.items()} == {
        n: broker_addr(n, 2) for n in BROKER_NAMES}


async def test_static_get_all_topic_list(fixture_b: RouteStore) -> None:
    assert await fixture_b.all_topics() == sorted(TOPICS)


async def test_static_get_topics_by_cluster(fixture_b: RouteStore) -> None:
    assert await fixture_b.topic_list("cluster", CLUSTER) == sorted(TOPICS)


async def test_static_pickup_topic_route_data(fixture_b: RouteStore) -> None:
    read = await fixture_b.pickup_route("topic-0")
    assert read is not None
    route = read.route
    # Java's BrokerData.equals compares brokerName and brokerAddrs.
    got = sorted((b.broker_name, b.broker_addrs) for b in route.broker_datas)
    assert got == [(b.broker_name, b.broker_addrs)
                   for b in map(expected_broker_data, BROKER_NAMES)]
    for q in route.queue_datas:
        assert (q.write_queue_nums, q.read_queue_nums, q.perm, q.topic_sys_flag) == (8, 8, 6, 0)
    assert {q.broker_name for q in route.queue_datas} == set(BROKER_NAMES)
    assert route.filter_server_table == {}


async def test_static_delete_topic(fixture_b: RouteStore) -> None:
    assert await fixture_b.delete_topic("topic-0") == 3
    assert await fixture_b.pickup_route("topic-0") is None
    assert "topic-0" not in await fixture_b.all_topics()


async def test_static_system_and_unit_topic_lists(fixture_b: RouteStore) -> None:
    topics, addr = await fixture_b.system_topic_list()
    assert topics == sorted([CLUSTER, *BROKER_NAMES])
    assert addr == broker_addr("broker-0", 0)
    assert await fixture_b.topic_list("unit") == []
    assert await fixture_b.topic_list("unit-sub") == []
    assert await fixture_b.topic_list("unit-sub-ununit") == []


# --- RouteInfoManagerBrokerPermTest -----------------------------------------------------------

async def inject_only_topic0_broker0(store: RouteStore, perm: int) -> None:
    """Java replaces topicQueueTable with {topic-0: {broker-0: QueueData(perm)}} by reflection.
    nsfleet: the same table is made through the API: every topic deleted, then
    REGISTER_TOPIC_IN_NAMESRV for topic-0 on broker-0 only."""
    for topic in TOPICS:
        await store.delete_topic(topic)
    assert await store.register_topic("topic-0", [QueueData("broker-0", 8, 8, perm)]) == 1
    assert await store.all_topics() == ["topic-0"]


async def topic0_perm(store: RouteStore) -> int:
    read = await store.pickup_route("topic-0")
    assert read is not None
    [q] = read.route.queue_datas
    return q.perm


async def test_perm_add_write_perm_of_broker_by_lock(fixture_b: RouteStore) -> None:
    await inject_only_topic0_broker0(fixture_b, PERM_READ)
    assert await fixture_b.add_write_perm("broker-0") == 1
    assert await topic0_perm(fixture_b) == PERM_READ | PERM_WRITE


async def test_perm_wipe_write_perm_of_broker_by_lock(fixture_b: RouteStore) -> None:
    await inject_only_topic0_broker0(fixture_b, PERM_READ)
    # Counted although nothing changed (Java's count).
    assert await fixture_b.wipe_write_perm("broker-0") == 1
    assert await topic0_perm(fixture_b) == PERM_READ


async def test_perm_add_replaces_the_perm(fixture_b: RouteStore) -> None:
    # ADD sets READ|WRITE, dropping INHERIT (RouteInfoManager.addWritePermOfBrokerByLock);
    # counts every topic of the group.
    await fixture_b.register_topic("topic-0", [QueueData("broker-1", 8, 8, 7)])
    assert await fixture_b.add_write_perm("broker-1") == len(TOPICS)
    read = await fixture_b.pickup_route("topic-0")
    assert read is not None
    assert {q.broker_name: q.perm for q in read.route.queue_datas}["broker-1"] == 6
