"""Issue 12: what the Java NameServer (5.3.3) accepts, nsfleet must accept and answer the same.

Items 2, 5, 6, 8, 9 and 10 of the issue (items 1 and 11, real brokers' tables with host-name
names, are in test_java_acceptance.py), each through the remoting protocol against a real
worker on the session's redis-server (tests/support/remoting_client.py speaks the wire as a Java
broker or client does). The Java NameServer validates nothing in a registration's topic table
(RouteInfoManager.registerBroker), keeps one BrokerData per brokerName with the first registrant's
cluster, refreshes a live entry until the scan removes it, stores any KV key, lists
NettyServerConfig next to NamesrvConfig in its configuration, and routes static-topic mappings.
Every expected answer below is what the Java code answers; the docstrings name the method.

Route bodies requested with version >= V4_9_4 are standard JSON (ClientRequestProcessor encodes
with BrowserCompatible, QuoteFieldNames, MapSortField): sorted keys, quoted numeric keys, no
spaces, which is ``json.dumps(sort_keys=True, separators=(",", ":"))``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import (
    JSON,
    QUERY_NOT_FOUND,
    ROCKETMQ,
    SUCCESS,
    SYSTEM_ERROR,
    V4_9_4,
    V5_3_3,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    dumps_fastjson,
    loads_fastjson,
    running_worker,
)

pytestmark = pytest.mark.redis

# --- helpers -------------------------------------------------------------------------------------


def standard_json(obj: Any) -> bytes:
    """fastjson with BrowserCompatible, QuoteFieldNames, SkipTransientField and MapSortField, as
    ClientRequestProcessor.getRouteInfoByTopic encodes a route for version >= V4_9_4."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def route_dict(cluster: str, name: str, addrs: dict[int, str], topic: TopicConf,
               mapping: dict[str, Any] | None = None) -> dict[str, Any]:
    """TopicRouteData of one broker group: BrokerData copy, one QueueData
    (RouteInfoManager.createAndUpdateQueueData), an empty filterServerTable, and
    topicQueueMappingByBroker only when set (fastjson omits a null field)."""
    route: dict[str, Any] = {
        "brokerDatas": [{"brokerAddrs": {str(k): v for k, v in sorted(addrs.items())},
                         "brokerName": name, "cluster": cluster, "enableActingMaster": False}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": name, "perm": topic.perm, "readQueueNums": topic.read,
                        "topicSysFlag": topic.sys_flag, "writeQueueNums": topic.write}]}
    if mapping is not None:
        route["topicQueueMappingByBroker"] = mapping
    return route


def route_standard(cluster: str, name: str, addrs: dict[int, str], topic: TopicConf,
                   mapping: dict[str, Any] | None = None) -> bytes:
    return standard_json(route_dict(cluster, name, addrs, topic, mapping))


async def send(client: RemotingClient, cmd: Command) -> Command:
    return await client.call(Command(cmd.code, cmd.ext_fields, cmd.body, cmd.version,
                                     flag=cmd.flag))


async def route(client: RemotingClient, topic: str, version: int = V5_3_3) -> Command:
    return await client.request(105, {"topic": topic}, version=version)


def assert_register_success(resp: Command) -> None:
    """DefaultRequestProcessor.registerBroker answers SUCCESS with remark null."""
    assert (resp.code, resp.remark) == (SUCCESS, None), (resp.code, resp.remark)


ORDINARY = [TopicConf("OrdA", 4, 4), TopicConf("OrdB", 8, 8), TopicConf("OrdC", 2, 2, 4),
            TopicConf("OrdD", 16, 16, 6, sys_flag=1)]
UNUSUAL = {
    "pop-retry-v2": TopicConf("%RETRY%GID_orders+OrderTopic", 1, 1, 6),
    "255-characters": TopicConf("L" * 255, 8, 8, 6),
    "2048-queues": TopicConf("Wide", 2048, 2048, 6),
    "perm-14-priority": TopicConf("Prio", 8, 8, 14),  # PermName.PERM_PRIORITY | READ | WRITE
}


@pytest.mark.parametrize("kind", sorted(UNUSUAL))
async def test_one_unusual_topic_does_not_sink_the_registration(
        client: RemotingClient, kind: str) -> None:
    """RouteInfoManager.registerBroker / createAndUpdateQueueData store every TopicConfig as sent:
    no TopicValidator pattern or length, no queue-count or perm bound. All five topics are routed
    with their exact queue counts and perm, and the answer is a plain SUCCESS."""
    topics = [*ORDINARY, UNUSUAL[kind]]
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics)
    assert_register_success(await send(client, broker.register_5x()))
    for topic in topics:
        got = await route(client, topic.name)
        assert got.code == SUCCESS, (topic.name[:40], got.code, got.remark)
        assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, topic)


async def test_a_topic_beyond_storable_limits_is_dropped_alone(client: RemotingClient) -> None:
    """Java (RouteInfoManager.registerBroker) stores even these. Where nsfleet documents a limit
    it cannot store past, it must drop only that topic: SUCCESS, the other topics routed, and each
    dropped topic named in the remark. A topic it does store must be routed exactly as sent."""
    extreme = [TopicConf("X" * 5000, 8, 8, 6),
               TopicConf("MaxQueues", 2**31 - 1, 2**31 - 1, 6),
               TopicConf("MaxPerm", 8, 8, 2**31 - 1)]
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                    [*ORDINARY, *extreme])
    resp = await send(client, broker.register_5x())
    assert resp.code == SUCCESS, (resp.code, resp.remark)
    for topic in ORDINARY:
        got = await route(client, topic.name)
        assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, topic)
    for topic in extreme:
        got = await route(client, topic.name)
        if got.code == SUCCESS:
            assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, topic)
        else:
            assert resp.remark is not None and topic.name[:64] in resp.remark, resp.remark


# --- item 5: one brokerName under two cluster names ----------------------------------------------


@pytest.mark.parametrize("first", ["slave", "master"])
async def test_one_broker_name_under_two_clusters_routes_every_member(
        client: RemotingClient, first: str) -> None:
    """RouteInfoManager.registerBroker keeps one BrokerData per brokerName (brokerAddrTable is
    keyed by brokerName alone), created with the first registrant's cluster; every registrant is
    added to its brokerAddrs whatever cluster it names, and clusterAddrTable lists the name under
    both clusters. pickupTopicRouteData copies that BrokerData: every member is routed, under the
    first registrant's cluster."""
    topics = [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)]
    master = Broker("cY", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics)
    slave = Broker("cX", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912", topics)
    order = [slave, master] if first == "slave" else [master, slave]
    for b in order:
        assert_register_success(await send(client, b.register_5x()))
    cluster = order[0].cluster
    addrs = {0: master.addr, 1: slave.addr}
    for topic in topics:
        got = await route(client, topic.name)
        assert got.code == SUCCESS, (got.code, got.remark)
        assert got.body == route_standard(cluster, "broker-a", addrs, topic)
    info = (await client.request(106)).body_json()
    assert info == {
        "brokerAddrTable": {"broker-a": {"brokerAddrs": {"0": master.addr, "1": slave.addr},
                                         "brokerName": "broker-a", "cluster": cluster,
                                         "enableActingMaster": False}},
        "clusterAddrTable": {"cX": ["broker-a"], "cY": ["broker-a"]}}


# --- item 6: a late heartbeat keeps the broker ---------------------------------------------------

LATE_TIMEOUT_MS = 1500


@pytest.fixture
async def unswept_client(redis_server: RedisServer) -> AsyncIterator[RemotingClient]:
    """A worker whose sweep does not run during the test (Java: the scan has not come round)."""
    async with running_worker(redis_server.url, sweep_interval=3600.0) as w:
        c = await w.connect()
        yield c
        await c.close()


async def _register_then_outlive(client: RemotingClient, broker: Broker) -> None:
    """Register with heartbeatTimeoutMillis, then let the deadline pass (no Java-visible signal
    marks it, so this waits for the clock: response time + timeout + 0.5 s)."""
    resp = await send(client, broker.register_5x(timeout_ms=LATE_TIMEOUT_MS))
    assert_register_success(resp)
    await asyncio.sleep(LATE_TIMEOUT_MS / 1000 + 0.5)


async def test_late_broker_heartbeat_keeps_the_broker(unswept_client: RemotingClient) -> None:
    """DefaultRequestProcessor.brokerHeartbeat -> RouteInfoManager.updateBrokerInfoUpdateTimestamp:
    the BrokerLiveInfo stays in brokerLiveTable past its deadline until scanNotActiveBroker (and
    the queued unregister) removes it, so a heartbeat arriving in between refreshes
    lastUpdateTimestamp and the broker stays registered and routed."""
    client = unswept_client
    topic = TopicConf("LateT", 4, 4)
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                    [topic, TopicConf("LateU")])
    await _register_then_outlive(client, broker)
    hb = await client.request(904, {"brokerAddr": broker.addr, "brokerName": broker.name,
                                    "clusterName": broker.cluster})
    assert (hb.code, hb.remark, hb.body) == (SUCCESS, None, None)
    got = await route(client, "LateT")
    assert got.code == SUCCESS, (got.code, got.remark)
    assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, topic)
    info = (await client.request(106)).body_json()
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": broker.addr}


async def test_late_query_data_version_keeps_the_broker(unswept_client: RemotingClient) -> None:
    """DefaultRequestProcessor.queryBrokerTopicConfig (QUERY_DATA_VERSION, the heartbeat of
    compatibleWithOldNameSrv brokers): the live entry still holds the DataVersion past the
    deadline, so the answer is changed=false with the stored DataVersion, and
    updateBrokerInfoUpdateTimestamp keeps the broker."""
    client = unswept_client
    topic = TopicConf("LateT", 4, 4)
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                    [topic, TopicConf("LateU")], counter=3)
    await _register_then_outlive(client, broker)
    resp = await send(client, broker.query_data_version())
    assert (resp.code, resp.remark) == (SUCCESS, None)
    assert resp.ext_fields == {"changed": "false"}
    assert resp.body == b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
    got = await route(client, "LateT")
    assert got.code == SUCCESS, (got.code, got.remark)
    assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, topic)


# --- item 8: KV keys Java stores -----------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "k" * 2000], ids=["empty-key", "2000-character-key"])
async def test_kv_key_java_stores_is_stored(client: RemotingClient, key: str) -> None:
    """DefaultRequestProcessor.putKVConfig refuses only a null namespace or key; KVConfigManager
    puts any String key in its HashMap (an empty one included, no length limit), getKVConfig and
    getKVListByNamespace return it, deleteKVConfig removes it."""
    ns = "issue12-kv"
    put = await client.request(100, {"namespace": ns, "key": key, "value": "v1"})
    assert (put.code, put.remark) == (SUCCESS, None)
    got = await client.request(101, {"namespace": ns, "key": key})
    assert (got.code, got.remark, got.ext_fields) == (SUCCESS, None, {"value": "v1"})
    listed = await client.request(219, {"namespace": ns})
    assert (listed.code, listed.body) == (SUCCESS, dumps_fastjson({"table": {key: "v1"}}))
    deleted = await client.request(102, {"namespace": ns, "key": key})
    assert deleted.code == SUCCESS
    gone = await client.request(101, {"namespace": ns, "key": key})
    assert (gone.code, gone.remark) == (QUERY_NOT_FOUND,
                                        f"No config item, Namespace: {ns} Key: {key}")


async def test_kv_empty_key_in_a_binary_header_is_null(client: RemotingClient) -> None:
    """RocketMQSerializable.readStr reads a zero-length ext value as null, so the same empty key in
    a ROCKETMQ (binary) header is a null key: putKVConfig answers "namespace or key is null"."""
    resp = await client.request(100, {"namespace": "issue12-kv", "key": "", "value": "v"},
                                serialize_type=ROCKETMQ)
    assert (resp.code, resp.remark) == (SYSTEM_ERROR, "namespace or key is null")
    json_put = await client.request(100, {"namespace": "issue12-kv", "key": "", "value": "v"},
                                    serialize_type=JSON)
    assert json_put.code == SUCCESS


# --- item 9: NamesrvConfig and NettyServerConfig -------------------------------------------------

NAMESRV_CONFIG_KEYS = {  # NamesrvConfig fields (5.3.3)
    "rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
    "orderMessageEnable", "returnOrderTopicConfigToBroker", "clientRequestThreadPoolNums",
    "defaultThreadPoolNums", "clientRequestThreadPoolQueueCapacity",
    "defaultThreadPoolQueueCapacity", "scanNotActiveBrokerInterval",
    "unRegisterBrokerQueueCapacity", "supportActingMaster", "enableAllTopicList",
    "enableTopicList", "notifyMinBrokerIdChanged", "enableControllerInNamesrv",
    "needWaitForService", "waitSecondsForService", "deleteTopicWithBrokerRegistration",
    "configBlackList"}
NETTY_SERVER_CONFIG_DEFAULTS = {  # NettyServerConfig fields other than bindAddress/listenPort
    "serverWorkerThreads": "8", "serverCallbackExecutorThreads": "0",
    "serverSelectorThreads": "3", "serverOnewaySemaphoreValue": "256",
    "serverAsyncSemaphoreValue": "64", "serverChannelMaxIdleTimeSeconds": "120",
    "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0",  # NettySystemConfig defaults
    "writeBufferHighWaterMark": "0", "writeBufferLowWaterMark": "0",
    "serverSocketBacklog": "1024", "serverNettyWorkerGroupEnable": "true",
    "serverPooledByteBufAllocatorEnable": "true", "enableShutdownGracefully": "false",
    "shutdownWaitTimeSeconds": "30", "useEpollNativeSelector": "false"}


async def get_config(client: RemotingClient) -> dict[str, str]:
    resp = await client.request(319)
    assert (resp.code, resp.remark) == (SUCCESS, None) and resp.body is not None
    text = resp.body.decode()
    lines = text.split("\n")
    assert lines[-1] == "" and lines[:-1] == sorted(lines[:-1]), text
    return dict(line.split("=", 1) for line in lines[:-1])


async def update_config(client: RemotingClient, text: str) -> None:
    resp = await client.request(318, body=text.encode())
    assert (resp.code, resp.remark) == (SUCCESS, None)


async def test_get_namesrv_config_lists_netty_server_config(client: RemotingClient) -> None:
    """NamesrvController builds its Configuration from NamesrvConfig and NettyServerConfig;
    Configuration.getAllConfigsFormatString lists every non-null field of both
    (MixAll.object2Properties) as sorted key=value lines (MixAll.properties2String(.., true))."""
    config = await get_config(client)
    expected_keys = NAMESRV_CONFIG_KEYS | set(NETTY_SERVER_CONFIG_DEFAULTS) | {"bindAddress",
                                                                              "listenPort"}
    # rocketmqHome is null (so not listed) only where ROCKETMQ_HOME is unset.
    assert set(config) - {"rocketmqHome"} == expected_keys - {"rocketmqHome"}
    assert {k: config[k] for k in NETTY_SERVER_CONFIG_DEFAULTS} == NETTY_SERVER_CONFIG_DEFAULTS
    assert config["listenPort"].isdigit()


async def test_update_namesrv_config_parses_values_like_properties2object(
        client: RemotingClient) -> None:
    """Configuration.update applies MixAll.properties2Object to each config object: an int goes
    through Integer.parseInt (a failure is swallowed and the field keeps its value), a boolean
    through Boolean.parseBoolean (anything but "true" is false), a String is trimmed; the listing
    (getAllConfigsInternal) re-reads the objects, so it shows the parsed field values, never the
    raw strings. NettyServerConfig fields are updated the same way."""
    await update_config(client, "waitSecondsForService=60\nclusterTest=true")
    config = await get_config(client)
    assert (config["waitSecondsForService"], config["clusterTest"]) == ("60", "true")
    await update_config(client, "waitSecondsForService=abc\nclusterTest=yes")
    config = await get_config(client)
    assert (config["waitSecondsForService"], config["clusterTest"]) == ("60", "false")
    # Properties.load drops the blanks before a value but keeps those after it.
    await update_config(client, "enableTopicList=TRUE\ndefaultThreadPoolNums=+32\n"
                                "productEnvName=  spaced  \nunRegisterBrokerQueueCapacity=7 \n"
                                "clientRequestThreadPoolNums=99999999999\n"
                                "returnOrderTopicConfigToBroker=true \n"
                                "serverWorkerThreads=16")
    config = await get_config(client)
    assert {k: config[k] for k in ("enableTopicList", "defaultThreadPoolNums", "productEnvName",
                                   "unRegisterBrokerQueueCapacity", "clientRequestThreadPoolNums",
                                   "returnOrderTopicConfigToBroker", "serverWorkerThreads")} == {
        "enableTopicList": "true", "defaultThreadPoolNums": "32", "productEnvName": "spaced",
        "unRegisterBrokerQueueCapacity": "3000", "clientRequestThreadPoolNums": "8",
        "returnOrderTopicConfigToBroker": "false",  # parseBoolean("true ") is false
        "serverWorkerThreads": "16"}


# --- item 10: static topics ----------------------------------------------------------------------

MAPPING = {"bname": "broker-a", "currIdMap": {0: 0, 1: 1, 2: 2, 3: 3}, "dirty": False,
           "epoch": 1_700_000_000_123, "scope": "__global__", "topic": "StaticT",
           "totalQueues": 4}


@pytest.mark.parametrize("encoding", ["json", "compressed"])
async def test_static_topic_mapping_is_routed(client: RemotingClient, encoding: str) -> None:
    """RouteInfoManager.registerBroker upserts every topicQueueMappingInfoMap entry of a
    registration (first registration or changed DataVersion) into topicQueueMappingInfoTable,
    keyed by topic and then by the info's bname; pickupTopicRouteData sets
    topicQueueMappingByBroker to that map (absent, i.e. null, for a topic without mappings). The
    TopicQueueMappingInfo is written with its fields bname, currIdMap, dirty, epoch, scope, topic,
    totalQueues: standard JSON (quoted currIdMap keys) for version >= V4_9_4, fastjson defaults
    (bare numeric keys) below it."""
    static, plain = TopicConf("StaticT", 4, 4), TopicConf("PlainT", 8, 8)
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", [static, plain])
    if encoding == "json":
        cmd = broker.register_5x(mappings={"StaticT": MAPPING})
    else:  # RegisterBrokerBody.encode(true), truthfully labelled, mapping section from V5_0_0
        cmd = broker.register_5x(mappings={"StaticT": MAPPING}, compressed_body=True,
                                 label_compressed=True)
    assert_register_success(await send(client, cmd))
    info = {**MAPPING, "currIdMap": {str(k): v for k, v in MAPPING["currIdMap"].items()}}
    got = await route(client, "StaticT")
    assert got.code == SUCCESS, (got.code, got.remark)
    assert got.body == route_standard("c1", "broker-a", {0: broker.addr}, static,
                                      {"broker-a": info})
    legacy = await route(client, "StaticT", version=V4_9_4 - 1)
    assert legacy.body == dumps_fastjson({
        "brokerDatas": [{"brokerAddrs": {0: broker.addr}, "brokerName": "broker-a",
                         "cluster": "c1", "enableActingMaster": False}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                        "topicSysFlag": 0, "writeQueueNums": 4}],
        "topicQueueMappingByBroker": {"broker-a": MAPPING}})
    other = await route(client, "PlainT")
    assert other.body == route_standard("c1", "broker-a", {0: broker.addr}, plain)
    assert "topicQueueMappingByBroker" not in loads_fastjson(other.body)


async def test_static_topic_mappings_of_two_brokers_are_keyed_by_bname(
        client: RemotingClient) -> None:
    """topicQueueMappingInfoTable[topic] maps each info's bname to it, so two brokers hosting
    queues of one static topic both appear in topicQueueMappingByBroker (MapSortField sorts the
    names in the standard encoding)."""
    a = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=[TopicConf("StaticT", 2, 2),
                                                               TopicConf("PlainT")])
    b = Broker("c1", "10.0.0.2:10911", "broker-b", 0, topics=[TopicConf("StaticT", 2, 2),
                                                               TopicConf("PlainT")])
    info_a = {**MAPPING, "currIdMap": {0: 0, 1: 1}}
    info_b = {**MAPPING, "bname": "broker-b", "currIdMap": {2: 0, 3: 1}}
    assert_register_success(await send(client, a.register_5x(mappings={"StaticT": info_a})))
    assert_register_success(await send(client, b.register_5x(mappings={"StaticT": info_b})))
    got = await route(client, "StaticT")
    assert got.code == SUCCESS, (got.code, got.remark)
    mapping = json.loads(got.body or b"{}")["topicQueueMappingByBroker"]
    assert list(mapping) == ["broker-a", "broker-b"]
    assert mapping["broker-a"]["currIdMap"] == {"0": 0, "1": 1}
    assert mapping["broker-b"] == {**MAPPING, "bname": "broker-b", "currIdMap": {"2": 0, "3": 1}}

