"""RouteInfoManager.registerBroker details and the places where nsfleet deliberately differs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nsfleet.domain.errors import RegistrationRejected
from nsfleet.domain.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    BrokerRegistration,
    DataVersion,
    QueueData,
    TopicConfig,
)
from nsfleet.store import RouteStore
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from tests.support.invariants import dump, orphans

TWO = [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)]
A = BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, "10.0.0.1:10912", enable_acting_master=True,
                       data_version=DataVersion(1, 100, 2), topic_configs=TWO)
B = replace(A, addr="10.0.0.2:10911", ha_server_addr="10.0.0.2:10912")


async def addrs(store: RouteStore, topic: str = "T1") -> dict[int, str]:
    read = await store.pickup_route(topic)
    assert read is not None
    return read.route.broker_datas[0].broker_addrs


async def test_single_topic_registration_of_an_unknown_id_writes_nothing(store: RouteStore) -> None:
    # nsfleet: Java's single-topic guard in RouteInfoManager.registerBroker leaves the cluster
    # entry and an empty BrokerData behind.
    await store.register_broker(replace(A, name="other", addr="10.0.0.9:10911"))
    before = await dump(store.redis, store.keys)
    with pytest.raises(RegistrationRejected):
        await store.register_broker(replace(A, topic_configs=[TopicConfig("T1")]))
    assert await dump(store.redis, store.keys) == before
    assert "g" not in (await store.cluster_info()).broker_addr_table
    # Once the id is known, a single-topic (incremental) registration is accepted.
    await store.register_broker(A)
    await store.register_broker(replace(A, data_version=DataVersion(2, 200, 2),
                                        topic_configs=[TopicConfig("T3", 8, 8, 6)]))
    assert await store.all_topics() == ["T1", "T2", "T3"]


async def test_state_version_fencing(store: RouteStore) -> None:
    await store.register_broker(A)
    await store.register_broker(replace(B, broker_id=1))
    assert await addrs(store) == {0: A.addr, 1: B.addr}

    # B claims id 0 with an older stateVersion than A's: fenced by the stateVersion check of
    # RouteInfoManager.registerBroker. The newcomer's address leaves the group (Java: its live
    # entry goes, and the earlier slave/master switch, which drops the same address under
    # another id, already removed its id-1 entry); nothing else is written.
    result = await store.register_broker(replace(B, data_version=DataVersion(5, 500, 1)))
    assert result.fenced and result.master_addr is None and result.ha_server_addr is None
    assert await addrs(store) == {0: A.addr}
    assert (await store.query_data_version("c1", B.addr, DataVersion()))[1] is None
    assert await orphans(store.redis, store.keys) == []

    # An equal stateVersion takes over (only a strictly greater stored one fences).
    result = await store.register_broker(replace(B, data_version=DataVersion(5, 500, 2)))
    assert not result.fenced
    assert await addrs(store) == {0: B.addr}


async def test_fencing_needs_the_old_address_live(store: RouteStore) -> None:
    await store.register_broker(A)
    await store.sweep(now_ms=2**53, guard_share=0)  # A expired and swept
    await store.register_broker(replace(A, addr="10.0.0.3:10911", broker_id=1))
    result = await store.register_broker(replace(B, data_version=DataVersion(1, 100, 0)))
    assert not result.fenced


async def test_prime_slave_and_old_version_slave(store: RouteStore) -> None:
    # A new-version slave with the lowest id and no master writes its topics, read-only when it
    # may act as master; an old-version slave (no enableActingMaster field) never writes topics.
    old = await store.register_broker(replace(B, broker_id=1, enable_acting_master=None))
    assert old.generation > 0 and await store.all_topics() == []
    await store.unregister_broker("c1", B.addr, "g")
    await store.register_broker(replace(B, broker_id=1))
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 4
    await store.unregister_broker("c1", B.addr, "g")
    await store.register_broker(replace(B, broker_id=1, enable_acting_master=False))
    read = await store.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 6


async def test_slave_learns_master_and_ha_address(store: RouteStore) -> None:
    await store.register_broker(A)
    result = await store.register_broker(replace(B, broker_id=1))
    assert (result.master_addr, result.ha_server_addr) == (A.addr, A.ha_server_addr)
    # No master live row, no master address (Java: the master's BrokerLiveInfo must exist).
    await store.unregister_broker("c1", A.addr, "g")
    result = await store.register_broker(replace(B, broker_id=1))
    assert (result.master_addr, result.ha_server_addr) == (None, None)


async def test_filter_servers(store: RouteStore) -> None:
    await store.register_broker(replace(A, filter_server_list=["10.0.0.7:7000", "10.0.0.8:7000"]))
    read = await store.pickup_route("T1")
    assert read is not None
    assert read.route.filter_server_table == {A.addr: ["10.0.0.7:7000", "10.0.0.8:7000"]}
    await store.register_broker(replace(A, filter_server_list=None))  # no list: kept
    assert (await store.pickup_route("T1")).route.filter_server_table  # type: ignore[union-attr]
    await store.register_broker(replace(A, filter_server_list=[]))  # empty list: removed
    assert (await store.pickup_route("T1")).route.filter_server_table == {}  # type: ignore[union-attr]


async def test_an_address_two_groups_list_shows_the_later_groups_filter_servers(
        store: RouteStore) -> None:
    """One address registered in two groups under two clusters, each with its own filter
    servers: the route shows the list of the group later by name (Java puts one entry per
    member, group after group), whatever order the topic's hash holds the groups in (here the
    later group's row was written first)."""
    shared = replace(A, cluster="c2", name="z", enable_acting_master=False,
                     filter_server_list=["10.0.0.9:7000"])
    await store.register_broker(shared)
    await store.register_broker(replace(A, name="a", enable_acting_master=False,
                                        filter_server_list=["10.0.0.7:7000"]))
    read = await store.pickup_route("T1")
    assert read is not None and [b.broker_name for b in read.route.broker_datas] == ["a", "z"]
    assert read.route.filter_server_table == {A.addr: ["10.0.0.9:7000"]}


async def test_order_topic_config_and_kv_table(store: RouteStore) -> None:
    assert (await store.register_broker(A)).kv_table is None  # the namespace does not exist
    await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "g:8")
    assert (await store.register_broker(A)).kv_table == {"T1": "g:8"}
    assert (await store.register_broker(A, return_order_conf=False)).kv_table is None
    assert (await store.pickup_route("T1", order_conf=True)).route.order_topic_conf == "g:8"  # type: ignore[union-attr]
    assert (await store.pickup_route("T1")).route.order_topic_conf is None  # type: ignore[union-attr]
    assert (await store.pickup_route("T2", order_conf=True)).route.order_topic_conf is None  # type: ignore[union-attr]


async def test_live_brokers_and_member_group(store: RouteStore) -> None:
    await store.register_broker(replace(A, zone_name="z1"))
    await store.register_broker(replace(B, broker_id=1, heartbeat_timeout_millis=10_000))
    live = {b.broker_addr: b for b in await store.live_brokers()}
    assert live[A.addr].heartbeat_timeout_millis == DEFAULT_HEARTBEAT_TIMEOUT_MS
    assert live[B.addr].heartbeat_timeout_millis == 10_000
    a = live[A.addr]
    assert (a.broker_name, a.broker_id, a.zone_name) == ("g", 0, "z1")
    assert live[A.addr].data_version == A.data_version
    group = await store.broker_member_group("any-cluster", "g")  # looked up by name only
    assert (group.cluster, group.broker_addrs) == ("any-cluster", {0: A.addr, 1: B.addr})
    assert (await store.broker_member_group("c1", "nope")).broker_addrs == {}


async def test_register_topic_rules(store: RouteStore) -> None:
    await store.register_broker(A)
    # New topic: every group must be known, or nothing is written.
    assert await store.register_topic("N", [QueueData("g", 4, 4, 6), QueueData("x", 4, 4, 6)]) == 0
    assert await store.pickup_route("N") is None
    assert await store.register_topic("N", []) == 0
    # Existing topic: rows are written in order up to the first unknown group.
    await store.register_broker(replace(B, name="h"))
    assert await store.register_topic("T1", [QueueData("h", 2, 2, 4), QueueData("x", 4, 4, 6),
                                             QueueData("g", 1, 1, 2)]) == 1
    read = await store.pickup_route("T1")
    assert read is not None
    assert {q.broker_name: q.perm for q in read.route.queue_datas} == {"g": 6, "h": 4}


async def test_delete_topic_by_unknown_cluster_is_a_no_op(store: RouteStore) -> None:
    await store.register_broker(A)
    assert await store.delete_topic("T1", "no-such-cluster") == 0
    assert await store.delete_topic("missing") == 0
    assert await store.pickup_route("T1") is not None


async def test_unregister_of_an_unknown_broker(store: RouteStore) -> None:
    await store.register_broker(A)
    before = await dump(store.redis, store.keys)
    assert await store.unregister_broker("c1", "10.9.9.9:1", "nope") == 0
    assert await store.unregister_broker("c1", A.addr, "g", closed_connection="w:1") == -1
    assert await dump(store.redis, store.keys) == before


async def test_unregister_naming_another_group_keeps_the_live_row(store: RouteStore) -> None:
    # The address registered in group g, then in group h (same cluster). Java's unregister of
    # (c1, addr, g) drops the live entry h depends on. nsfleet removes the address from g only:
    # the live row belongs to h's registration, which stays routable and expirable.
    await store.register_broker(A)
    await store.register_broker(replace(A, name="h", topic_configs=[TopicConfig("H1"),
                                                                     TopicConfig("H2")]))
    assert await store.unregister_broker("c1", A.addr, "g") == 1
    assert await addrs(store, "H1") == {0: A.addr}
    assert [b.broker_name for b in await store.live_brokers()] == ["h"]
    assert (await store.sweep(now_ms=2**53, guard_share=0)).removed == [("c1", A.addr, "h")]
    assert await store.all_topics() == []
    assert await orphans(store.redis, store.keys) == []


async def test_removed_group_leaves_every_cluster(store: RouteStore) -> None:
    # brokerName is global; the same name registered under two clusters is listed in both.
    await store.register_broker(A)
    await store.register_broker(replace(B, cluster="c2", broker_id=1))
    assert (await store.cluster_info()).cluster_addr_table == {"c1": ["g"], "c2": ["g"]}
    await store.unregister_broker("c2", B.addr, "g")
    assert await store.unregister_broker("c1", A.addr, "g") == 1
    # nsfleet: Java removes the name from the cluster the last unregister names only, leaving
    # a cluster that lists a group that no longer exists.
    assert (await store.cluster_info()).cluster_addr_table == {}
    assert await orphans(store.redis, store.keys) == []


async def test_lost_master_leaves_queue_data_read_only_until_rewritten(store: RouteStore) -> None:
    # RouteInfoManager.unRegisterBroker (cleanTopicByUnRegisterRequests): a group with
    # enableActingMaster that loses its master gets PERM_WRITE cleared on its stored queue data.
    # A returning master rewrites the topics it registers (its DataVersion is unknown again);
    # the others stay read-only, as in Java.
    await store.register_broker(A)
    await store.register_broker(replace(B, broker_id=1))
    await store.unregister_broker("c1", A.addr, "g")
    await store.register_broker(replace(A, topic_configs=[TopicConfig("T1", 8, 8, 6),
                                                          TopicConfig("T3", 8, 8, 6)]))
    perms = {}
    for topic in ("T1", "T2", "T3"):
        read = await store.pickup_route(topic)
        assert read is not None and read.route.broker_datas[0].broker_addrs[0] == A.addr
        perms[topic] = read.route.queue_datas[0].perm
    assert perms == {"T1": 6, "T2": 4, "T3": 6}


async def test_filter_lists_are_read_only_while_a_broker_has_one(store: RouteStore) -> None:
    """P:idx:filtered names the brokers with filter servers (a route reads the lists only while
    it is not empty); it follows step 12 and the removal cascade."""
    await store.register_broker(replace(A, filter_server_list=["10.0.0.7:7000"]))
    assert await store.redis.smembers(store.keys.filtered) == {f"c1\t{A.addr}"}
    await store.register_broker(replace(A, filter_server_list=None))  # no list: kept
    assert await store.redis.smembers(store.keys.filtered) == {f"c1\t{A.addr}"}
    await store.unregister_broker("c1", A.addr, "g")
    assert await store.redis.exists(store.keys.filtered) == 0
    await store.register_broker(replace(A, filter_server_list=["10.0.0.7:7000"]))
    await store.register_broker(replace(A, filter_server_list=[]))
    assert await store.redis.exists(store.keys.filtered) == 0
    assert (await store.pickup_route("T1")).route.filter_server_table == {}  # type: ignore[union-attr]
    assert await orphans(store.redis, store.keys) == []


async def test_route_groups_follow_members_and_meta(store: RouteStore) -> None:
    """P:idx:route-groups holds what a route shows of each group, rewritten by every change of
    its members, their clusters and its meta (the invariants check the entry against the group
    row, members and member clusters); a group without an entry (written before the index
    existed) routes the same, computed on the read."""
    await store.register_broker(A)
    await store.register_broker(replace(B, broker_id=1, cluster="c2"))
    entry = await store.redis.hget(store.keys.route_groups, "g")
    assert entry == f"c1\ttrue\t\n0\t{A.addr}\tc1\n1\t{B.addr}\tc2"
    assert await orphans(store.redis, store.keys) == []
    before = (await store.pickup_route("T1")).route  # type: ignore[union-attr]
    assert before.broker_datas[0].broker_addrs == {0: A.addr, 1: B.addr}
    await store.redis.hdel(store.keys.route_groups, "g")
    assert (await store.pickup_route("T1")).route == before  # type: ignore[union-attr]
    await store.register_broker(replace(A, zone_name="z1"))  # rewritten by the next registration
    assert (await store.redis.hget(store.keys.route_groups, "g")).startswith("c1\ttrue\tz1\n")  # type: ignore[union-attr]
    await store.unregister_broker("c2", B.addr, "g")
    assert await store.redis.hget(store.keys.route_groups, "g") == f"c1\ttrue\tz1\n0\t{A.addr}\tc1"
    assert await orphans(store.redis, store.keys) == []
    await store.unregister_broker("c1", A.addr, "g")
    assert await store.redis.exists(store.keys.route_groups) == 0
    assert await store.pickup_route("T1") is None


async def test_a_group_registered_before_the_route_index_gets_its_entry(store: RouteStore) -> None:
    """After an upgrade (docs/helm.md): a group with no P:idx:route-groups entry, its filter list
    missing from P:idx:filtered, still routes (without its filter servers) and has both written
    back by its next registration, an unchanged one (the few-command path) included."""
    reg = replace(A, filter_server_list=["10.0.0.7:7000"])
    await store.register_broker(reg)
    entry = await store.redis.hget(store.keys.route_groups, "g")
    await store.redis.delete(store.keys.route_groups, store.keys.filtered)
    read = await store.pickup_route("T1")
    assert read is not None and read.route.filter_server_table == {}  # flags lost, lists kept
    await store.register_broker(reg)  # unchanged: the few-command path
    assert await store.redis.hget(store.keys.route_groups, "g") == entry
    assert await store.redis.smembers(store.keys.filtered) == {f"c1\t{A.addr}"}
    read = await store.pickup_route("T1")
    assert read is not None and read.route.filter_server_table == {A.addr: ["10.0.0.7:7000"]}
    assert await orphans(store.redis, store.keys) == []
