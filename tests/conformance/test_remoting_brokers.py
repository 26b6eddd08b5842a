"""Brokers and clients as the Java ones talk to a name server (DefaultRequestProcessor,
RegisterBrokerBody, BrokerController and BrokerOuterAPI).

A 4.9 broker (version 405, RegisterBrokerBody JSON without stateVersion, truthful ``compressed``
header), a 5.x broker (version 479, stateVersion/attributes/mapping fields, enableActingMaster,
heartbeatTimeoutMillis, ``__ZONE_NAME``; the deflate body labelled ``compressed=true`` and, as 5.x
brokers really send it, labelled ``false``) register, heartbeat oneway and query their data
version; clients of versions 121, 401 and 479 then ask for routes in JSON and ROCKETMQ headers.
"""

from __future__ import annotations

import pytest

from nsfleet.domain.model import BrokerData, QueueData, TopicRouteData
from nsfleet.remoting.zone import filter_by_zone
from tests.support.remoting_client import (
    JSON,
    ROCKETMQ,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    V3_0_11,
    V4_9_8,
    V5_3_3,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    answer_version,
    as_4x,
    java_crc32,
    wrapper_body_pre37,
)

pytestmark = pytest.mark.redis

TOPICS = [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8, perm=7)]
STANDARD_T1 = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"c1","enableActingMaster":false}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}')
STANDARD_T1_4X = as_4x(STANDARD_T1)  # a client older than 5.0: as a 4.x NameServer answers
LEGACY_T1 = STANDARD_T1_4X.replace(b'{"0":', b"{0:").replace(b',"1":', b",1:")


async def ok(client: RemotingClient, cmd: Command) -> Command:
    resp = await client.call(cmd)
    assert (resp.code, resp.remark) == (SUCCESS, None)
    return resp


async def route(client: RemotingClient, topic: str, *, version: int = V5_3_3,
                stype: int = JSON, ext: dict[str, str] | None = None) -> Command:
    return await client.call(Command(105, {"topic": topic, **(ext or {})}, None, version,
                                     serialize_type=stype))


async def row(worker: Worker, broker: Broker) -> dict[str, str]:
    return dict(await worker.redis.hgetall(f"{worker.prefix}:broker:{broker.cluster}:"
                                           f"{broker.addr}"))


# --- a 4.9 broker --------------------------------------------------------------------------------


async def test_java_49_broker(client: RemotingClient, worker: Worker) -> None:
    master = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", TOPICS)
    slave = Broker("c1", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912", TOPICS)
    req = master.register_49()
    assert req.version == V4_9_8 and b"stateVersion" not in (req.body or b"")
    assert b"attributes" not in (req.body or b"")
    assert req.ext_fields is not None and "enableActingMaster" not in req.ext_fields
    resp = await ok(client, req)
    assert resp.header_json is not None and resp.header_json["extFields"] == {}
    resp = await ok(client, slave.register_49())
    assert resp.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}
    assert (await route(client, "T1", version=V4_9_8)).body == STANDARD_T1_4X
    t2 = (await route(client, "T2")).body_json()["queueDatas"][0]
    assert (t2["perm"], t2["readQueueNums"]) == (7, 8)
    # Its DataVersion has no stateVersion: stored as 0 and compared equal.
    resp = await ok(client, master.query_data_version(five=False))
    assert resp.ext_fields == {"changed": "false"}
    assert resp.body == b'{"counter":1,"stateVersion":0,"timestamp":1700000000000}'
    assert (await row(worker, master))["heartbeatTimeoutMillis"] == "120000"
    # An old-version broker (no enableActingMaster header) is never a prime slave.
    lone = Broker("c1", "10.0.0.3:10911", "broker-s", 1, topics=[TopicConf("TS"),
                                                                TopicConf("TS2")])
    await ok(client, lone.register_49())
    assert (await route(client, "TS")).code == TOPIC_NOT_EXIST


async def test_java_49_broker_compressed(client: RemotingClient) -> None:
    """4.x brokers label the deflate form truthfully. It carries no topicSysFlag or order, so
    both come back as 0/false, as in Java."""
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=[
        TopicConf("T1", 4, 4), TopicConf("TU", 2, 2, sys_flag=1, order=True)],
        filter_servers=["10.0.0.1:30000"])
    req = broker.register_49(compressed=True)
    assert req.body is not None and req.body[:1] == b"\x78"
    assert req.ext_fields is not None and req.ext_fields["compressed"] == "true"
    await ok(client, req)
    body = (await route(client, "TU")).body_json()
    assert body["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2,
                                   "topicSysFlag": 0, "writeQueueNums": 2}]
    assert body["filterServerTable"] == {"10.0.0.1:10911": ["10.0.0.1:30000"]}


async def test_pre_v3_0_11_broker_sends_a_bare_wrapper(client: RemotingClient) -> None:
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS)
    for version in (0, V3_0_11 - 1):
        body = wrapper_body_pre37(TOPICS, broker.dv(False))
        ext = {**broker.identity(), "haServerAddr": broker.addr,
               "bodyCrc32": str(java_crc32(body))}
        await ok(client, Command(103, ext, body, version))
        assert (await route(client, "T1")).body_json()["queueDatas"][0]["readQueueNums"] == 4
    # The same bare wrapper from a >= V3_0_11 broker is read as a RegisterBrokerBody: no topics.
    other = Broker("c1", "10.0.1.1:10911", "broker-b", 0)
    body = wrapper_body_pre37([TopicConf("TB1"), TopicConf("TB2")], other.dv(False))
    await ok(client, Command(103, {**other.identity(), "bodyCrc32": "0"}, body, V3_0_11))
    assert (await route(client, "TB1")).code == TOPIC_NOT_EXIST


# --- a 5.x broker --------------------------------------------------------------------------------


async def test_java_5x_broker(client: RemotingClient, worker: Worker) -> None:
    master = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", TOPICS,
                    state_version=3, zone="zone-1")
    mappings = {"T1": {"bname": "broker-a", "currIdMap": {0: 0, 1: 1}, "dirty": False,
                       "epoch": 1, "scope": "__global__", "topic": "T1", "totalQueues": 2}}
    req = master.register_5x(acting_master=True, timeout_ms=10_000, mappings=mappings)
    assert req.body is not None and b'"currIdMap":{0:0,1:1}' in req.body  # bare keys, as Java
    assert b'"stateVersion":3' in req.body and b'"attributes":{}' in req.body
    resp = await ok(client, req)
    assert resp.header_json is not None and resp.header_json["extFields"] == {}
    live = await row(worker, master)
    assert (live["heartbeatTimeoutMillis"], live["stateVersion"], live["zoneName"]) == (
        "10000", "3", "zone-1")
    assert (await route(client, "T1")).body_json()["brokerDatas"] == [{
        "brokerAddrs": {"0": "10.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "c1",
        "enableActingMaster": True, "zoneName": "zone-1"}]
    # Heartbeats as a slave-acting-master broker sends them: oneway, every second.
    await client.oneway(master.heartbeat())
    await client.oneway(master.query_data_version(oneway=True))
    resp = await ok(client, master.query_data_version())
    assert resp.ext_fields == {"changed": "false"}
    assert resp.body == b'{"counter":1,"stateVersion":3,"timestamp":1700000000000}'
    assert client.unexpected == []
    # Boolean headers use parseBoolean: only "true", any case, no surrounding blanks.
    req = master.register_5x()
    assert req.ext_fields is not None
    req.ext_fields["enableActingMaster"] = " true"
    await ok(client, req)
    assert (await route(client, "T1")).body_json()["brokerDatas"][0]["enableActingMaster"] is False
    req = master.register_5x()
    assert req.ext_fields is not None
    req.ext_fields["enableActingMaster"] = "TRUE"
    await ok(client, req)
    assert (await route(client, "T1")).body_json()["brokerDatas"][0]["enableActingMaster"] is True


@pytest.mark.parametrize("label", [True, False], ids=["labelled", "mislabelled"])
async def test_java_5x_broker_compressed_body(client: RemotingClient, label: bool) -> None:
    """``compressedRegister=true`` on a 5.x broker deflates the body but still sends
    compressed=false. Java would fail to parse it; nsfleet inflates any zlib stream (a
    deliberate difference)."""
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS,
                    filter_servers=["10.0.0.1:30000"])
    mappings = {"T1": {"bname": "broker-a", "currIdMap": {0: 0}, "epoch": 1, "topic": "T1",
                       "totalQueues": 1}}
    req = broker.register_5x(compressed_body=True, label_compressed=label, mappings=mappings)
    assert req.body is not None and req.body[:1] == b"\x78"
    await ok(client, req)
    body = (await route(client, "T2")).body_json()
    assert body["queueDatas"] == [{"brokerName": "broker-a", "perm": 7, "readQueueNums": 8,
                                   "topicSysFlag": 0, "writeQueueNums": 8}]
    assert body["filterServerTable"] == {"10.0.0.1:10911": ["10.0.0.1:30000"]}


async def test_crc32(client: RemotingClient) -> None:
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS)
    req = broker.register_5x()
    assert req.ext_fields is not None and req.body is not None
    good = req.ext_fields["bodyCrc32"]
    tampered = req.body.replace(b'"readQueueNums":4', b'"readQueueNums":5')
    resp = await client.call(Command(103, req.ext_fields, tampered, V5_3_3))
    assert (resp.code, resp.remark) == (SYSTEM_ERROR, "crc32 not match")
    assert (await route(client, "T1")).code == TOPIC_NOT_EXIST  # nothing registered
    # 0 skips the check; so does a value that is not a Java int (the field keeps its default).
    for crc in ("0", "4294967295", "12x"):
        await ok(client, Command(103, {**req.ext_fields, "bodyCrc32": crc}, tampered, V5_3_3))
    assert (await route(client, "T1")).body_json()["queueDatas"][0]["readQueueNums"] == 5
    await ok(client, Command(103, {**req.ext_fields, "bodyCrc32": good}, req.body, V5_3_3))
    # Same DataVersion and the topic is there: the queue data is not rewritten (the topic
    # update of RouteInfoManager.registerBroker skips unchanged topics).
    assert (await route(client, "T1")).body_json()["queueDatas"][0]["readQueueNums"] == 5
    broker.counter += 1
    await ok(client, broker.register_5x())
    assert (await route(client, "T1")).body_json()["queueDatas"][0]["readQueueNums"] == 4


async def test_fenced_registration_still_gets_the_order_topic_table(
        client: RemotingClient) -> None:
    """An older stateVersion taking over an id is fenced (the stateVersion check of
    RouteInfoManager.registerBroker): SUCCESS with no master or HA fields, and the
    ORDER_TOPIC_CONFIG table attached as for any non-null result."""
    await ok(client, Command(100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1",
                                   "value": "broker-a:4"}))
    first = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS, state_version=5)
    await ok(client, first.register_5x())
    stale = Broker("c1", "10.0.0.9:10911", "broker-a", 0, topics=TOPICS, state_version=3)
    resp = await ok(client, stale.register_5x())
    assert resp.header_json is not None and resp.header_json["extFields"] == {}
    assert resp.body == b'{"table":{"T1":"broker-a:4"}}'
    brokers = (await route(client, "T1")).body_json()["brokerDatas"]
    assert brokers[0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}


# --- clients of several versions -----------------------------------------------------------------


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
@pytest.mark.parametrize(("version", "ext", "expected"), [
    (121, {}, LEGACY_T1),
    (121, {"acceptStandardJsonOnly": "true"}, STANDARD_T1_4X),
    (121, {"acceptStandardJsonOnly": "True"}, STANDARD_T1_4X),
    (121, {"acceptStandardJsonOnly": "false"}, LEGACY_T1),
    (121, {"acceptStandardJsonOnly": " true"}, LEGACY_T1),
    (400, {}, LEGACY_T1),
    (401, {}, STANDARD_T1_4X),
    (401, {"acceptStandardJsonOnly": "false"}, STANDARD_T1_4X),
    (V5_3_3, {}, STANDARD_T1),
])
async def test_route_encoding_by_client_version(client: RemotingClient, stype: int,
                                                version: int, ext: dict[str, str],
                                                expected: bytes) -> None:
    for b in (Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS),
              Broker("c1", "10.0.0.2:10911", "broker-a", 1, topics=TOPICS)):
        await ok(client, b.register_5x())
    req = Command(105, {"topic": "T1", **ext}, None, version, serialize_type=stype,
                  language="JAVA" if version > 121 else "GO")
    resp = await client.call(req)
    assert (resp.code, resp.serialize_type, resp.opaque, resp.version) == (
        SUCCESS, stype, req.opaque, answer_version(version))
    assert resp.body == expected


async def test_zone_filtering(client: RemotingClient) -> None:
    topics = [TopicConf("TZ", 4, 4), TopicConf("TZ2")]
    a = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=topics, zone="z1")
    b = Broker("c1", "10.0.1.1:10911", "broker-b", 0, topics=topics, zone="z2",
               filter_servers=["10.0.1.1:30000"])
    c = Broker("c1", "10.0.2.2:10911", "broker-c", 1, topics=topics, zone="z2")  # no master
    for broker in (a, b, c):
        await ok(client, broker.register_5x())
    full = (await route(client, "TZ")).body_json()
    assert [d["brokerName"] for d in full["brokerDatas"]] == ["broker-a", "broker-b", "broker-c"]
    assert full["filterServerTable"] == {"10.0.1.1:10911": ["10.0.1.1:30000"]}
    filtered = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"c1","enableActingMaster":false,"zoneName":"z1"},'
        b'{"brokerAddrs":{1:"10.0.2.2:10911"},"brokerName":"broker-c","cluster":"c1",'
        b'"enableActingMaster":false,"zoneName":"z2"}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4},{"brokerName":"broker-c","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}')
    for stype in (JSON, ROCKETMQ):
        for zone in ("z1", "Z1"):
            # Re-encoded with the legacy encoder whatever the client version (Java's hook).
            resp = await route(client, "TZ", stype=stype,
                               ext={"__ZONE_MODE": "true", "__ZONE_NAME": zone})
            assert (resp.code, resp.body) == (SUCCESS, filtered)
    for ext in ({"__ZONE_MODE": "false", "__ZONE_NAME": "z1"}, {"__ZONE_NAME": "z1"},
                {"__ZONE_MODE": "true", "__ZONE_NAME": "  "}, {"__ZONE_MODE": "true"}):
        assert (await route(client, "TZ", ext=ext)).body_json() == full
    resp = await route(client, "nope", ext={"__ZONE_MODE": "true", "__ZONE_NAME": "z1"})
    assert resp.code == TOPIC_NOT_EXIST


def test_zone_filter_keeps_a_group_with_an_empty_address_map() -> None:
    """ZoneRouteRPCHook skips only a *null* brokerAddrs; an empty map has no master and is kept."""
    route = TopicRouteData(
        [QueueData("e", 1, 1, 6), QueueData("far", 1, 1, 6)],
        [BrokerData("c", "e", {}, zone_name="z2"), BrokerData("c", "far", {0: "h:1"}, False, "z2")],
        {"h:1": ["f:1"]})
    out = filter_by_zone(route, "z1")
    assert [b.broker_name for b in out.broker_datas] == ["e"]
    assert [q.broker_name for q in out.queue_datas] == ["e"]
    assert out.filter_server_table == {}


async def test_order_topic_conf(client: RemotingClient) -> None:
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS)
    await ok(client, broker.register_5x())
    await ok(client, Command(100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1",
                                   "value": "broker-a:4;broker-b:4"}))
    assert "orderTopicConf" not in (await route(client, "T1")).body_json()  # disabled
    await ok(client, Command(318, None, b"orderMessageEnable=true"))
    for version in (121, V5_3_3):
        body = (await route(client, "T1", version=version)).body
        assert body is not None
        assert b'"filterServerTable":{},"orderTopicConf":"broker-a:4;broker-b:4","queueDatas"' \
            in body
    assert "orderTopicConf" not in (await route(client, "T2")).body_json()  # no KV entry
    # The broker gets the whole namespace back on registration.
    resp = await ok(client, broker.register_5x())
    assert resp.body == b'{"table":{"T1":"broker-a:4;broker-b:4"}}'
    await ok(client, Command(102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"}))
    assert "orderTopicConf" not in (await route(client, "T1")).body_json()
    resp = await ok(client, broker.register_5x())
    assert resp.body == b'{"table":{}}'  # the emptied namespace still exists


async def test_unregister_and_reregister(client: RemotingClient) -> None:
    broker = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=TOPICS)
    await ok(client, broker.register_5x())
    await ok(client, broker.unregister())  # a broker's shutdown
    assert (await route(client, "T1")).code == TOPIC_NOT_EXIST
    resp = await ok(client, broker.query_data_version())
    assert (resp.ext_fields, resp.body) == ({"changed": "true"}, None)
    await ok(client, broker.register_5x())  # forceRegister, as at start-up
    assert (await route(client, "T1")).code == SUCCESS
