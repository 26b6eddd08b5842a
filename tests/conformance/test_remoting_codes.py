"""Every NameServer request code on the wire, against a running worker (Java RequestCode and
ResponseCode, DefaultRequestProcessor.processRequest and ClientRequestProcessor).

Each test starts ``nsfleet.worker.serve`` in-process on loopback ports with a namespace of its
own on the session's redis-server, and talks to it with tests/remoting_client.py (written from
the Java protocol, not from nsfleet's codec). Response codes, remarks, extFields and bodies are
checked exactly, including whether the JSON header has an ``extFields`` key at all (Java writes
``"extFields":{}`` when the response has a custom header class whose fields are all null:
RemotingCommand.makeCustomHeaderToNet).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.remoting_client import (
    FAQ,
    JSON,
    NO_PERMISSION,
    QUERY_NOT_FOUND,
    REQUEST_CODE_NOT_SUPPORTED,
    RESPONSE_FLAG,
    ROCKETMQ,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    V4_9_8,
    V5_0_0,
    V5_3_3,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    answer_version,
    as_4x,
    dumps_fastjson,
)

pytestmark = pytest.mark.redis

ABSENT = object()  # "the JSON header has no extFields key"
UNSET = "not set any response code"  # RemotingCommand.createResponseCommand's default remark

MASTER = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)])
SLAVE = Broker("c1", "10.0.0.2:10911", "broker-a", 1, "10.0.0.2:10912",
               [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)])
ROUTE_T1_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"c1","enableActingMaster":false}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}')


def check(resp: Command, req: Command, code: int, remark: str | None = None,
          ext: Any = ABSENT, body: bytes | None = None) -> None:
    """The whole answer: envelope (NettyRemotingAbstract.processRequestCommand: opaque echoed,
    response flag, the version of a NameServer of the client's generation: 479 for 5.x, 409 for
    older clients, the request's serialize type) plus code, remark, extFields and body
    exactly."""
    assert (resp.code, resp.remark) == (code, remark), (resp.code, resp.remark)
    assert resp.opaque == req.opaque
    assert resp.flag == RESPONSE_FLAG
    assert resp.version == answer_version(req.version)
    assert resp.language == "JAVA"
    assert resp.serialize_type == req.serialize_type
    assert resp.body == body, resp.body
    if resp.serialize_type == JSON:
        h = resp.header_json
        assert h is not None
        assert list(h) == sorted(h), "fastjson writes header keys in alphabetical order"
        assert h["serializeTypeCurrentRPC"] == "JSON"
        if ext is ABSENT:
            assert "extFields" not in h, resp.header
        else:
            assert h["extFields"] == ext
    elif ext is not ABSENT:
        assert (resp.ext_fields or {}) == ext  # an empty ext map reads back as none


async def call(client: RemotingClient, code: int, ext: dict[str, str] | None = None,
               body: bytes | None = None, **kw: Any) -> tuple[Command, Command]:
    req = Command(code, ext, body, kw.pop("version", V5_3_3), **kw)
    return req, await client.call(req)


async def register(client: RemotingClient, *brokers: Broker) -> None:
    for b in brokers:
        _, resp = await call(client, 103, **_cmd_kwargs(b.register_5x()))
        assert resp.code == SUCCESS, resp.remark


def _cmd_kwargs(cmd: Command) -> dict[str, Any]:
    return {"ext": cmd.ext_fields, "body": cmd.body, "version": cmd.version}


async def config(client: RemotingClient, text: str) -> None:
    req, resp = await call(client, 318, body=text.encode())
    check(resp, req, SUCCESS)


# --- envelope ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
async def test_response_envelope_echoes_opaque_and_mirrors_the_serialize_type(
        client: RemotingClient, stype: int) -> None:
    for opaque in (1, 2**31 - 1, -5):
        req = Command(106, None, None, 121, opaque=opaque, serialize_type=stype, language="GO")
        resp = await client.call(req)
        check(resp, req, SUCCESS, body=b'{"brokerAddrTable":{},"clusterAddrTable":{}}')


@pytest.mark.parametrize(("version", "answered"), [(401, 409), (V4_9_8, 409), (412, 409),
                                                 (V5_0_0, 479), (V5_3_3, 479)])
async def test_json_header_is_byte_exact(client: RemotingClient, version: int,
                                         answered: int) -> None:
    """The header version is the answering NameServer's own: 4.9.8's for a 4.x client."""
    req = Command(106, None, None, version, opaque=7)
    resp = await client.call(req)
    assert resp.header == (b'{"code":0,"flag":1,"language":"JAVA","opaque":7,'
                           b'"serializeTypeCurrentRPC":"JSON","version":%d}' % answered)


async def test_oneway_requests_get_no_reply(client: RemotingClient) -> None:
    for code in (106, 101, 99999):  # a success, an error and an unknown code
        await client.oneway(Command(code, {"namespace": "n", "key": "k"}))
    _, resp = await call(client, 106)  # answered after the oneways were read
    assert resp.code == SUCCESS
    assert client.unexpected == []


async def test_frames_flagged_as_responses_are_not_answered(client: RemotingClient) -> None:
    client.send(Command(106, None, None, opaque=4242, flag=RESPONSE_FLAG))
    _, resp = await call(client, 106)
    assert resp.code == SUCCESS and client.unexpected == []


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
async def test_unknown_code(client: RemotingClient, stype: int) -> None:
    for code in (99, 107, 905, 30000):
        req, resp = await call(client, code, {"topic": "T"}, serialize_type=stype)
        check(resp, req, REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")
    req, resp = await call(client, 99999)  # fits the JSON header's int only
    check(resp, req, REQUEST_CODE_NOT_SUPPORTED, " request type 99999 not supported")


# --- KV config (100, 101, 102, 219) --------------------------------------------------------------


async def test_put_get_delete_kv_config(client: RemotingClient) -> None:
    req, resp = await call(client, 100, {"namespace": "ns1", "key": "k1", "value": "v1"})
    check(resp, req, SUCCESS)
    req, resp = await call(client, 101, {"namespace": "ns1", "key": "k1"})
    check(resp, req, SUCCESS, ext={"value": "v1"})
    req, resp = await call(client, 100, {"namespace": "ns1", "key": "k1", "value": "v2"})
    check(resp, req, SUCCESS)
    req, resp = await call(client, 101, {"namespace": "ns1", "key": "k1"})
    check(resp, req, SUCCESS, ext={"value": "v2"})
    req, resp = await call(client, 102, {"namespace": "ns1", "key": "k1"})
    check(resp, req, SUCCESS)
    req, resp = await call(client, 101, {"namespace": "ns1", "key": "k1"})
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: ns1 Key: k1", ext={})
    # The emptied namespace still exists (KVConfigManager.deleteKVConfig keeps it).
    req, resp = await call(client, 219, {"namespace": "ns1"})
    check(resp, req, SUCCESS, body=b'{"table":{}}')
    req, resp = await call(client, 102, {"namespace": "nope", "key": "nope"})
    check(resp, req, SUCCESS)  # always SUCCESS


async def test_kv_config_missing_fields(client: RemotingClient) -> None:
    for ext in ({"key": "k", "value": "v"}, {"namespace": "n", "value": "v"}, None):
        req, resp = await call(client, 100, ext)
        check(resp, req, SYSTEM_ERROR, "namespace or key is null")
    # Java string concatenation prints a null field as "null".
    req, resp = await call(client, 101, {"key": "k"})
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: null Key: k", ext={})
    req, resp = await call(client, 101)
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: null Key: null", ext={})
    req, resp = await call(client, 219)
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: null")
    req, resp = await call(client, 102)
    check(resp, req, SUCCESS)


async def test_put_kv_config_without_value_is_refused(client: RemotingClient) -> None:
    """Java logs the missing @CFNotNull value and stores a null; nsfleet refuses it
    (docs/compatibility.md) and writes nothing: the namespace does not appear."""
    req, resp = await call(client, 100, {"namespace": "nv", "key": "k"})
    check(resp, req, SYSTEM_ERROR, "the custom field <value> is null")
    req, resp = await call(client, 219, {"namespace": "nv"})
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: nv")


async def test_get_kvlist_by_namespace(client: RemotingClient) -> None:
    req, resp = await call(client, 219, {"namespace": "default-namespace-1"})
    check(resp, req, QUERY_NOT_FOUND, "No config item, Namespace: default-namespace-1")
    for k, v in (("b", "2"), ("a", "1"), ("ü", "ß \"q\"")):
        await call(client, 100, {"namespace": "default-namespace-1", "key": k, "value": v})
    req, resp = await call(client, 219, {"namespace": "default-namespace-1"})
    check(resp, req, SUCCESS, body='{"table":{"a":"1","b":"2","ü":"ß \\"q\\""}}'.encode())


# --- brokers (103, 104, 322, 904, 901, 106) ------------------------------------------------------


async def test_register_broker_master_slave_and_unregister(client: RemotingClient,
                                                           worker: Worker) -> None:
    req, resp = await call(client, 103, **_cmd_kwargs(MASTER.register_5x()))
    # A master: masterAddr and haServerAddr null, header class present, no ORDER namespace.
    check(resp, req, SUCCESS, ext={})
    req, resp = await call(client, 103, **_cmd_kwargs(SLAVE.register_5x()))
    check(resp, req, SUCCESS, ext={"haServerAddr": "10.0.0.1:10912",
                                   "masterAddr": "10.0.0.1:10911"})
    req, resp = await call(client, 105, {"topic": "T1"})
    check(resp, req, SUCCESS, body=ROUTE_T1_STANDARD)
    req, resp = await call(client, 104, SLAVE.identity())
    check(resp, req, SUCCESS)
    req, resp = await call(client, 104, MASTER.identity())
    check(resp, req, SUCCESS)
    req, resp = await call(client, 105, {"topic": "T1"})
    check(resp, req, TOPIC_NOT_EXIST,
          "No topic route info in name server for the topic: T1" + FAQ)
    req, resp = await call(client, 106)
    check(resp, req, SUCCESS, body=b'{"brokerAddrTable":{},"clusterAddrTable":{}}')


async def test_register_broker_returns_the_order_topic_kv_table(client: RemotingClient) -> None:
    await call(client, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1",
                             "value": "broker-a:4"})
    req, resp = await call(client, 103, **_cmd_kwargs(MASTER.register_5x()))
    check(resp, req, SUCCESS, ext={}, body=b'{"table":{"T1":"broker-a:4"}}')
    await config(client, "returnOrderTopicConfigToBroker=false")
    req, resp = await call(client, 103, **_cmd_kwargs(MASTER.register_5x()))
    check(resp, req, SUCCESS, ext={})


async def test_register_broker_errors_keep_the_response_header_class(
        client: RemotingClient) -> None:
    cmd = MASTER.register_5x()
    assert cmd.ext_fields is not None
    bad_crc = {**cmd.ext_fields, "bodyCrc32": str((int(cmd.ext_fields["bodyCrc32"]) + 1)
                                                   % 2**31)}
    req, resp = await call(client, 103, bad_crc, cmd.body)
    check(resp, req, SYSTEM_ERROR, "crc32 not match", ext={})
    # A single-topic registration from an id the name server does not know: refused by the
    # single-topic guard of RouteInfoManager.registerBroker.
    single = Broker("c1", "10.0.0.9:10911", "broker-z", 0, topics=[TopicConf("TZ")])
    req, resp = await call(client, 103, **_cmd_kwargs(single.register_5x()))
    check(resp, req, SYSTEM_ERROR, "register broker failed", ext={})


async def test_query_data_version(client: RemotingClient) -> None:
    unknown = Broker("c1", "10.0.0.7:10911", "broker-q")
    req, resp = await call(client, 322, unknown.identity())  # no body, unknown broker
    check(resp, req, SUCCESS, ext={"changed": "true"})
    # Some @CFNotNull fields of QueryDataVersionRequestHeader missing: Java's header decoding
    # refuses the first (in declaration order) before the processor runs; without extFields
    # at all it checks none.
    req, resp = await call(client, 322, {"brokerName": "x"})
    check(resp, req, SYSTEM_ERROR, "the custom field <brokerAddr> is null")
    req, resp = await call(client, 322, {**unknown.identity(), "brokerId": None})
    check(resp, req, SYSTEM_ERROR, "the custom field <brokerId> is null")
    req, resp = await call(client, 322)
    check(resp, req, SUCCESS, ext={"changed": "true"})
    await register(client, MASTER)
    stored = b'{"counter":1,"stateVersion":0,"timestamp":1700000000000}'
    req, resp = await call(client, 322, MASTER.identity(), MASTER.query_data_version().body)
    check(resp, req, SUCCESS, ext={"changed": "false"}, body=stored)
    newer = dumps_fastjson({"counter": 2, "stateVersion": 0, "timestamp": 1700000000000})
    req, resp = await call(client, 322, MASTER.identity(), newer)
    check(resp, req, SUCCESS, ext={"changed": "true"}, body=stored)
    req, resp = await call(client, 322, MASTER.identity())  # no body: changed
    check(resp, req, SUCCESS, ext={"changed": "true"}, body=stored)
    req, resp = await call(client, 322, MASTER.identity(), b"null")
    check(resp, req, SUCCESS, ext={"changed": "true"}, body=stored)


async def test_query_data_version_and_heartbeat_refresh_liveness(client: RemotingClient,
                                                                 worker: Worker) -> None:
    await register(client, MASTER)
    row = f"{worker.prefix}:broker:{MASTER.cluster}:{MASTER.addr}"

    async def last_update() -> int:
        return int(await worker.redis.hget(row, "lastUpdateTimestamp"))

    async def bumped(before: int) -> bool:
        for _ in range(100):
            if await last_update() > before:
                return True
            await asyncio.sleep(0.01)
        return False

    t0 = await last_update()
    await asyncio.sleep(0.005)
    req, resp = await call(client, 904, {"brokerAddr": MASTER.addr, "brokerName": MASTER.name,
                                         "clusterName": MASTER.cluster})
    check(resp, req, SUCCESS)
    assert await bumped(t0)
    t1 = await last_update()
    await asyncio.sleep(0.005)
    await client.oneway(MASTER.heartbeat())  # how brokers really send it
    assert await bumped(t1)
    t2 = await last_update()
    await asyncio.sleep(0.005)
    await client.oneway(MASTER.query_data_version())  # compatibleWithOldNameSrv heartbeats
    assert await bumped(t2)
    assert client.unexpected == []


async def test_broker_heartbeat_always_succeeds(client: RemotingClient) -> None:
    for ext in (None, {"clusterName": "c1"}, {"clusterName": "c1", "brokerAddr": "not an addr"},
                {"clusterName": "c1", "brokerAddr": "10.9.9.9:1", "brokerName": "b"}):
        req, resp = await call(client, 904, ext)
        check(resp, req, SUCCESS)


async def test_broker_member_group(client: RemotingClient) -> None:
    """5.x creates the response with its header class and never resets the remark."""
    await register(client, MASTER, SLAVE)
    req, resp = await call(client, 901, {"clusterName": "any", "brokerName": "broker-a"})
    check(resp, req, SUCCESS, UNSET, body=(
        b'{"brokerMemberGroup":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"any"}}'))
    req, resp = await call(client, 901, {"clusterName": "c1", "brokerName": "nobody"})
    check(resp, req, SUCCESS, UNSET, body=(
        b'{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"nobody","cluster":"c1"}}'))
    req, resp = await call(client, 901, {"clusterName": "c1", "brokerName": "no:such name"})
    check(resp, req, SUCCESS, UNSET, body=(
        b'{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"no:such name","cluster":"c1"}}'))
    req, resp = await call(client, 901)
    check(resp, req, SUCCESS, UNSET, body=b'{"brokerMemberGroup":{"brokerAddrs":{}}}')


async def test_broker_cluster_info_has_legacy_numeric_keys(client: RemotingClient) -> None:
    zoned = Broker("c2", "10.0.1.1:10911", "broker-b", 0,
                   topics=[TopicConf("T3"), TopicConf("T4")], zone="z1")
    await register(client, MASTER, SLAVE, zoned)
    body = (b'{"brokerAddrTable":{'
            b'"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
            b'"brokerName":"broker-a","cluster":"c1","enableActingMaster":false},'
            b'"broker-b":{"brokerAddrs":{0:"10.0.1.1:10911"},"brokerName":"broker-b",'
            b'"cluster":"c2","enableActingMaster":false,"zoneName":"z1"}},'
            b'"clusterAddrTable":{"c1":["broker-a"],"c2":["broker-b"]}}')
    for version in (121, 401, V5_3_3):  # always the default encoder; 4.x clients: 4.x fields
        req, resp = await call(client, 106, version=version)
        check(resp, req, SUCCESS, body=body if version >= V5_0_0 else as_4x(body))


# --- routes and topics (105, 205, 327, 206, 216, 217, 224, 304, 311-313) -------------------------


async def test_route_not_found(client: RemotingClient) -> None:
    for ext, shown in (({"topic": "Nope"}, "Nope"), (None, "null"),
                       ({"topic": "bad topic!"}, "bad topic!")):
        req, resp = await call(client, 105, ext)
        check(resp, req, TOPIC_NOT_EXIST,
              f"No topic route info in name server for the topic: {shown}{FAQ}")


async def test_wipe_and_add_write_perm(client: RemotingClient) -> None:
    await register(client, MASTER, SLAVE)
    req, resp = await call(client, 205, {"brokerName": "broker-a"})
    check(resp, req, SUCCESS, ext={"wipeTopicCount": "2"})
    req, resp = await call(client, 105, {"topic": "T1"})
    assert resp.body_json()["queueDatas"][0]["perm"] == 4
    req, resp = await call(client, 205, {"brokerName": "broker-a"})
    check(resp, req, SUCCESS, ext={"wipeTopicCount": "2"})  # counted although unchanged
    req, resp = await call(client, 327, {"brokerName": "broker-a"})
    check(resp, req, SUCCESS, ext={"addTopicCount": "2"})
    req, resp = await call(client, 105, {"topic": "T1"})
    check(resp, req, SUCCESS, body=ROUTE_T1_STANDARD)
    for ext in ({"brokerName": "nobody"}, {"brokerName": "bad:name"}, None):
        req, resp = await call(client, 205, ext)
        check(resp, req, SUCCESS, ext={"wipeTopicCount": "0"})
        req, resp = await call(client, 327, ext)
        check(resp, req, SUCCESS, ext={"addTopicCount": "0"})


async def test_all_topic_list_and_its_switch(client: RemotingClient) -> None:
    req, resp = await call(client, 206)
    check(resp, req, SUCCESS, body=b'{"topicList":[]}')
    await register(client, MASTER)
    req, resp = await call(client, 206)
    assert resp.code == SUCCESS and sorted(resp.body_json()["topicList"]) == ["T1", "T2"]
    await config(client, "enableAllTopicList=false")
    req, resp = await call(client, 206)
    check(resp, req, SYSTEM_ERROR, "disable")


async def test_delete_topic_in_namesrv(client: RemotingClient) -> None:
    other = Broker("c2", "10.0.1.1:10911", "broker-b", 0,
                   topics=[TopicConf("T1", 2, 2), TopicConf("T8")])
    await register(client, MASTER, other)
    req, resp = await call(client, 216, {"topic": "T1", "clusterName": "c9"})
    check(resp, req, SUCCESS)  # unknown cluster: a no-op
    req, resp = await call(client, 105, {"topic": "T1"})
    assert len(resp.body_json()["queueDatas"]) == 2
    req, resp = await call(client, 216, {"topic": "T1", "clusterName": "c2"})
    check(resp, req, SUCCESS)
    req, resp = await call(client, 105, {"topic": "T1"})
    assert [q["brokerName"] for q in resp.body_json()["queueDatas"]] == ["broker-a"]
    req, resp = await call(client, 216, {"topic": "T2"})
    check(resp, req, SUCCESS)
    req, resp = await call(client, 105, {"topic": "T2"})
    assert resp.code == TOPIC_NOT_EXIST
    for ext in (None, {"topic": "bad topic"}, {"topic": "T1", "clusterName": "bad:cluster"},
                {"topic": "x" * 300}):
        req, resp = await call(client, 216, ext)
        check(resp, req, SUCCESS)  # always SUCCESS


async def test_register_topic_in_namesrv(client: RemotingClient) -> None:
    await register(client, MASTER)

    def route(*qds: tuple[str, int]) -> bytes:
        return dumps_fastjson({"brokerDatas": [], "filterServerTable": {}, "queueDatas": [
            {"brokerName": n, "perm": 6, "readQueueNums": q, "topicSysFlag": 0,
             "writeQueueNums": q} for n, q in qds]})

    req, resp = await call(client, 217, {"topic": "NewT"}, route(("broker-a", 3)))
    check(resp, req, SUCCESS)
    req, resp = await call(client, 105, {"topic": "NewT"})
    assert resp.body_json()["queueDatas"] == [{"brokerName": "broker-a", "perm": 6,
                                               "readQueueNums": 3, "topicSysFlag": 0,
                                               "writeQueueNums": 3}]
    # A new topic naming an unknown broker (or one that could never register) is ignored.
    for unknown in ("broker-x", "bad name"):
        req, resp = await call(client, 217, {"topic": "NewU"},
                               route(("broker-a", 3), (unknown, 3)))
        check(resp, req, SUCCESS)
        req, resp = await call(client, 105, {"topic": "NewU"})
        assert resp.code == TOPIC_NOT_EXIST
    # An existing topic keeps the rows before the first unknown broker.
    req, resp = await call(client, 217, {"topic": "NewT"}, route(("broker-a", 5), ("bad name", 1)))
    check(resp, req, SUCCESS)
    req, resp = await call(client, 105, {"topic": "NewT"})
    assert resp.body_json()["queueDatas"][0]["readQueueNums"] == 5
    # No body, or no queueDatas: ignored, whatever the topic.
    for ext, body in (({"topic": "NewV"}, None), (None, None), (None, b"{}"),
                      ({"topic": "NewV"}, b'{"queueDatas":[]}')):
        req, resp = await call(client, 217, ext, body)
        check(resp, req, SUCCESS)
    # A body that is not a TopicRouteData fails to decode, as in Java.
    req, resp = await call(client, 217, {"topic": "NewV"}, b"\x00garbage")
    assert resp.code == SYSTEM_ERROR and resp.remark


async def test_topics_by_cluster_and_system_topics(client: RemotingClient) -> None:
    other = Broker("c2", "10.0.1.1:10911", "broker-b", 0,
                   topics=[TopicConf("T9"), TopicConf("T8")])
    req, resp = await call(client, 304)
    check(resp, req, SUCCESS, body=b'{"topicList":[]}')
    await register(client, MASTER, other)
    req, resp = await call(client, 224, {"cluster": "c1"})
    assert resp.code == SUCCESS and sorted(resp.body_json()["topicList"]) == ["T1", "T2"]
    req, resp = await call(client, 224, {"cluster": "nope"})
    check(resp, req, SUCCESS, body=b'{"topicList":[]}')
    req, resp = await call(client, 224)
    check(resp, req, SUCCESS, body=b'{"topicList":[]}')
    req, resp = await call(client, 304)
    assert resp.code == SUCCESS
    got = resp.body_json()
    assert sorted(got["topicList"]) == ["broker-a", "broker-b", "c1", "c2"]
    assert got["brokerAddr"] in (MASTER.addr, other.addr)
    await config(client, "enableTopicList=false")
    req, resp = await call(client, 224, {"cluster": "c1"})
    check(resp, req, SYSTEM_ERROR, "disable")


async def test_unit_topic_lists(client: RemotingClient) -> None:
    units = Broker("c1", "10.0.0.1:10911", "broker-a", 0, topics=[
        TopicConf("Plain"), TopicConf("Unit", sys_flag=1), TopicConf("Sub", sys_flag=2),
        TopicConf("Both", sys_flag=3)])
    await register(client, units)
    expected = {311: ["Both", "Unit"], 312: ["Both", "Sub"], 313: ["Sub"]}
    for code, topics in expected.items():
        req, resp = await call(client, code)
        assert resp.code == SUCCESS and resp.remark is None
        assert sorted(resp.body_json()["topicList"]) == topics
    await config(client, "enableTopicList=false")
    for code in expected:
        req, resp = await call(client, code)
        check(resp, req, SYSTEM_ERROR, "disable")
    req, resp = await call(client, 206)  # gated by enableAllTopicList only
    assert resp.code == SUCCESS


# --- NameServer config (318, 319) ----------------------------------------------------------------


async def test_update_and_get_namesrv_config(client: RemotingClient, worker: Worker) -> None:
    req, resp = await call(client, 319)
    assert resp.code == SUCCESS and resp.remark is None and resp.body is not None
    lines = resp.body.decode().split("\n")
    assert lines[-1] == "" and lines[:-1] == sorted(lines[:-1])
    assert "enableAllTopicList=true" in lines
    assert f"listenPort={worker.port}" in lines
    req, resp = await call(client, 318, body=b"enableAllTopicList = false\n#comment\nunknownKey=1")
    check(resp, req, SUCCESS)
    req, resp = await call(client, 319)
    lines = resp.body.decode().split("\n") if resp.body else []
    assert "enableAllTopicList=false" in lines
    assert not any(line.startswith("unknownKey") for line in lines)  # unknown keys ignored
    req, resp = await call(client, 318)  # no body
    check(resp, req, SUCCESS)
    # RequestProcessorTest.testUpdateConfig: a map's toString parses as the property "{key".
    req, resp = await call(client, 318, body=b"{key=value}")
    check(resp, req, SUCCESS)


async def test_update_namesrv_config_black_list(client: RemotingClient) -> None:
    for body in (b"configStorePath=/tmp/evil", b"kvConfigPath=/tmp/evil",
                 b"configBlackList=", b"rocketmqHome=/tmp", b"enableTopicList=false\n"
                 b"kvConfigPath=/x"):
        req, resp = await call(client, 318, body=body)
        check(resp, req, NO_PERMISSION, "Can not update config in black list.")
    req, resp = await call(client, 224, {"cluster": "c1"})
    assert resp.code == SUCCESS  # nothing of a refused update was applied


async def test_update_namesrv_config_unparsable(client: RemotingClient) -> None:
    req, resp = await call(client, 318, body=b"key=\\uZZZZ")
    check(resp, req, SYSTEM_ERROR, "string2Properties error")


# --- the same reads in the binary header ---------------------------------------------------------


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
async def test_read_codes_in_both_serialize_types(client: RemotingClient, stype: int) -> None:
    await register(client, MASTER, SLAVE)
    await call(client, 100, {"namespace": "n", "key": "k", "value": "v"}, serialize_type=stype)
    answers = {
        101: ({"namespace": "n", "key": "k"}, SUCCESS),
        105: ({"topic": "T1"}, SUCCESS),
        106: (None, SUCCESS),
        206: (None, SUCCESS),
        219: ({"namespace": "n"}, SUCCESS),
        224: ({"cluster": "c1"}, SUCCESS),
        304: (None, SUCCESS),
        311: (None, SUCCESS),
        312: (None, SUCCESS),
        313: (None, SUCCESS),
        319: (None, SUCCESS),
        322: (MASTER.identity(), SUCCESS),
        901: ({"clusterName": "c1", "brokerName": "broker-a"}, SUCCESS),
        904: (MASTER.identity(), SUCCESS),
    }
    for code, (ext, expected) in answers.items():
        req, resp = await call(client, code, ext, serialize_type=stype)
        assert (resp.code, resp.serialize_type, resp.opaque) == (expected, stype, req.opaque)
    req, resp = await call(client, 101, {"namespace": "n", "key": "k"}, serialize_type=stype)
    assert resp.ext_fields == {"value": "v"}
    req, resp = await call(client, 105, {"topic": "T1"}, serialize_type=stype)
    assert resp.body == ROUTE_T1_STANDARD


async def test_oneway_writes_are_applied(client: RemotingClient) -> None:
    await client.oneway(Command(100, {"namespace": "ow", "key": "k", "value": "v"}))
    for _ in range(200):
        _, resp = await call(client, 101, {"namespace": "ow", "key": "k"})
        if resp.code == SUCCESS:
            break
        await asyncio.sleep(0.01)
    assert resp.ext_fields == {"value": "v"}
    assert client.unexpected == []

