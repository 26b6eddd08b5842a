"""Port of RocketMQ's RouteInfoManagerNewTest (namesrv unit test; its defaultBroker() and
slaveBroker() fixtures) onto RouteStore.

The Java class runs with ``supportActingMaster=true``, so every route read here goes through
``apply_acting_master`` (nsfleet/acting_master.py), as a route reply would. Every test runs on a
fresh fakeredis server and on the suite's real redis-server (the ``store`` fixture).

Differences from Java that these tests pin down are marked "nsfleet:" in comments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from nsfleet.domain.model import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerRegistration,
    DataVersion,
    QueueData,
    RegisterResult,
    TopicConfig,
    TopicRouteData,
    is_writeable,
)
from nsfleet.service.acting_master import apply_acting_master
from nsfleet.store import RouteStore

DEFAULT_CLUSTER = "Default_Cluster"
DEFAULT_BROKER = "Default_Broker"
DEFAULT_ADDR_PREFIX = "127.0.0.1:"
DEFAULT_ADDR = DEFAULT_ADDR_PREFIX + "10911"
# Java's second master is DEFAULT_ADDR + 9 = "127.0.0.1:109119", a port above 65535.
# nsfleet: addresses must be host:port with a valid port, so it gets 10919 here.
SECOND_ADDR = DEFAULT_ADDR_PREFIX + "10919"
MASTER_ADDR, SLAVE_ADDR = DEFAULT_ADDR, DEFAULT_ADDR_PREFIX + "30911"
NOW = 1_700_000_000_000  # Java uses System.currentTimeMillis(); a fixed value keeps runs equal


@dataclass
class BrokerBasicInfo:
    cluster_name: str = DEFAULT_CLUSTER
    broker_name: str = DEFAULT_BROKER
    broker_addr: str = DEFAULT_ADDR
    ha_addr: str = DEFAULT_ADDR_PREFIX + "20911"
    broker_id: int = 0
    enable_acting_master: bool = True
    data_version: DataVersion = field(default_factory=lambda: DataVersion(counter=1, timestamp=NOW))

    @classmethod
    def default_broker(cls) -> BrokerBasicInfo:
        return cls()

    @classmethod
    def slave_broker(cls) -> BrokerBasicInfo:
        return cls(broker_id=1, broker_addr=DEFAULT_ADDR_PREFIX + "30911",
                   ha_addr=DEFAULT_ADDR_PREFIX + "40911")

    def but(self, **changes: object) -> BrokerBasicInfo:
        return replace(self, **changes)  # type: ignore[arg-type]

    def next_version(self) -> BrokerBasicInfo:
        """DataVersion.nextVersion(): counter + 1 and a new timestamp."""
        dv = self.data_version
        return replace(self, data_version=DataVersion(dv.counter + 1, dv.timestamp + 1,
                                                      dv.state_version))


def normal_topics(*topics: str) -> list[TopicConfig]:
    # Every registration also carries baseTopic (16/16/6), so the table is never of size 1.
    return [TopicConfig("baseTopic"), *(TopicConfig(t, 8, 8, 6) for t in topics)]


def order_topics(*topics: str) -> list[TopicConfig]:
    return [TopicConfig("baseTopic", order=True), *(TopicConfig(t, 8, 8, 6, order=True)
                                                     for t in topics)]


def global_order_topics(*topics: str) -> list[TopicConfig]:
    return [TopicConfig("baseTopic", 1, 1, order=True),
            *(TopicConfig(t, 1, 1, 6, order=True) for t in topics)]


async def register(store: RouteStore, info: BrokerBasicInfo, configs: list[TopicConfig], *,
                   timeout_millis: int | None = None, delete_absent: bool = False,
                   channel: str | None = None) -> RegisterResult:
    return await store.register_broker(BrokerRegistration(
        info.cluster_name, info.broker_addr, info.broker_name, info.broker_id, info.ha_addr, "",
        timeout_millis, info.enable_acting_master, info.data_version, configs, []),
        delete_absent_topics=delete_absent, connection=channel)


async def register_normal(store: RouteStore, info: BrokerBasicInfo, *topics: str,
                          delete_absent: bool = False,
                          channel: str | None = None) -> RegisterResult:
    return await register(store, info, normal_topics(*topics), delete_absent=delete_absent,
                          channel=channel)


async def destroy_channel(store: RouteStore, info: BrokerBasicInfo, channel: str) -> int:
    """BrokerHousekeepingService.onChannelDestroy: nsfleet forgets the broker's connection and
    removes it when no other connection it registered over is open (-1: kept)."""
    return await store.unregister_broker(info.cluster_name, info.broker_addr, info.broker_name,
                                         closed_connection=channel)


async def unregister(store: RouteStore, info: BrokerBasicInfo) -> int:
    # nsfleet: unregister is synchronous; Java's "submit a batch unregister, then wait until the
    # queue is empty" and unRegisterBroker(Set) are both just this call.
    return await store.unregister_broker(info.cluster_name, info.broker_addr, info.broker_name)


async def pickup(store: RouteStore, topic: str) -> TopicRouteData | None:
    """pickupTopicRouteData with supportActingMaster=true."""
    read = await store.pickup_route(topic)
    return None if read is None else apply_acting_master(read.route, topic)


async def addrs_of(store: RouteStore, topic: str, index: int = 0) -> dict[int, str]:
    route = await pickup(store, topic)
    assert route is not None
    return route.broker_datas[index].broker_addrs


async def register_single_topic(store: RouteStore, broker_name: str, *topics: str) -> None:
    """registerSingleTopicWithBrokerName: REGISTER_TOPIC_IN_NAMESRV, one topic at a time."""
    for topic in topics:
        await store.register_topic(topic, [QueueData(broker_name, 8, 8, 6)])


async def is_topic_config_changed(store: RouteStore, cluster: str, addr: str, dv: DataVersion,
                                  name: str, topic: str) -> bool:
    """RouteInfoManager.isTopicConfigChanged, composed from what RouteStore offers."""
    changed, _ = await store.query_data_version(cluster, addr, dv)
    if changed:
        return True
    read = await store.pickup_route(topic)
    return read is None or all(q.broker_name != name for q in read.route.queue_datas)


async def test_get_all_cluster_info(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    await register_normal(store, BrokerBasicInfo.default_broker().but(
        cluster_name="AnotherCluster", broker_name="AnotherBroker",
        broker_addr=DEFAULT_ADDR_PREFIX + "30911"), "TestTopic1")

    decoded = json.loads(json.dumps((await store.cluster_info()).to_dict()))
    assert {DEFAULT_CLUSTER, "AnotherCluster"} <= set(decoded["clusterAddrTable"])
    table = decoded["brokerAddrTable"]
    assert {DEFAULT_BROKER, "AnotherBroker"} <= set(table)
    addr_list = [table[name]["brokerAddrs"]["0"] for name in (DEFAULT_BROKER, "AnotherBroker")]
    assert set(addr_list) == {DEFAULT_ADDR, DEFAULT_ADDR_PREFIX + "30911"}


async def test_delete_topic(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    await store.delete_topic("TestTopic")
    assert await pickup(store, "TestTopic") is None

    # Same DataVersion: the per-topic check (topic missing) re-creates TestTopic.
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    await register_normal(store, BrokerBasicInfo.default_broker().but(
        cluster_name="AnotherCluster", broker_name="AnotherBroker"), "TestTopic")
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas) == 2

    await store.delete_topic("TestTopic", DEFAULT_CLUSTER)
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas) == 1
    assert route.broker_datas[0].broker_name == "AnotherBroker"


async def test_get_all_topic_list(store: RouteStore) -> None:
    assert await store.all_topics() == []
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic", "TestTopic1",
                          "TestTopic2")
    assert {"TestTopic", "TestTopic1", "TestTopic2"} <= set(await store.all_topics())


async def test_register_broker(store: RouteStore) -> None:
    master = await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    assert master.ha_server_addr is None and master.master_addr is None

    slave = BrokerBasicInfo.default_broker().but(broker_id=1, broker_addr=SLAVE_ADDR,
                                                 ha_addr=DEFAULT_ADDR_PREFIX + "40911")
    result = await register_normal(store, slave, "TestTopic")
    assert result.ha_server_addr == DEFAULT_ADDR_PREFIX + "20911"
    assert result.master_addr == DEFAULT_ADDR


async def test_unregister_broker(store: RouteStore) -> None:
    topics = ("TestTopic", "TestTopic1", "TestTopic2")
    await register_normal(store, BrokerBasicInfo.default_broker(), *topics)
    assert await unregister(store, BrokerBasicInfo.default_broker()) == 1  # the group went too
    for topic in topics:
        assert await pickup(store, topic) is None

    # Java: submitUnRegisterBrokerRequest + await the batch queue. nsfleet: the same call.
    await register_normal(store, BrokerBasicInfo.default_broker(), *topics)
    await unregister(store, BrokerBasicInfo.default_broker())
    for topic in topics:
        assert await pickup(store, topic) is None


async def test_register_slave_broker(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    assert MASTER_ID in await addrs_of(store, "TestTopic")
    await register_normal(store, BrokerBasicInfo.slave_broker(), "TestTopic")
    assert await addrs_of(store, "TestTopic") == {
        0: MASTER_ADDR, 1: SLAVE_ADDR}


async def test_create_new_topic(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    await register_normal(store, BrokerBasicInfo.slave_broker(), "TestTopic")
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic", "TestTopic1")
    assert await addrs_of(store, "TestTopic1") == {
        0: MASTER_ADDR, 1: SLAVE_ADDR}


async def _switch_broker_role(store: RouteStore, *, channel_destroy: bool) -> None:
    master = BrokerBasicInfo.default_broker().but(enable_acting_master=False)
    slave = BrokerBasicInfo.slave_broker().but(enable_acting_master=False)
    await register_normal(store, master, "TestTopic", channel="w:master")
    await register_normal(store, slave, "TestTopic")

    # Master down.
    if channel_destroy:
        # Java: onChannelDestroy(masterChannel). nsfleet: the master's only connection closed.
        assert await destroy_channel(store, master, "w:master") == 0
    else:
        await unregister(store, master)
    assert await addrs_of(store, "TestTopic") == {1: slave.broker_addr}

    # Switch slave to master.
    slave = slave.but(broker_id=0).next_version()
    await register_normal(store, slave, "TestTopic")
    assert await addrs_of(store, "TestTopic") == {0: slave.broker_addr}

    # Old master switches to slave.
    master = master.but(broker_id=1).next_version()
    await register_normal(store, master, "TestTopic")
    assert await addrs_of(store, "TestTopic") == {
        0: SLAVE_ADDR, 1: MASTER_ADDR}


async def test_switch_broker_role(store: RouteStore) -> None:
    await _switch_broker_role(store, channel_destroy=False)


async def test_switch_broker_role_channel_destroy(store: RouteStore) -> None:
    await _switch_broker_role(store, channel_destroy=True)


async def test_unregister_slave_broker(store: RouteStore) -> None:
    slave = BrokerBasicInfo.slave_broker()
    for _ in range(2):  # sync unregister, then the (here equally synchronous) batch one
        await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
        await register_normal(store, slave, "TestTopic")
        assert await unregister(store, slave) == 0
        route = await pickup(store, "TestTopic")
        assert route is not None and len(route.broker_datas) == 1
        assert route.broker_datas[0].broker_addrs[0] == BrokerBasicInfo.default_broker().broker_addr


async def test_unregister_master_broker(store: RouteStore) -> None:
    master = BrokerBasicInfo.default_broker().but(enable_acting_master=True)
    slave = BrokerBasicInfo.slave_broker()
    await register_normal(store, master, "TestTopic")
    await register_normal(store, slave, "TestTopic")
    await unregister(store, master)

    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas) == 1
    assert route.broker_datas[0].broker_addrs[0] == slave.broker_addr  # the acting master
    assert len(route.queue_datas) == 1
    assert route.queue_datas[0].perm == PERM_READ


async def test_unregister_master_broker_old_version(store: RouteStore) -> None:
    master = BrokerBasicInfo.default_broker().but(enable_acting_master=False)
    slave = BrokerBasicInfo.slave_broker().but(enable_acting_master=False)
    await register_normal(store, master, "TestTopic")
    await register_normal(store, slave, "TestTopic")
    await unregister(store, master)

    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas) == 1
    assert 0 not in route.broker_datas[0].broker_addrs
    assert len(route.queue_datas) == 1
    assert route.queue_datas[0].perm == PERM_READ | PERM_WRITE


async def test_submit_multi_unregister_requests(store: RouteStore) -> None:
    master1 = BrokerBasicInfo.default_broker()
    master2 = BrokerBasicInfo.default_broker().but(broker_name=DEFAULT_BROKER + "1",
                                                   broker_addr=SECOND_ADDR)
    await register_normal(store, master1, "TestTopic1")
    await register_normal(store, master2, "TestTopic2")
    await unregister(store, master1)
    await unregister(store, master2)
    assert await pickup(store, "TestTopic1") is None
    assert await pickup(store, "TestTopic2") is None


async def test_is_broker_topic_config_changed(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    _, dv = await store.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, DataVersion())
    assert dv is not None
    assert (await store.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, dv))[0] is False
    newer_ts = DataVersion(dv.counter, dv.timestamp + 1000)
    assert (await store.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, newer_ts))[0] is True
    newer_counter = DataVersion(dv.counter + 1, dv.timestamp)
    assert (await store.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, newer_counter))[0] is True


async def test_is_topic_config_changed(store: RouteStore) -> None:
    info = BrokerBasicInfo.default_broker()
    dv = info.data_version
    assert await is_topic_config_changed(store, DEFAULT_CLUSTER, DEFAULT_ADDR, dv, DEFAULT_BROKER,
                                         "TestTopic")
    await register_normal(store, info, "TestTopic")
    assert not await is_topic_config_changed(store, DEFAULT_CLUSTER, DEFAULT_ADDR, dv,
                                             DEFAULT_BROKER, "TestTopic")
    assert await is_topic_config_changed(store, DEFAULT_CLUSTER, DEFAULT_ADDR, dv, DEFAULT_BROKER,
                                         "TestTopic1")


async def test_query_broker_topic_config(store: RouteStore) -> None:
    info = BrokerBasicInfo.default_broker()
    await register_normal(store, info, "TestTopic")
    _, stored = await store.query_data_version(DEFAULT_CLUSTER, DEFAULT_ADDR, DataVersion())
    assert stored == info.data_version


async def test_wipe_write_perm_of_broker_by_lock(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    route = await pickup(store, "TestTopic")
    assert route is not None and route.queue_datas[0].perm == 6
    await store.wipe_write_perm(DEFAULT_BROKER)
    route = await pickup(store, "TestTopic")
    assert route is not None and route.queue_datas[0].perm == 4


async def test_pickup_topic_route_data(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    data = await pickup(store, "TestTopic")
    assert data is not None and len(data.broker_datas) == 1
    assert data.broker_datas[0].broker_name == DEFAULT_BROKER
    assert data.broker_datas[0].broker_addrs[0] == DEFAULT_ADDR
    assert len(data.queue_datas) == 1
    q = data.queue_datas[0]
    assert (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) == (
        DEFAULT_BROKER, 8, 8, 6)

    # Another group on the same cluster and address.
    await register_normal(store, BrokerBasicInfo.default_broker().but(broker_name="AnotherBroker"),
                          "TestTopic")
    data = await pickup(store, "TestTopic")
    assert data is not None
    assert len(data.broker_datas) == 2 and len(data.queue_datas) == 2
    assert {b.broker_name for b in data.broker_datas} == {DEFAULT_BROKER, "AnotherBroker"}
    assert {q.broker_name for q in data.queue_datas} == {DEFAULT_BROKER, "AnotherBroker"}


async def test_pickup_topic_route_data_with_slave(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    await register_normal(store, BrokerBasicInfo.slave_broker(), "TestTopic")
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas[0].broker_addrs) == 2
    assert is_writeable(route.queue_datas[0].perm)

    await unregister(store, BrokerBasicInfo.default_broker())
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas[0].broker_addrs) == 1
    assert not is_writeable(route.queue_datas[0].perm)

    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas[0].broker_addrs) == 2
    assert is_writeable(route.queue_datas[0].perm)


async def test_scan_not_active_broker(store: RouteStore) -> None:
    # Java: a smoke test (scan, register with heartbeatTimeoutMillis=30000, sleep 30 s, scan),
    # showing the timeout is per broker. nsfleet: the sweep runs "as of" a chosen time.
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic")
    assert (await store.sweep()).removed == []
    await register(store, BrokerBasicInfo.default_broker(), normal_topics("TestTopic"),
                   timeout_millis=30_000)
    sec, usec = await store.redis.time()
    now = sec * 1000 + usec // 1000
    assert (await store.sweep(now_ms=now + 29_000)).removed == []
    assert await pickup(store, "TestTopic") is not None
    result = await store.sweep(now_ms=now + 31_000)
    assert result.removed == [(DEFAULT_CLUSTER, DEFAULT_ADDR, DEFAULT_BROKER)]
    assert await pickup(store, "TestTopic") is None
    assert (await store.cluster_info()).broker_addr_table == {}


async def assert_slave_acts_as_master(store: RouteStore, topic: str,
                                      slave: BrokerBasicInfo) -> TopicRouteData:
    """The only live member, a slave, is presented as id 0 and its queues are read-only."""
    route = await pickup(store, topic)
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {MASTER_ID: slave.broker_addr}
    assert not is_writeable(route.queue_datas[0].perm)
    return route


async def test_pickup_partition_order_topic_route_data(store: RouteStore) -> None:
    topic = "PartitionOrderTopicTest"
    slave, master = BrokerBasicInfo.slave_broker(), BrokerBasicInfo.default_broker()

    # Case 1: only the slave (a prime slave: its queue data is written without the write perm).
    await register(store, slave, order_topics(topic))
    route = await assert_slave_acts_as_master(store, topic, slave)
    await unregister(store, slave)

    # Case 2: slave, master, then the master unregistered.
    await register(store, slave, order_topics(topic))
    await register(store, master, order_topics(topic))
    await unregister(store, master)
    route = await assert_slave_acts_as_master(store, topic, slave)
    await unregister(store, slave)

    # Case 3: two groups on the same addresses; the first group's master is unregistered. The
    # live rows are shared, as brokerLiveTable is keyed by (cluster, addr), and belong to the
    # group that registered last (_ANOTHER): unregistering Default_Broker's master removes the
    # address from Default_Broker only, so _ANOTHER's master stays live and routed.
    await register(store, slave, order_topics(topic))
    await register(store, master, order_topics(topic))
    master1 = master.but(broker_name=DEFAULT_BROKER + "_ANOTHER")
    slave1 = slave.but(broker_name=DEFAULT_BROKER + "_ANOTHER")
    await register(store, master1, order_topics(topic))
    await register(store, slave1, order_topics(topic))
    route = await pickup(store, topic)
    assert route is not None and len(route.broker_datas) == 2 and len(route.queue_datas) == 2

    await unregister(store, master)
    route = await pickup(store, topic)
    assert route is not None and len(route.broker_datas) == 2 and len(route.queue_datas) == 2
    by_size = {len(b.broker_addrs): b.broker_addrs for b in route.broker_datas}
    assert by_size == {1: {MASTER_ID: slave.broker_addr},
                       2: {MASTER_ID: master1.broker_addr, slave1.broker_id: slave1.broker_addr}}


async def test_pickup_global_order_topic_route_data(store: RouteStore) -> None:
    topic = "GlobalOrderTopicTest"
    slave, master = BrokerBasicInfo.slave_broker(), BrokerBasicInfo.default_broker()

    await register(store, slave, global_order_topics(topic))
    route = await assert_slave_acts_as_master(store, topic, slave)
    await unregister(store, slave)

    # Case 2: Java re-asserts on the stale route object of case 1; here the route is read again,
    # which is the stronger check (and gives the same answer).
    await register(store, slave, global_order_topics(topic))
    await register(store, master, global_order_topics(topic))
    await unregister(store, master)
    route = await assert_slave_acts_as_master(store, topic, slave)
    assert route.queue_datas[0].read_queue_nums == 1


async def test_register_only_slave_broker(store: RouteStore) -> None:
    topic = "TestTopic"
    slave, master = BrokerBasicInfo.slave_broker(), BrokerBasicInfo.default_broker()

    await register_normal(store, slave, topic)
    route = await pickup(store, topic)
    assert route is not None and not is_writeable(route.queue_datas[0].perm)
    await unregister(store, slave)

    await register_normal(store, master, topic)
    await register_normal(store, slave, topic)
    route = await pickup(store, topic)
    assert route is not None and is_writeable(route.queue_datas[0].perm)

    await unregister(store, master)
    route = await pickup(store, topic)
    assert route is not None and not is_writeable(route.queue_datas[0].perm)

    await register_normal(store, master, topic)
    route = await pickup(store, topic)
    assert route is not None and is_writeable(route.queue_datas[0].perm)


async def test_on_channel_destroy(store: RouteStore) -> None:
    # nsfleet: onChannelDestroy(channel) = the broker forgets that connection, and goes when no
    # other connection it registered over is open.
    info = BrokerBasicInfo.default_broker()
    await register_normal(store, info, "TestTopic", "TestTopic1", channel="w:1")
    assert await destroy_channel(store, info, "w:1") == 1
    assert await pickup(store, "TestTopic") is None
    assert await pickup(store, "TestTopic1") is None

    master = BrokerBasicInfo.default_broker().but(enable_acting_master=False)
    slave = BrokerBasicInfo.slave_broker().but(enable_acting_master=False)
    await register_normal(store, master, "TestTopic", channel="w:2")
    await register_normal(store, slave, "TestTopic", channel="w:3")
    assert await addrs_of(store, "TestTopic") == {0: master.broker_addr, 1: slave.broker_addr}

    # A stale channel (the first registration's) no longer carries the broker: nothing happens.
    assert await destroy_channel(store, master, "w:1") == -1
    assert await addrs_of(store, "TestTopic") == {0: master.broker_addr, 1: slave.broker_addr}

    await destroy_channel(store, master, "w:2")
    assert await addrs_of(store, "TestTopic") == {1: slave.broker_addr}

    await destroy_channel(store, slave, "w:3")
    assert await pickup(store, "TestTopic") is None


async def test_a_broker_on_two_connections_stays_until_the_last_closes(
        store: RouteStore) -> None:
    """A fleet is not one Java process: a broker registers over a connection to every worker.
    Closing one keeps it; closing the last removes it; a dead worker's connections (no
    presence key) count as closed."""
    info = BrokerBasicInfo.default_broker()
    await store.mark_worker_alive("a", 60_000)
    await store.mark_worker_alive("b", 60_000)
    await register_normal(store, info, "TestTopic", channel="a:1")
    await register_normal(store, info, "TestTopic", channel="b:1")
    assert await destroy_channel(store, info, "a:1") == -1
    assert await pickup(store, "TestTopic") is not None
    await register_normal(store, info, "TestTopic", channel="a:2")  # reconnected to a
    await store.redis.delete(store.keys.worker("a"))  # worker a died without a word
    assert await destroy_channel(store, info, "b:1") == 1
    assert await pickup(store, "TestTopic") is None


async def test_on_channel_destroy_by_broker_info(store: RouteStore) -> None:
    # Java: onChannelDestroy(BrokerAddrInfo(cluster, addr)) finds the group and id the address is
    # registered under, then unregisters it. nsfleet: the live row names them.
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic", "TestTopic1")
    [live] = [b for b in await store.live_brokers()
              if (b.cluster, b.broker_addr) == (DEFAULT_CLUSTER, DEFAULT_ADDR)]
    await store.unregister_broker(live.cluster, live.broker_addr, live.broker_name)
    assert await pickup(store, "TestTopic") is None
    assert await pickup(store, "TestTopic1") is None


async def test_keep_topic_with_broker_registration(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic", "TestTopic1")
    assert await pickup(store, "TestTopic") is not None
    assert await pickup(store, "TestTopic1") is not None
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic1")
    assert await pickup(store, "TestTopic") is not None
    assert await pickup(store, "TestTopic1") is not None


async def test_delete_topic_with_broker_registration(store: RouteStore) -> None:
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic", "TestTopic1",
                          delete_absent=True)
    assert await pickup(store, "TestTopic") is not None
    assert await pickup(store, "TestTopic1") is not None
    await register_normal(store, BrokerBasicInfo.default_broker(), "TestTopic1", delete_absent=True)
    assert await pickup(store, "TestTopic") is None
    assert await pickup(store, "TestTopic1") is not None


async def test_delete_topic_with_broker_registration2(store: RouteStore) -> None:
    master1 = BrokerBasicInfo.default_broker()
    master2 = BrokerBasicInfo.default_broker().but(broker_name=DEFAULT_BROKER + "1",
                                                   broker_addr=SECOND_ADDR)
    await register_normal(store, master1, "TestTopic", "TestTopic1", delete_absent=True)
    await register_normal(store, master2, "TestTopic", "TestTopic1", delete_absent=True)
    for topic in ("TestTopic", "TestTopic1"):
        route = await pickup(store, topic)
        assert route is not None and len(route.broker_datas) == 2

    await register_normal(store, master1, "TestTopic1", delete_absent=True)
    route = await pickup(store, "TestTopic")
    assert route is not None and len(route.broker_datas) == 1
    assert route.broker_datas[0].broker_name == master2.broker_name
    route = await pickup(store, "TestTopic1")
    assert route is not None and len(route.broker_datas) == 2

    await register_normal(store, master2, "TestTopic1", delete_absent=True)
    assert await pickup(store, "TestTopic") is None
    route = await pickup(store, "TestTopic1")
    assert route is not None and len(route.broker_datas) == 2


async def test_register_single_topic_with_broker_registration(store: RouteStore) -> None:
    master1 = BrokerBasicInfo.default_broker()

    # REGISTER_TOPIC_IN_NAMESRV for a group the name server does not know is ignored.
    await register_single_topic(store, master1.broker_name, "TestTopic")
    assert await pickup(store, "TestTopic") is None

    await register_normal(store, master1, "TestTopic", delete_absent=True)
    assert await pickup(store, "TestTopic") is not None
    await register_single_topic(store, master1.broker_name, "TestTopic1")
    assert await pickup(store, "TestTopic1") is not None

    await register_normal(store, master1, "TestTopic", "TestTopic1", delete_absent=True)
    assert await pickup(store, "TestTopic") is not None
    assert await pickup(store, "TestTopic1") is not None

    await register_normal(store, master1, "TestTopic", delete_absent=True)
    assert await pickup(store, "TestTopic") is not None
    assert await pickup(store, "TestTopic1") is None

    await register_single_topic(store, master1.broker_name, "TestTopic1")
    assert await pickup(store, "TestTopic1") is not None
    await unregister(store, master1)
    assert await pickup(store, "TestTopic") is None
    assert await pickup(store, "TestTopic1") is None
