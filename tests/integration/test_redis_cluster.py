"""RouteStore on a Redis Cluster: three masters started here on free loopback ports
(tests/support/redis_cluster.py). Every key of a namespace carries the ``{<ns>}`` hash tag, so
each script runs on the node owning that slot; two namespaces land on different nodes.

Skipped only outside CI when the cluster cannot be started; in CI (``$CI`` set) it must run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.cluster import key_slot

from nsfleet.domain.errors import StoreUnavailable
from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.redis_conn import POOL_SIZE, UnsuitableRedis, check_server, connect
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from nsfleet.store.change_feed import Change, Subscription
from nsfleet.store.history import HistoryEntry
from nsfleet.store.keys import ORDER_TOPIC_CONFIG, Keys
from tests.support.invariants import orphans
from tests.support.redis_cluster import start_cluster


@pytest.fixture(scope="module")
def cluster_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    except Exception as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no Redis Cluster here: {exc}")
    yield cluster.nodes
    cluster.stop()


@pytest.fixture
async def cluster(cluster_nodes: list[RedisServer]) -> AsyncIterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster_nodes[0].port, decode_responses=True)
    await client.initialize()
    await client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield client
    await client.aclose()


MASTER = BrokerRegistration("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                            enable_acting_master=True, data_version=DataVersion(1, 100),
                            topic_configs=[TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)],
                            filter_server_list=["10.0.0.5:7000"])
SLAVE = BrokerRegistration("c1", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912",
                           enable_acting_master=True, data_version=DataVersion(1, 100),
                           topic_configs=MASTER.topic_configs)


def _namespaces_on_two_nodes(cluster: RedisCluster) -> tuple[str, str]:
    first = "alpha"
    node = cluster.get_node_from_key(Keys(first).prefix)
    for candidate in ("beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"):
        if cluster.get_node_from_key(Keys(candidate).prefix) != node:
            return first, candidate
    raise AssertionError("all candidate namespaces hash to one node")


async def test_route_store_runs_on_a_cluster(cluster: RedisCluster) -> None:
    ns_a, ns_b = _namespaces_on_two_nodes(cluster)
    store = RouteStore(cluster, ns_a)
    await store.load_scripts()

    master = await store.register_broker(MASTER)
    slave = await store.register_broker(SLAVE, connection="w:1")
    assert (slave.master_addr, slave.ha_server_addr) == (MASTER.addr, MASTER.ha_server_addr)
    assert slave.generation == master.generation + 1
    read = await store.pickup_route("T1")
    assert read is not None
    assert read.route.broker_datas[0].broker_addrs == {0: MASTER.addr, 1: SLAVE.addr}
    assert read.route.filter_server_table == {MASTER.addr: ["10.0.0.5:7000"]}
    info = await store.cluster_info()
    assert info.cluster_addr_table == {"c1": ["broker-a"]}
    assert await store.all_topics() == ["T1", "T2"]
    assert await store.topic_list("cluster", "c1") == ["T1", "T2"]
    assert await store.heartbeat("c1", MASTER.addr)
    assert await store.query_data_version("c1", MASTER.addr, MASTER.data_version) == (
        False, MASTER.data_version)
    assert {b.broker_addr for b in await store.live_brokers()} == {MASTER.addr, SLAVE.addr}
    assert await store.unknown_groups(["broker-a", "nobody", "broker-a"]) == ["nobody"]
    assert await store.register_topic("T3", [QueueData("broker-a", 4, 4, 6)]) == 1
    assert await store.wipe_write_perm("broker-a") == 3
    assert await store.add_write_perm("broker-a") == 3
    assert await store.delete_topic("T3") == 1
    assert await store.rev() > 0

    # KV, including the namespace listing (a pipeline of two keys in the namespace's slot).
    assert await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "broker-a:8")
    assert await store.kv_get(ORDER_TOPIC_CONFIG, "T1") == "broker-a:8"
    assert await store.kv_list(ORDER_TOPIC_CONFIG) == {"T1": "broker-a:8"}
    assert await store.kv_list("missing") is None
    assert (await store.register_broker(MASTER)).kv_table == {"T1": "broker-a:8"}
    assert (await store.pickup_route("T1", order_conf=True)).route.order_topic_conf == "broker-a:8"  # type: ignore[union-attr]
    assert await store.kv_delete(ORDER_TOPIC_CONFIG, "T1")
    assert await store.kv_list(ORDER_TOPIC_CONFIG) == {}

    # The live count per cluster (the alerting gauge) reads the deadlines on the Redis clock.
    assert await store.live_count_by_cluster() == {"c1": 2}

    # A closed connection (another one, then the slave's own) and the sweep.
    assert await store.unregister_broker("c1", SLAVE.addr, "broker-a",
                                         closed_connection="w:2") == -1
    assert await store.unregister_broker("c1", SLAVE.addr, "broker-a",
                                         closed_connection="w:1") == 0
    sec, usec = await cluster.time(target_nodes=cluster.get_node_from_key(store.keys.prefix))
    result = await store.sweep(now_ms=sec * 1000 + usec // 1000 + 10**9, guard_share=0)
    assert result.removed == [("c1", MASTER.addr, "broker-a")]
    assert await store.pickup_route("T1") is None
    assert (await store.cluster_info()).cluster_addr_table == {}
    assert await orphans(cluster, store.keys) == []

    # A second namespace lives on another node and is independent of the first.
    other = RouteStore(cluster, ns_b)
    await other.register_broker(MASTER)
    assert key_slot(other.keys.prefix.encode()) != key_slot(store.keys.prefix.encode())
    assert await other.all_topics() == ["T1", "T2"]
    assert await store.all_topics() == []
    assert await orphans(cluster, other.keys) == []
    assert await other.unregister_broker("c1", MASTER.addr, "broker-a") == 1
    assert await orphans(cluster, other.keys) == []


async def test_the_console_reads_run_on_a_cluster(cluster: RedisCluster) -> None:
    """The fleet's change history (a stream, several entries in one pipeline) and the topic
    summary rows (a pipeline of SMEMBERS and MGET, then topic_summary.lua) in the namespace's
    slot."""
    store = RouteStore(cluster, "console")
    await store.load_scripts()
    await store.register_broker(MASTER)
    await store.kv_put(ORDER_TOPIC_CONFIG, "T2", "broker-a:8")
    store.history.worker = "w1"
    await store.history.append([HistoryEntry("kv put", {"key": "T2"})])
    await store.history.append([HistoryEntry("broker expired", {"n": n}) for n in range(3)])
    assert [(c.action, c.worker) for c in await store.history.recent(2)] == [
        ("broker expired", "w1"), ("broker expired", "w1")]
    index = await store.topic_summary_rows.index()
    assert index.topics == ["T1", "T2"]
    assert index.names == {"c1", "broker-a"} and index.order_conf == {"T2": "broker-a:8"}
    rows = await store.topic_summary_rows.rows(["T1", "T2"])
    assert [(r.topic, r.queues) for r in rows] == [
        (t, (("broker-a", 8, 8, 6, 0),)) for t in ("T1", "T2")]


async def test_every_key_of_a_namespace_is_in_one_slot(cluster: RedisCluster) -> None:
    store = RouteStore(cluster, "slots")
    await store.register_broker(MASTER)
    await store.register_broker(SLAVE)
    await store.kv_put("ns:1", "k%", "v")
    keys = [k async for k in cluster.scan_iter(match=f"{store.keys.prefix}:*")]
    assert len(keys) > 15
    assert {key_slot(k.encode()) for k in keys} == {key_slot(store.keys.prefix.encode())}


async def test_check_server_asks_every_master(cluster: RedisCluster) -> None:
    assert (await check_server(cluster))["cluster_masters"] == "3"
    node = cluster.get_primaries()[1]
    await cluster.config_set("maxmemory-policy", "allkeys-lru", target_nodes=node)
    try:
        with pytest.raises(UnsuitableRedis, match=f"cluster node {node.name}"):
            await check_server(cluster)
    finally:
        await cluster.config_set("maxmemory-policy", "noeviction", target_nodes=node)


async def test_a_burst_past_the_pool_waits_instead_of_failing(
        cluster_nodes: list[RedisServer]) -> None:
    client = connect(f"redis+cluster://127.0.0.1:{cluster_nodes[0].port}")
    assert isinstance(client, RedisCluster)
    # As a worker does (check_server) before any traffic: redis-py's first layout read,
    # raced by many commands at once, may break connections being opened.
    await client.initialize()
    try:
        # Each BLPOP holds its connection 0.1 s, on the one node owning the {burst} slot.
        burst = [client.execute_command("BLPOP", "burst:{b}", "0.1") for _ in range(4 * POOL_SIZE)]
        assert await asyncio.gather(*burst) == [None] * (4 * POOL_SIZE)
        node = client.get_node_from_key("burst:{b}")
        assert 0 < len(node._connections) <= 2 * POOL_SIZE
    finally:
        await client.aclose()


async def _changes_until(subscription: Subscription, done: Callable[[Change], bool]) -> None:
    for _ in range(50):
        change = await subscription.next(0.1)
        if change is not None and done(change):
            return
    raise AssertionError("no such change message within 5 s")


async def _move_slot(cluster: RedisCluster, slot: int, source: ClusterNode,
                     target: ClusterNode) -> None:
    """Move an empty slot the way redis-cli --cluster reshard does."""
    ids = {n.name: (await cluster.cluster_myid(n)) for n in (source, target)}
    await cluster.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source.name],
                                  target_nodes=target)
    await cluster.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target.name],
                                  target_nodes=source)
    for node in (target, source):
        await cluster.execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target.name],
                                      target_nodes=node)


async def test_the_change_feed_follows_the_namespace_master(
        cluster: RedisCluster, cluster_nodes: list[RedisServer]) -> None:
    client = connect(f"redis+cluster://127.0.0.1:{cluster_nodes[0].port}")
    try:
        store = RouteStore(client, "feed")  # type: ignore[arg-type]
        await store.load_scripts()
        async with store.changes.subscribe() as subscription:
            await store.register_broker(MASTER)
            await _changes_until(subscription, lambda c: c.all_routes and c.rev > 0)
            await store.changes.publish_sync("token")
            await _changes_until(subscription, lambda c: c.sync_token == "token")

        # A namespace whose slot moves to another master (an empty one: moving keys is
        # redis-cli's job): its subscription ends once the client learns of the move.
        moving = RouteStore(client, "moving")  # type: ignore[arg-type]
        slot = key_slot(moving.keys.prefix.encode())
        source = cluster.get_node_from_key(moving.keys.prefix)
        target = next(n for n in cluster.get_primaries() if n.name != source.name)
        async with moving.changes.subscribe() as subscription:
            assert await subscription.next(0.1) is None
            await _move_slot(cluster, slot, source, target)
            try:
                await moving.rev()  # MOVED: the client learns the new owner
                with pytest.raises(StoreUnavailable, match="moved"):
                    await subscription.next(0.1)
            finally:
                await _move_slot(cluster, slot, target, source)
        async with moving.changes.subscribe() as subscription:
            await moving.changes.publish_sync("back")
            await _changes_until(subscription, lambda c: c.sync_token == "back")
    finally:
        await client.aclose()
