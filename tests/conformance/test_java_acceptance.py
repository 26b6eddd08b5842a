"""Issue 12: accept everything the Java NameServer (5.3.x) accepts, and answer as it answers.

Items 1, 2, 5, 6, 8, 9, 10 and 11 of the issue, each through the RocketMQ remoting protocol
against a real worker on the session's redis-server. Requests are built by
tests/support/remoting_client.py, written from the Java broker and client code (BrokerOuterAPI,
RegisterBrokerBody.encode, RemotingCommand), not from nsfleet's codec. Every test's docstring names
the Java method whose behaviour it checks.

Route bodies for clients of version >= V4_9_4 are standard JSON (ClientRequestProcessor encodes
them with fastjson's BrowserCompatible, QuoteFieldNames and MapSortField: sorted keys, quoted
numeric map keys, no blanks); older clients get fastjson's defaults (numeric map keys bare).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nsfleet.config import Settings
from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import (
    FAQ,
    QUERY_NOT_FOUND,
    ROCKETMQ,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    V4_9_4,
    V4_9_8,
    V5_3_3,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    as_4x,
    dumps_fastjson,
    loads_fastjson,
    running_worker,
)

pytestmark = pytest.mark.redis

# A broker deployed on Kubernetes: its brokerName is a host name, its cluster name has dots.
HOST_NAME = "broker-a.rmq.svc.cluster.local"
HOST_CLUSTER = "rmq-cluster.prod"
ADDR = "10.1.2.3:10911"
HA_ADDR = "10.1.2.3:10912"
LEGACY_CLIENT = 121  # a client older than V4_9_4: fastjson's default encoding


# --- helpers -------------------------------------------------------------------------------------


def standard(obj: Any) -> bytes:
    """What fastjson writes with BrowserCompatible | QuoteFieldNames | MapSortField."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def brokerdata(cluster: str, name: str, addrs: dict[int, str]) -> dict[str, Any]:
    """A BrokerData as fastjson writes it (cluster, brokerName, brokerAddrs,
    enableActingMaster; zoneName is null, so left out). Keys of brokerAddrs stay ints: the
    encoder decides whether they are quoted."""
    return {"brokerAddrs": dict(sorted(addrs.items())), "brokerName": name, "cluster": cluster,
            "enableActingMaster": False}


def route_obj(cluster: str, name: str, addrs: dict[int, str], topic: TopicConf,
              mappings: dict[str, Any] | None = None) -> dict[str, Any]:
    """TopicRouteData of a topic served by one group (RouteInfoManager.pickupTopicRouteData):
    one BrokerData, one QueueData as createAndUpdateQueueData stores it, an empty
    filterServerTable, and topicQueueMappingByBroker only when the topic has mappings."""
    route: dict[str, Any] = {
        "brokerDatas": [brokerdata(cluster, name, addrs)],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": name, "perm": topic.perm, "readQueueNums": topic.read,
                        "topicSysFlag": topic.sys_flag, "writeQueueNums": topic.write}]}
    if mappings is not None:
        route["topicQueueMappingByBroker"] = mappings
    return route


def route_standard(cluster: str, name: str, addrs: dict[int, str], topic: TopicConf,
                   mappings: dict[str, Any] | None = None) -> bytes:
    obj = route_obj(cluster, name, addrs, topic, mappings)
    for bd in obj["brokerDatas"]:
        bd["brokerAddrs"] = {str(k): v for k, v in bd["brokerAddrs"].items()}
    return standard(obj)


def cluster_info_bytes(groups: list[dict[str, Any]], clusters: dict[str, list[str]]) -> bytes:
    """GET_BROKER_CLUSTER_INFO's ClusterInfo, fastjson defaults (bare brokerId keys)."""
    return dumps_fastjson({"brokerAddrTable": {g["brokerName"]: g for g in groups},
                           "clusterAddrTable": clusters})


def not_found_remark(topic: str) -> str:
    """ClientRequestProcessor.getRouteInfoByTopic's TOPIC_NOT_EXIST remark."""
    return f"No topic route info in name server for the topic: {topic}{FAQ}"


async def send(client: RemotingClient, cmd: Command) -> Command:
    """Send a prepared request as a request-response call (a fresh opaque, flags kept)."""
    return await client.call(Command(cmd.code, cmd.ext_fields, cmd.body, cmd.version,
                                     flag=cmd.flag))


async def register(client: RemotingClient, cmd: Command) -> Command:
    """REGISTER_BROKER answered as DefaultRequestProcessor.registerBroker answers a plain
    registration: SUCCESS, remark null, the RegisterBrokerResponseHeader's (empty) extFields,
    and no body while the ORDER_TOPIC_CONFIG namespace does not exist."""
    resp = await send(client, cmd)
    assert (resp.code, resp.remark) == (SUCCESS, None), (resp.code, resp.remark)
    assert resp.header_json is not None and resp.header_json["extFields"] == {}
    assert resp.body is None
    return resp


async def route(client: RemotingClient, topic: str, version: int = V5_3_3) -> Command:
    return await client.request(105, {"topic": topic}, version=version)


async def assert_routes(client: RemotingClient, topic: str, expected: bytes,
                        version: int = V5_3_3) -> None:
    got = await route(client, topic, version)
    assert (got.code, got.remark) == (SUCCESS, None), (topic[:60], got.code, got.remark)
    assert got.body == expected, topic[:60]


async def assert_no_route(client: RemotingClient, topic: str) -> None:
    got = await route(client, topic)
    assert (got.code, got.remark, got.body) == (TOPIC_NOT_EXIST, not_found_remark(topic), None)


async def topic_list(client: RemotingClient) -> list[str]:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), TopicList JSON."""
    resp = await client.request(206)
    assert resp.code == SUCCESS
    return list(resp.body_json()["topicList"])


# --- item 1: a host name as brokerName and cluster name -------------------------------------------


async def test_host_name_broker_registers_and_routes(client: RemotingClient) -> None:
    """RouteInfoManager.registerBroker validates neither clusterName nor brokerName: a broker
    named by its Kubernetes host name, in a cluster whose name has dots, registers (SUCCESS) and
    every topic routes (RouteInfoManager.pickupTopicRouteData), including the topic
    TopicConfigManager creates under the brokerName (1 queue, PERM_INHERIT|RW) and the one under
    the cluster name (16 queues, PERM_INHERIT|RW). GET_BROKER_CLUSTER_INFO
    (RouteInfoManager.getAllClusterInfo) and GET_TOPICS_BY_CLUSTER list them by those names."""
    topics = [TopicConf("TopicTest", 8, 8, 6), TopicConf(HOST_NAME, 1, 1, 7),
              TopicConf(HOST_CLUSTER, 16, 16, 7)]
    broker = Broker(HOST_CLUSTER, ADDR, HOST_NAME, 0, HA_ADDR, topics)
    await register(client, broker.register_5x())
    for topic in topics:
        await assert_routes(client, topic.name,
                            route_standard(HOST_CLUSTER, HOST_NAME, {0: ADDR}, topic))
    info = await client.request(106)
    assert (info.code, info.body) == (SUCCESS, cluster_info_bytes(
        [brokerdata(HOST_CLUSTER, HOST_NAME, {0: ADDR})], {HOST_CLUSTER: [HOST_NAME]}))
    by_cluster = await client.request(224, {"cluster": HOST_CLUSTER})
    assert by_cluster.code == SUCCESS
    assert sorted(by_cluster.body_json()["topicList"]) == sorted(t.name for t in topics)


# --- item 2: unusual topics are stored as sent; only unstorable ones are dropped, alone -----------

POP_RETRY_V2 = TopicConf("%RETRY%group+TopicTest", 1, 1, 6)  # KeyBuilder.buildPopRetryTopicV2
LONG_255 = TopicConf("Long-" + "x" * 250, 8, 8, 6)
WIDE_2048 = TopicConf("Wide2048", 2048, 2048, 6)
PERM_14 = TopicConf("Priority14", 8, 8, 14)  # PermName.PERM_PRIORITY (8) | READ (4) | WRITE (2)
NORMAL = TopicConf("TopicTest", 4, 4, 6)
UNUSUAL_FIVE = [NORMAL, POP_RETRY_V2, LONG_255, WIDE_2048, PERM_14]


@pytest.mark.parametrize("encoding", ["json", "compressed"])
async def test_unusual_topics_are_stored_and_routed_as_sent(client: RemotingClient,
                                                            encoding: str) -> None:
    """RouteInfoManager.registerBroker / createAndUpdateQueueData store every TopicConfig of the
    registration as sent: no TopicValidator pattern ('+' of a 5.x pop retry topic), no 127
    character limit, no queue-count bound, any perm bits (PERM_PRIORITY). 5 of 5 routed exactly,
    from the JSON body and from the deflate form, and all listed by GET_ALL_TOPIC_LIST."""
    assert len(LONG_255.name) == 255
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", UNUSUAL_FIVE)
    await register(client, broker.register_5x(compressed_body=encoding == "compressed"))
    for topic in UNUSUAL_FIVE:
        await assert_routes(client, topic.name,
                            route_standard("c1", "broker-a", {0: broker.addr}, topic))
    assert sorted(await topic_list(client)) == sorted(t.name for t in UNUSUAL_FIVE)


async def test_int_max_queue_counts_and_perm_are_stored_as_sent(client: RemotingClient) -> None:
    """Queue counts and perm are Java ints, stored as sent up to Integer.MAX_VALUE (only values
    outside an int cannot be stored, README item 6)."""
    extreme = [TopicConf("MaxQueues", 2**31 - 1, 2**31 - 1, 6),
               TopicConf("MaxPerm", 8, 8, 2**31 - 1)]
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", [NORMAL, *extreme])
    await register(client, broker.register_5x())
    for topic in [NORMAL, *extreme]:
        await assert_routes(client, topic.name,
                            route_standard("c1", "broker-a", {0: broker.addr}, topic))


CONTROL_CHAR_TOPIC = "Bad\x01Topic"
UNSTORABLE = {
    "comma": ("Bad,Topic",
              "'Bad,Topic': a topic name with ',', a control character, a leading '@' or "
              "only '*'"),
    "control-character": (CONTROL_CHAR_TOPIC,
                          "'Bad\\x01Topic': a topic name with ',', a control character, a "
                          "leading '@' or only '*'"),
    "4097-characters": ("L" * 4097,
                        "'" + "L" * 200 + "': a topic name longer than 4096 characters"),
}


@pytest.mark.parametrize("kind", sorted(UNSTORABLE))
async def test_unstorable_topic_is_dropped_alone(client: RemotingClient, kind: str) -> None:
    """Java (RouteInfoManager.registerBroker) stores even these names; nsfleet cannot (README,
    "Where nsfleet deliberately differs", item 6) and drops the topic alone: the registration
    answers SUCCESS with the remark "topics not stored: " naming it, the broker and every other
    topic (a 4,096-character name, the limit, among them) are registered and routed, and the
    dropped topic has no route and is not listed."""
    bad, described = UNSTORABLE[kind]
    longest = TopicConf("M" * 4096, 2, 2, 6)
    others = [*UNUSUAL_FIVE, longest]
    topics = [NORMAL, TopicConf(bad, 4, 4, 6), *others[1:]]
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics)
    resp = await send(client, broker.register_5x())
    assert resp.code == SUCCESS
    assert resp.remark == "topics not stored: " + described
    assert resp.header_json is not None and resp.header_json["extFields"] == {}
    for topic in others:
        await assert_routes(client, topic.name,
                            route_standard("c1", "broker-a", {0: broker.addr}, topic))
    await assert_no_route(client, bad)
    assert sorted(await topic_list(client)) == sorted(t.name for t in others)
    info = await client.request(106)
    assert info.body == cluster_info_bytes([brokerdata("c1", "broker-a", {0: broker.addr})],
                                           {"c1": ["broker-a"]})


# --- item 5: one brokerName under two cluster names ----------------------------------------------


async def test_one_broker_name_under_two_clusters(client: RemotingClient) -> None:
    """RouteInfoManager.registerBroker keys brokerAddrTable by brokerName alone: the BrokerData is
    created by the first registrant (here the slave, brokerId 1, cluster "c-slave") with its
    cluster, and the master (brokerId 0, cluster "c-master") is added to its brokerAddrs;
    clusterAddrTable lists the name under both clusters. The route lists both members under the
    first registrant's cluster (pickupTopicRouteData copies the BrokerData), and cluster info
    lists the group in both clusters. A slave learns its master only from a live entry under its
    own cluster name (new BrokerAddrInfo(clusterName, masterAddr)), so it is told none here."""
    name = "broker-x"
    topics = [TopicConf("TwoClusters", 4, 4, 6), TopicConf("TwoClusters2", 8, 8, 6)]
    slave = Broker("c-slave", "10.0.0.2:10911", name, 1, "10.0.0.2:10912", topics)
    master = Broker("c-master", "10.0.0.1:10911", name, 0, "10.0.0.1:10912", topics)
    await register(client, slave.register_5x())
    # A 5.x slave (it sends enableActingMaster) with the group's lowest id is its prime slave and
    # writes the queue data until a master registers.
    await assert_routes(client, "TwoClusters",
                        route_standard("c-slave", name, {1: slave.addr}, topics[0]))
    await register(client, master.register_5x())
    addrs = {0: master.addr, 1: slave.addr}
    for topic in topics:
        await assert_routes(client, topic.name, route_standard("c-slave", name, addrs, topic))
    info = await client.request(106)
    assert (info.code, info.body) == (SUCCESS, cluster_info_bytes(
        [brokerdata("c-slave", name, addrs)], {"c-master": [name], "c-slave": [name]}))
    await register(client, slave.register_5x())  # extFields {}: no masterAddr, no haServerAddr
    await assert_routes(client, "TwoClusters",
                        route_standard("c-slave", name, addrs, topics[0]))


async def test_one_broker_name_under_two_clusters_master_first(client: RemotingClient) -> None:
    """The same with the master first: the BrokerData keeps the master's cluster, the slave
    is added to its brokerAddrs, and both clusters list the name."""
    topics = [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)]
    master = Broker("cY", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics)
    slave = Broker("cX", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912", topics)
    await register(client, master.register_5x())
    await send(client, slave.register_5x())
    addrs = {0: master.addr, 1: slave.addr}
    for topic in topics:
        await assert_routes(client, topic.name, route_standard("cY", "broker-a", addrs, topic))
    info = await client.request(106)
    assert info.body == cluster_info_bytes([brokerdata("cY", "broker-a", addrs)],
                                           {"cX": ["broker-a"], "cY": ["broker-a"]})


# --- item 6: a late BROKER_HEARTBEAT keeps the broker --------------------------------------------

LATE_TIMEOUT_MS = 1000


async def poll(check: Any, within: float, interval: float = 0.05) -> None:
    """Await ``check()`` until it is true; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"condition not met within {within} s"
        await asyncio.sleep(interval)


async def is_absent(client: RemotingClient, topic: str) -> bool:
    return (await route(client, topic)).code == TOPIC_NOT_EXIST


@pytest.fixture
async def unswept(redis_server: RedisServer, request: pytest.FixtureRequest
                  ) -> AsyncIterator[Worker]:
    """A worker whose sweep does not come round during a test (Java: scanNotActiveBroker has not
    run yet), in a namespace a second worker may join; its route cache on when the test's
    ``oneway`` parameter is (one run each way)."""
    async with running_worker(redis_server.url, sweep_interval=30.0,
                              route_cache=request.node.callspec.params["oneway"],
                              namespace=f"late-{uuid.uuid4().hex[:12]}") as w:
        yield w


@pytest.mark.parametrize("oneway", [True, False], ids=["oneway-cached", "request-uncached"])
async def test_late_broker_heartbeat_revives_the_broker(unswept: Worker, redis_server: RedisServer,
                                                        oneway: bool) -> None:
    """DefaultRequestProcessor.brokerHeartbeat -> RouteInfoManager.updateBrokerInfoUpdateTimestamp:
    past its heartbeatTimeoutMillis a broker stays in brokerLiveTable until scanNotActiveBroker
    removes it, so a BROKER_HEARTBEAT (904, oneway as brokers send it, or as a request answered
    SUCCESS) arriving in between refreshes it: routed again, and still routed while sweeps run
    (here a second worker's, every 0.2 s) as long as it heartbeats. Once it stops and a sweep
    removed it, a heartbeat finds nothing (the broker must register again)."""
    topic = TopicConf("LateTopic", 4, 4, 6)
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                    [topic, TopicConf("LateTopic2")])
    expected = route_standard("c1", "broker-a", {0: broker.addr}, topic)
    conn, watch = await unswept.connect(), await unswept.connect()
    try:
        await register(conn, broker.register_5x(timeout_ms=LATE_TIMEOUT_MS))
        await assert_routes(watch, topic.name, expected)
        await poll(lambda: is_absent(watch, topic.name), within=LATE_TIMEOUT_MS / 1000 + 2.0)
        await assert_no_route(watch, topic.name)
        empty = await watch.request(106)
        assert empty.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'

        if oneway:
            await conn.oneway(broker.heartbeat())
            await poll(lambda: _routed(watch, topic.name), within=2.0, interval=0.02)
        else:
            hb = await conn.call(Command(904, broker.heartbeat().ext_fields, None, V5_3_3))
            assert (hb.code, hb.remark, hb.body) == (SUCCESS, None, None)
        await assert_routes(watch, topic.name, expected)
        info = await watch.request(106)
        assert info.body == cluster_info_bytes(
            [brokerdata("c1", "broker-a", {0: broker.addr})], {"c1": ["broker-a"]})
        assert conn.unexpected == []  # a oneway heartbeat is never answered

        # Keep heartbeating (every 0.25 s, within the 1 s timeout) while a sweeping worker runs.
        stop = asyncio.Event()

        async def heartbeats() -> None:
            while not stop.is_set():
                await conn.oneway(broker.heartbeat())
                await asyncio.sleep(0.25)

        beating = asyncio.create_task(heartbeats())
        try:
            async with running_worker(redis_server.url, sweep_interval=0.2,
                                      route_cache=oneway,
                                      namespace=unswept.settings.namespace) as sweeper:
                other = await sweeper.connect()
                try:
                    until = time.monotonic() + 1.5  # several sweeps of the second worker
                    while time.monotonic() < until:
                        await assert_routes(watch, topic.name, expected)
                        await assert_routes(other, topic.name, expected)
                        await asyncio.sleep(0.05)
                    stop.set()
                    await asyncio.wait_for(beating, 2.0)
                    # Silent now: the sweep removes it from every table...
                    deadlines = f"{unswept.prefix}:idx:deadlines"

                    async def swept() -> bool:
                        return await sweeper.redis.zcard(deadlines) == 0

                    await poll(swept, within=LATE_TIMEOUT_MS / 1000 + 3.0)
                    await assert_no_route(other, topic.name)
                    # ... and a heartbeat after that finds nothing to refresh.
                    late = await other.call(Command(904, broker.heartbeat().ext_fields, None,
                                                    V5_3_3))
                    assert (late.code, late.remark) == (SUCCESS, None)
                    await assert_no_route(other, topic.name)
                    await assert_no_route(watch, topic.name)
                finally:
                    await other.close()
        finally:
            stop.set()
            if not beating.done():
                beating.cancel()
    finally:
        await conn.close()
        await watch.close()


async def _routed(client: RemotingClient, topic: str) -> bool:
    return (await route(client, topic)).code == SUCCESS


async def test_late_query_data_version_keeps_the_broker(redis_server: RedisServer) -> None:
    """DefaultRequestProcessor.queryBrokerTopicConfig (QUERY_DATA_VERSION, the heartbeat of
    compatibleWithOldNameSrv brokers): the live entry still holds the DataVersion past the
    deadline, so the answer is changed=false with the stored DataVersion, and
    updateBrokerInfoUpdateTimestamp keeps the broker."""
    topic = TopicConf("LateT", 4, 4)
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                    [topic, TopicConf("LateU")], counter=3)
    async with running_worker(redis_server.url, sweep_interval=3600.0,
                              namespace=f"late-{uuid.uuid4().hex[:12]}") as w:
        client = await w.connect()
        try:
            await register(client, broker.register_5x(timeout_ms=LATE_TIMEOUT_MS))
            await poll(lambda: is_absent(client, topic.name), within=LATE_TIMEOUT_MS / 1000 + 2)
            resp = await send(client, broker.query_data_version())
            assert (resp.code, resp.remark) == (SUCCESS, None)
            assert resp.ext_fields == {"changed": "false"}
            assert resp.body == b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
            await assert_routes(client, topic.name,
                                route_standard("c1", "broker-a", {0: broker.addr}, topic))
        finally:
            await client.close()


# --- item 8: KV keys Java stores -----------------------------------------------------------------


async def test_kv_2000_character_keys(client: RemotingClient) -> None:
    """KVConfigManager.putKVConfig stores any String key in its HashMap, a 2,000-character one
    included; getKVConfig (101) returns its value and getKVListByNamespace (219) lists it."""
    ns = "ISSUE_12_KV"
    long_key = "k" * 2000
    put = await client.request(100, {"namespace": ns, "key": long_key, "value": "long-key-value"})
    assert (put.code, put.remark, put.body) == (SUCCESS, None, None)
    got = await client.request(101, {"namespace": ns, "key": long_key})
    assert (got.code, got.remark, got.ext_fields) == (SUCCESS, None, {"value": "long-key-value"})
    listed = await client.request(219, {"namespace": ns})
    assert (listed.code, listed.remark) == (SUCCESS, None)
    assert listed.body == f'{{"table":{{"{long_key}":"long-key-value"}}}}'.encode()
    # deleteKVConfig removes it; getKVConfig then answers QUERY_NOT_FOUND with Java's remark.
    assert (await client.request(102, {"namespace": ns, "key": long_key})).code == SUCCESS
    gone = await client.request(101, {"namespace": ns, "key": long_key})
    assert (gone.code, gone.remark) == (QUERY_NOT_FOUND,
                                        f"No config item, Namespace: {ns} Key: {long_key}")


@pytest.mark.parametrize(("namespace", "key", "remark"), [
    ("ISSUE_39_KV", "", "key: must not be empty"),
    ("", "k", "namespace: must not be empty"),
    ("ISSUE_39_KV\x00x", "k", "namespace: 'ISSUE_39_KV\\x00x' has a control character"),
    ("ISSUE_39_KV", "ok\nline", "key: 'ok\\nline' has a control character"),
])
async def test_kv_names_a_redis_key_cannot_carry_are_refused(
        client: RemotingClient, namespace: str, key: str, remark: str) -> None:
    """Stricter than Java, which stores them (docs/compatibility.md): an empty namespace or key,
    or one with a control character, is refused with SYSTEM_ERROR naming the field, and nothing
    is stored (219 finds no such namespace)."""
    put = await client.request(100, {"namespace": namespace, "key": key, "value": "v"})
    assert (put.code, put.remark) == (SYSTEM_ERROR, remark)
    listed = await client.request(219, {"namespace": namespace})
    assert listed.code == QUERY_NOT_FOUND


async def test_kv_put_without_a_value_is_refused(client: RemotingClient) -> None:
    """PutKVConfigRequestHeader marks ``value`` @CFNotNull. Java's header decoding only logs the
    missing field and stores a null; nsfleet refuses it (a null cannot be stored in Redis, and a
    namespace created empty was half a write): SYSTEM_ERROR with the decoder's words."""
    put = await client.request(100, {"namespace": "ISSUE_39_NOVALUE", "key": "k"})
    assert (put.code, put.remark) == (SYSTEM_ERROR, "the custom field <value> is null")
    assert (await client.request(219, {"namespace": "ISSUE_39_NOVALUE"})).code == QUERY_NOT_FOUND


async def test_kv_empty_key_in_a_binary_header_is_null(client: RemotingClient) -> None:
    """RocketMQSerializable.readStr reads a zero-length ext value as null, so an empty key in a
    ROCKETMQ (binary) header is a null key: putKVConfig answers "namespace or key is null"."""
    resp = await client.request(100, {"namespace": "ISSUE_12_KV", "key": "", "value": "v"},
                                serialize_type=ROCKETMQ)
    assert (resp.code, resp.remark) == (SYSTEM_ERROR, "namespace or key is null")


# --- item 9: GET / UPDATE_NAMESRV_CONFIG ---------------------------------------------------------

NAMESRV_CONFIG_DEFAULTS = {  # NamesrvConfig fields and their Java defaults (path-like ones: None)
    "rocketmqHome": None, "kvConfigPath": None, "configStorePath": None,
    "productEnvName": "center", "clusterTest": "false", "orderMessageEnable": "false",
    "returnOrderTopicConfigToBroker": "true", "clientRequestThreadPoolNums": "8",
    "defaultThreadPoolNums": "16", "clientRequestThreadPoolQueueCapacity": "50000",
    "defaultThreadPoolQueueCapacity": "10000", "scanNotActiveBrokerInterval": "5000",
    "unRegisterBrokerQueueCapacity": "3000", "supportActingMaster": "false",
    "enableAllTopicList": "true", "enableTopicList": "true",
    "notifyMinBrokerIdChanged": "false", "enableControllerInNamesrv": "false",
    "needWaitForService": "false", "waitSecondsForService": "45",
    "deleteTopicWithBrokerRegistration": "false",
    "configBlackList": "configBlackList;configStorePath;kvConfigPath"}
NETTY_SERVER_CONFIG_DEFAULTS = {  # NettyServerConfig fields other than listenPort, bindAddress
    "serverWorkerThreads": "8", "serverCallbackExecutorThreads": "0",
    "serverSelectorThreads": "3", "serverOnewaySemaphoreValue": "256",
    "serverAsyncSemaphoreValue": "64", "serverChannelMaxIdleTimeSeconds": "120",
    "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0",
    "writeBufferHighWaterMark": "0", "writeBufferLowWaterMark": "0",
    "serverSocketBacklog": "1024", "serverNettyWorkerGroupEnable": "true",
    "serverPooledByteBufAllocatorEnable": "true", "enableShutdownGracefully": "false",
    "shutdownWaitTimeSeconds": "30", "useEpollNativeSelector": "false"}


async def get_config(client: RemotingClient) -> dict[str, str]:
    """GET_NAMESRV_CONFIG: Configuration.getAllConfigsFormatString, i.e. MixAll.properties2String
    (sorted "key=value" lines, each ending in a newline)."""
    resp = await client.request(319)
    assert (resp.code, resp.remark) == (SUCCESS, None) and resp.body is not None
    lines = resp.body.decode().split("\n")
    assert lines[-1] == "" and lines[:-1] == sorted(lines[:-1]), resp.body
    return dict(line.split("=", 1) for line in lines[:-1])


async def test_get_namesrv_config_lists_40_keys(client: RemotingClient, worker: Worker) -> None:
    """NamesrvController registers NamesrvConfig and NettyServerConfig with its Configuration;
    getAllConfigsFormatString lists the 22 NamesrvConfig keys, listenPort, bindAddress and the 16
    other NettyServerConfig keys with their defaults: 40 keys."""
    config = await get_config(client)
    expected = set(NAMESRV_CONFIG_DEFAULTS) | set(NETTY_SERVER_CONFIG_DEFAULTS) | {
        "listenPort", "bindAddress"}
    assert len(NAMESRV_CONFIG_DEFAULTS) == 22 and len(NETTY_SERVER_CONFIG_DEFAULTS) == 16
    assert set(config) == expected and len(config) == 40
    assert {k: config[k] for k in NETTY_SERVER_CONFIG_DEFAULTS} == NETTY_SERVER_CONFIG_DEFAULTS
    java = {k: v for k, v in NAMESRV_CONFIG_DEFAULTS.items() if v is not None}
    # Deviation: a worker reports the period it really sweeps at (--sweep-interval, 10 s by
    # default), where Java reports its 5000 ms scan period.
    java["scanNotActiveBrokerInterval"] = str(round(Settings().sweep_interval * 1000))
    assert {k: config[k] for k in java} == java
    assert (config["listenPort"], config["bindAddress"]) == (str(worker.port), "127.0.0.1")


async def test_update_namesrv_config_parses_like_properties2object(
        client: RemotingClient) -> None:
    """UPDATE_NAMESRV_CONFIG -> Configuration.update -> MixAll.properties2Object on each config
    object: Integer.parseInt (a failure is swallowed and the field keeps its value),
    Boolean.parseBoolean (anything but "true" is false, even after it was true), a String
    trimmed; the listing re-reads the objects, so it shows the parsed values, never the raw
    strings. NettyServerConfig fields are updated the same way."""
    async def update(text: str) -> dict[str, str]:
        resp = await client.request(318, body=text.encode())
        assert (resp.code, resp.remark) == (SUCCESS, None)
        return await get_config(client)

    config = await update("waitSecondsForService=60\nclusterTest=true\n")
    assert (config["waitSecondsForService"], config["clusterTest"]) == ("60", "true")
    config = await update("waitSecondsForService=abc\nclusterTest=yes\n")
    assert (config["waitSecondsForService"], config["clusterTest"]) == ("60", "false")
    # Properties.load drops the blanks before a value but keeps those after it.
    config = await update("enableTopicList=TRUE\ndefaultThreadPoolNums=+32\n"
                          "productEnvName=  spaced  \nunRegisterBrokerQueueCapacity=7 \n"
                          "clientRequestThreadPoolNums=99999999999\n"
                          "returnOrderTopicConfigToBroker=true \nserverWorkerThreads=16")
    assert {k: config[k] for k in ("enableTopicList", "defaultThreadPoolNums", "productEnvName",
                                   "unRegisterBrokerQueueCapacity", "clientRequestThreadPoolNums",
                                   "returnOrderTopicConfigToBroker", "serverWorkerThreads")} == {
        "enableTopicList": "true", "defaultThreadPoolNums": "32", "productEnvName": "spaced",
        "unRegisterBrokerQueueCapacity": "3000", "clientRequestThreadPoolNums": "8",
        "returnOrderTopicConfigToBroker": "false",  # parseBoolean("true ") is false
        "serverWorkerThreads": "16"}
    assert len(config) == 40


# --- item 10: static topics ----------------------------------------------------------------------

STATIC = TopicConf("StaticTopic", 4, 4, 6)
PLAIN = TopicConf("PlainTopic", 8, 8, 6)
MAPPING = {"bname": "broker-a", "currIdMap": {0: 0, 1: 1, 2: 2, 3: 3}, "dirty": False,
           "epoch": 1_700_000_000_123, "scope": "__global__", "topic": "StaticTopic",
           "totalQueues": 4}


@pytest.mark.parametrize("encoding", ["json", "compressed", "compressed-labelled"])
async def test_static_topic_mapping_in_routes(client: RemotingClient, encoding: str) -> None:
    """RouteInfoManager.registerBroker puts each TopicQueueMappingInfo of the registration's
    topicQueueMappingInfoMap into topicQueueMappingInfoTable[topic][bname];
    pickupTopicRouteData sets topicQueueMappingByBroker to that map (null, so left out, for a
    topic without mappings). A 5.x client (version >= V4_9_4) gets standard JSON, currIdMap keys
    quoted; a legacy client (121) fastjson's defaults, currIdMap keys bare like brokerAddrs'."""
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", [STATIC, PLAIN])
    # 5.x sends the deflate form labelled compressed=false (BrokerOuterAPI.registerBrokerAll);
    # RegisterBrokerBody.encode(true) truthfully labelled carries the mapping section too.
    cmd = broker.register_5x(mappings={"StaticTopic": MAPPING},
                             compressed_body=encoding != "json",
                             label_compressed=encoding == "compressed-labelled")
    await register(client, cmd)
    addr = broker.addr
    await assert_routes(client, "StaticTopic", (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"c1","enableActingMaster":false}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a",'
        b'"currIdMap":{"0":0,"1":1,"2":2,"3":3},"dirty":false,"epoch":1700000000123,'
        b'"scope":"__global__","topic":"StaticTopic","totalQueues":4}}}'))
    # A client older than 5.0 gets BrokerData as 4.x writes it (no enableActingMaster); the
    # mappings, there only when a 5.x broker registered them, stay.
    await assert_routes(client, "StaticTopic", (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"c1"}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a",'
        b'"currIdMap":{0:0,1:1,2:2,3:3},"dirty":false,"epoch":1700000000123,'
        b'"scope":"__global__","topic":"StaticTopic","totalQueues":4}}}'), LEGACY_CLIENT)
    await assert_routes(client, "PlainTopic", route_standard("c1", "broker-a", {0: addr}, PLAIN))
    await assert_routes(client, "PlainTopic",
                        as_4x(dumps_fastjson(route_obj("c1", "broker-a", {0: addr}, PLAIN))),
                        LEGACY_CLIENT)
    plain = await route(client, "PlainTopic", version=V4_9_4 - 1)
    assert "topicQueueMappingByBroker" not in loads_fastjson(plain.body)


async def test_static_topic_mappings_of_two_brokers_are_keyed_by_bname(
        client: RemotingClient) -> None:
    """topicQueueMappingInfoTable[topic] maps each info's bname to it, so two brokers hosting
    queues of one static topic both appear in topicQueueMappingByBroker (MapSortField sorts the
    names in the standard encoding)."""
    a = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=[TopicConf("StaticT", 2, 2),
                                                               TopicConf("PlainT")])
    b = Broker("c1", "10.0.0.2:10911", "broker-b", 0, topics=[TopicConf("StaticT", 2, 2),
                                                               TopicConf("PlainT")])
    info_a = {**MAPPING, "topic": "StaticT", "currIdMap": {0: 0, 1: 1}}
    info_b = {**MAPPING, "topic": "StaticT", "bname": "broker-b", "currIdMap": {2: 0, 3: 1}}
    await register(client, a.register_5x(mappings={"StaticT": info_a}))
    await register(client, b.register_5x(mappings={"StaticT": info_b}))
    got = await route(client, "StaticT")
    assert got.code == SUCCESS, (got.code, got.remark)
    mapping = json.loads(got.body or b"{}")["topicQueueMappingByBroker"]
    assert list(mapping) == ["broker-a", "broker-b"]
    assert mapping["broker-a"]["currIdMap"] == {"0": 0, "1": 1}
    assert mapping["broker-b"] == {**info_b, "currIdMap": {"2": 0, "3": 1}}


# --- item 11: registrations exactly as real 4.9 and 5.3 brokers send them ------------------------


def topic_config_manager_topics(cluster: str, name: str, release: str) -> list[TopicConf]:
    """The topic table of a broker with default BrokerConfig plus traceTopicEnable=true.

    TopicConfigManager's constructor (init()) creates: SELF_TEST_TOPIC 1/1; TBW102
    (autoCreateTopicEnable) defaultTopicQueueNums 8, PERM_INHERIT|RW; BenchmarkTest 1024/1024;
    the cluster-name topic (TopicConfig defaults 16/16) and the brokerName topic 1/1, both
    PERM_INHERIT|RW (clusterTopicEnable, brokerTopicEnable); OFFSET_MOVED_EVENT 1/1;
    SCHEDULE_TOPIC_XXXX 18/18; RMQ_SYS_TRACE_TOPIC 1/1; <cluster>_REPLY_TOPIC 1/1; and in 5.x
    rmq_sys_REVIVE_LOG_<cluster> (reviveQueueNum 8) and rmq_sys_SYNC_BROKER_MEMBER_<brokerName>
    1/1 PERM_INHERIT, plus RMQ_SYS_TRANS_HALF_TOPIC / RMQ_SYS_TRANS_OP_HALF_TOPIC 1/1 (4.9
    creates those two on first use, TransactionalMessageBridge). Then what the broker creates at
    run time: a topic made with mqadmin updateTopic, a push consumer's %RETRY% topic
    (createTopicInSendMessageBackMethod: retryQueueNums 1, RW) and %DLQ% topic (1 queue; perm
    PERM_WRITE in 4.9, RW in 5.x), and in 5.x a pop consumer's retry topics
    (KeyBuilder.buildPopRetryTopicV2 "%RETRY%group+topic" and V1 "%RETRY%group_topic", 1/1 RW).
    Unset perm is TopicConfig's default, PERM_READ|PERM_WRITE = 6."""
    five = release == "5.3.3"
    topics = [
        TopicConf("SELF_TEST_TOPIC", 1, 1, 6),
        TopicConf("TBW102", 8, 8, 7),
        TopicConf("BenchmarkTest", 1024, 1024, 6),
        TopicConf(cluster, 16, 16, 7),
        TopicConf(name, 1, 1, 7),
        TopicConf("OFFSET_MOVED_EVENT", 1, 1, 6),
        TopicConf("SCHEDULE_TOPIC_XXXX", 18, 18, 6),
        TopicConf("RMQ_SYS_TRACE_TOPIC", 1, 1, 6),
        TopicConf(f"{cluster}_REPLY_TOPIC", 1, 1, 6),
        TopicConf("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1, 6),
        TopicConf("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1, 6),
        TopicConf("TopicTest", 8, 8, 6),
        TopicConf("%RETRY%GID_push", 1, 1, 6),
        TopicConf("%DLQ%GID_push", 1, 1, 6 if five else 2),
    ]
    if five:
        topics += [
            TopicConf(f"rmq_sys_REVIVE_LOG_{cluster}", 8, 8, 6),
            TopicConf(f"rmq_sys_SYNC_BROKER_MEMBER_{name}", 1, 1, 1),
            TopicConf("%RETRY%GID_pop+TopicTest", 1, 1, 6),
            TopicConf("%RETRY%GID_pop_TopicTest", 1, 1, 6),
        ]
    return topics


REAL_BROKERS = {
    "4.9.8-json": ("4.9.8", False),
    "4.9.8-deflate": ("4.9.8", True),
    "5.3.3-json": ("5.3.3", False),
    "5.3.3-deflate": ("5.3.3", True),
}


@pytest.mark.parametrize("kind", sorted(REAL_BROKERS))
async def test_real_broker_registration_routes_every_topic(client: RemotingClient,
                                                           kind: str) -> None:
    """DefaultRequestProcessor.registerBroker (RegisterBrokerBody.decode of the JSON or deflate
    body) -> RouteInfoManager.registerBroker: a 4.9.8 broker (BrokerOuterAPI.registerBrokerAll:
    version 405, truthful "compressed" header) and a 5.3.3 broker (version 479, stateVersion and
    attributes, mapping fields, enableActingMaster, the deflate body labelled compressed=false)
    with a host-name brokerName and cluster name register their whole TopicConfigManager table;
    every topic routes exactly as sent (the deflate form carries no sysflag or order: 0 and
    false), cluster info lists the group, and the topic lists have every topic."""
    release, deflate = REAL_BROKERS[kind]
    topics = topic_config_manager_topics(HOST_CLUSTER, HOST_NAME, release)
    broker = Broker(HOST_CLUSTER, ADDR, HOST_NAME, 0, HA_ADDR, topics, counter=12,
                    timestamp=1_717_000_000_000)
    if release == "4.9.8":
        cmd = broker.register_49(compressed=deflate)
        assert cmd.version == V4_9_8 and cmd.ext_fields is not None
        assert cmd.ext_fields["compressed"] == str(deflate).lower()
    else:
        cmd = broker.register_5x(compressed_body=deflate)
        assert cmd.version == V5_3_3 and cmd.ext_fields is not None
        assert (cmd.ext_fields["compressed"], cmd.ext_fields["enableActingMaster"]) == (
            "false", "false")
    assert cmd.body is not None and (cmd.body[:1] == b"\x78") == deflate
    await register(client, cmd)
    for topic in topics:
        await assert_routes(client, topic.name,
                            route_standard(HOST_CLUSTER, HOST_NAME, {0: ADDR}, topic))
    info = await client.request(106)
    assert (info.code, info.body) == (SUCCESS, cluster_info_bytes(
        [brokerdata(HOST_CLUSTER, HOST_NAME, {0: ADDR})], {HOST_CLUSTER: [HOST_NAME]}))
    assert sorted(await topic_list(client)) == sorted(t.name for t in topics)
    by_cluster = await client.request(224, {"cluster": HOST_CLUSTER})
    assert sorted(by_cluster.body_json()["topicList"]) == sorted(t.name for t in topics)
    # The unchanged re-registration every 30 s (same DataVersion) answers the same.
    await register(client, cmd)
    await assert_routes(client, HOST_NAME,
                        route_standard(HOST_CLUSTER, HOST_NAME, {0: ADDR}, topics[4]))
