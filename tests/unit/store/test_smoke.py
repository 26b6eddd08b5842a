from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore


async def test_register_route_unregister(store: RouteStore) -> None:
    reg = BrokerRegistration("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                             enable_acting_master=False, data_version=DataVersion(1, 100, 0),
                             topic_configs=[TopicConfig("T1", 4, 4, 6), TopicConfig("T2", 8, 8, 6)])
    res = await store.register_broker(reg)
    assert res.master_addr is None and res.generation == 1
    route = await store.pickup_route("T1")
    assert route is not None
    assert route.route.to_dict()["brokerDatas"][0]["brokerAddrs"] == {0: "10.0.0.1:10911"}
    slave = BrokerRegistration("c1", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912",
                               enable_acting_master=False, data_version=DataVersion(1, 100, 0),
                               topic_configs=[TopicConfig("T1", 4, 4, 6), TopicConfig("T2")])
    res = await store.register_broker(slave)
    assert res.master_addr == "10.0.0.1:10911" and res.ha_server_addr == "10.0.0.1:10912"
    info = await store.cluster_info()
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911",
                                                               1: "10.0.0.2:10911"}
    assert await store.all_topics() == ["T1", "T2"]
    assert await store.unregister_broker("c1", "10.0.0.1:10911", "broker-a") == 0
    assert await store.unregister_broker("c1", "10.0.0.2:10911", "broker-a") == 1
    assert await store.pickup_route("T1") is None
    assert await store.all_topics() == []
    assert (await store.cluster_info()).cluster_addr_table == {}
