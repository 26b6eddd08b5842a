"""Issue 23: ``nsfleet admin diff`` reads every field of what a Java NameServer answers. A stand-in
NameServer replays recorded Java answers (the bytes of the conformance suite:
tests/conformance/test_remoting_codes.py for cluster info with its bare numeric keys,
test_java_acceptance.py for a route with a static-topic mapping, test_remoting_brokers.py for
orderTopicConf), through the same pipelined remoting reader diff uses; changing any one field of
those bytes is reported as that field."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from nsfleet.admin.diff import run_diff
from nsfleet.client.pipeline import PipelinedNamesrv
from nsfleet.client.remoting_name_service import RemotingNameService
from nsfleet.wire.codec import FrameDecoder, RequestCode, encode_frame, make_response

CLUSTER_INFO = (
    b'{"brokerAddrTable":{'
    b'"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"c1","enableActingMaster":false},'
    b'"broker-b":{"brokerAddrs":{0:"10.0.1.1:10911"},"brokerName":"broker-b",'
    b'"cluster":"c2","enableActingMaster":false,"zoneName":"z1"}},'
    b'"clusterAddrTable":{"c1":["broker-a"],"c2":["broker-b"]}}')
STATIC_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"c1","enableActingMaster":false}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a",'
    b'"currIdMap":{0:0,1:1,2:2,3:3},"dirty":false,"epoch":1700000000123,'
    b'"scope":"__global__","topic":"StaticTopic","totalQueues":4}}}')
# orderTopicConf as a 5.x NameServer places it; a filter server as Java maps it.
ORDER_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.1.1:10911"},"brokerName":"broker-b",'
    b'"cluster":"c2","enableActingMaster":false,"zoneName":"z1"}],'
    b'"filterServerTable":{"10.0.1.1:10911":["10.0.1.1:30911"]},'
    b'"orderTopicConf":"broker-a:4;broker-b:4","queueDatas":[{"brokerName":"broker-b",'
    b'"perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}')
TOPIC_LIST = b'{"topicList":["OrderTopic","StaticTopic"]}'
KV_TABLE = b'{"table":{"OrderTopic":"broker-a:4;broker-b:4"}}'
CONFIG = b"orderMessageEnable=true\nsupportActingMaster=false\nlistenPort=9876\n"

ANSWERS: dict[tuple[int, str], bytes] = {
    (RequestCode.GET_BROKER_CLUSTER_INFO, ""): CLUSTER_INFO,
    (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, ""): TOPIC_LIST,
    (RequestCode.GET_ROUTEINFO_BY_TOPIC, "StaticTopic"): STATIC_ROUTE,
    (RequestCode.GET_ROUTEINFO_BY_TOPIC, "OrderTopic"): ORDER_ROUTE,
    (RequestCode.GET_KVLIST_BY_NAMESPACE, "ORDER_TOPIC_CONFIG"): KV_TABLE,
    (RequestCode.GET_NAMESRV_CONFIG, ""): CONFIG,
}


@asynccontextmanager
async def java_namesrv(answers: dict[tuple[int, str], bytes]) -> AsyncIterator[str]:
    """A stand-in NameServer on a free port answering the recorded bytes (else code 17/22)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for cmd in decoder.feed(data):
                ext = cmd.ext_fields or {}
                arg = ext.get("topic") or ext.get("namespace") or ""
                body = answers.get((cmd.code, arg))
                code = 0 if body is not None else (
                    17 if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC else 22)
                writer.write(encode_frame(make_response(cmd, code, body=body)))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def diff_of(left: dict[tuple[int, str], bytes],
                  right: dict[tuple[int, str], bytes]) -> list[tuple[str, str, str]]:
    async with java_namesrv(left) as a_addr, java_namesrv(right) as b_addr:
        a = RemotingNameService(PipelinedNamesrv(a_addr))
        b = RemotingNameService(PipelinedNamesrv(b_addr))
        try:
            result = await run_diff(a, b, settle=0)
        finally:
            await a.close()
            await b.close()
    return [d.identity for d in result.differences]


async def test_recorded_java_answers_compare_equal_to_themselves() -> None:
    assert await diff_of(ANSWERS, ANSWERS) == []


def edit(code: int, arg: str, old: bytes, new: bytes) -> Callable[[dict], dict]:
    def change(answers: dict[tuple[int, str], bytes]) -> dict[tuple[int, str], bytes]:
        assert answers[(code, arg)].count(old) == 1, old
        return {**answers, (code, arg): answers[(code, arg)].replace(old, new)}
    return change


R, C = RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO
FIELDS = [
    (edit(C, "", b'1:"10.0.0.2:10911"', b'1:"10.0.0.9:10911"'),
     ("broker", "broker-a", "brokerAddrs[1]")),
    (edit(C, "", b'"cluster":"c2"', b'"cluster":"c3"'), ("broker", "broker-b", "cluster")),
    (edit(C, "", b'"c2":["broker-b"]', b'"c3":["broker-b"]'),
     ("broker", "broker-b", "clusterAddrTable")),
    (edit(R, "OrderTopic", b'"zoneName":"z1"', b'"zoneName":"z2"'),
     ("broker", "broker-b", "zoneName")),
    (edit(R, "StaticTopic", b'"enableActingMaster":false', b'"enableActingMaster":true'),
     ("broker", "broker-a", "enableActingMaster")),
    (edit(R, "StaticTopic", b'"perm":6', b'"perm":4'), ("queue", "broker-a", "perm")),
    (edit(R, "StaticTopic", b'"readQueueNums":4', b'"readQueueNums":2'),
     ("queue", "broker-a", "readQueueNums/writeQueueNums")),
    (edit(R, "StaticTopic", b'"writeQueueNums":4', b'"writeQueueNums":2'),
     ("queue", "broker-a", "readQueueNums/writeQueueNums")),
    (edit(R, "OrderTopic", b'"topicSysFlag":0', b'"topicSysFlag":1'),
     ("queue", "broker-b", "topicSysFlag")),
    (edit(R, "OrderTopic", b'"broker-a:4;broker-b:4"', b'"broker-b:8"'),
     ("route", "", "orderTopicConf")),
    (edit(R, "OrderTopic", b'["10.0.1.1:30911"]', b'["10.0.1.1:30912"]'),
     ("route", "10.0.1.1:10911", "filterServerTable")),
    (edit(R, "StaticTopic", b'"epoch":1700000000123', b'"epoch":1700000000124'),
     ("route", "broker-a", "topicQueueMapping")),
    (edit(R, "StaticTopic", b"3:3}", b"3:4}"), ("route", "broker-a", "topicQueueMapping")),
    (edit(RequestCode.GET_KVLIST_BY_NAMESPACE, "ORDER_TOPIC_CONFIG", b'"broker-a:4;',
          b'"broker-a:2;'), ("kv", "ORDER_TOPIC_CONFIG", "OrderTopic")),
    (edit(RequestCode.GET_NAMESRV_CONFIG, "", b"supportActingMaster=false",
          b"supportActingMaster=true"), ("config", "", "supportActingMaster")),
    (edit(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "", b',"StaticTopic"', b""),
     ("topic", "", "present")),
]


@pytest.mark.parametrize(("change", "expected"), FIELDS, ids=[f[1][2] + "-" + str(i)
                                                            for i, f in enumerate(FIELDS)])
async def test_every_field_of_a_recorded_answer_is_read(
        change: Callable[[dict], dict], expected: tuple[str, str, str]) -> None:
    changed = change(ANSWERS)
    if expected == ("topic", "", "present"):  # the topic is gone from the list and the routes
        del changed[(R, "StaticTopic")]
    assert await diff_of(ANSWERS, changed) == [expected]


async def test_a_4x_namesrv_spells_the_sysflag_topicsynflag() -> None:
    """RocketMQ 4.x's QueueData field is topicSynFlag: the same value, not a difference."""
    flagged = edit(R, "OrderTopic", b'"topicSysFlag":0', b'"topicSysFlag":1')(ANSWERS)
    spelled_4x = edit(R, "OrderTopic", b'"topicSysFlag":1', b'"topicSynFlag":1')(flagged)
    assert await diff_of(flagged, spelled_4x) == []


async def test_a_setting_that_changes_no_answer_is_not_compared() -> None:
    listen = edit(RequestCode.GET_NAMESRV_CONFIG, "", b"listenPort=9876", b"listenPort=9877")
    assert await diff_of(ANSWERS, listen(ANSWERS)) == []
