"""Both front ends over one route store: what one protocol writes the other reads, on one worker
and across two workers of a fleet sharing a namespace (route cache on, as in production)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import (
    QUERY_NOT_FOUND,
    SUCCESS,
    TOPIC_NOT_EXIST,
    Broker,
    Command,
    TopicConf,
    Worker,
    running_worker,
)

pytestmark = pytest.mark.redis

MASTER = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)], zone="z1")
HTTP_MASTER = {"clusterName": "c2", "brokerAddr": "10.0.1.1:10911", "brokerName": "broker-h",
               "brokerId": 0, "haServerAddr": "10.0.1.1:10912", "enableActingMaster": False,
               "dataVersion": {"counter": 1, "timestamp": 100, "stateVersion": 0},
               "topicConfigTable": {"H1": {"readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                                    "H2": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}}
HTTP_SLAVE = {**HTTP_MASTER, "brokerAddr": "10.0.1.2:10911", "brokerId": 1,
              "haServerAddr": "10.0.1.2:10912"}


@pytest.fixture
async def worker(redis_server: RedisServer) -> AsyncIterator[Worker]:
    async with running_worker(redis_server.url, route_cache=True) as w:
        yield w


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as resp:
        return resp.status, await resp.json()


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    """Routes are cached per worker and invalidated through Redis pub/sub: a read right after a
    write elsewhere may still see the old route for a moment."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_registered_over_remoting_visible_over_http(worker: Worker,
                                                          http: aiohttp.ClientSession) -> None:
    client = await worker.connect()
    try:
        resp = await client.call(MASTER.register_5x(timeout_ms=30_000))
        assert resp.code == SUCCESS
        remoting = (await client.request(105, {"topic": "T1"})).body_json()
        status, route = await get(http, f"{worker.http_url}/v1/routes/T1")
        assert status == 200 and route == remoting
        assert route["brokerDatas"] == [{"brokerAddrs": {"0": "10.0.0.1:10911"},
                                         "brokerName": "broker-a", "cluster": "c1",
                                         "enableActingMaster": False, "zoneName": "z1"}]
        status, info = await get(http, f"{worker.http_url}/v1/cluster-info")
        assert status == 200
        assert info == (await client.request(106)).body_json()
        assert info["clusterAddrTable"] == {"c1": ["broker-a"]}
        status, brokers = await get(http, f"{worker.http_url}/v1/brokers")
        (live,) = brokers["brokers"]
        assert (live["brokerAddr"], live["heartbeatTimeoutMillis"], live["zoneName"]) == (
            MASTER.addr, 30_000, "z1")
    finally:
        await client.close()
    # The broker's connection closed: it is unregistered, and HTTP sees that too.
    async def gone() -> bool:
        return (await get(http, f"{worker.http_url}/v1/routes/T1"))[0] == 404
    await eventually(gone)


async def test_registered_over_http_visible_over_remoting(worker: Worker,
                                                          http: aiohttp.ClientSession) -> None:
    for body in (HTTP_MASTER, HTTP_SLAVE):
        async with http.post(f"{worker.http_url}/v1/brokers/register", json=body) as resp:
            assert resp.status == 200, await resp.text()
    client = await worker.connect()
    try:
        legacy = await client.request(105, {"topic": "H1"}, version=121)  # 4.x: no acting master
        assert legacy.body == (
            b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.1.1:10911",1:"10.0.1.2:10911"},'
            b'"brokerName":"broker-h","cluster":"c2"}],'
            b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-h","perm":6,'
            b'"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}')
        standard = await client.request(105, {"topic": "H1"})
        assert await get(http, f"{worker.http_url}/v1/routes/H1") == (200, standard.body_json())
        group = await client.request(901, {"clusterName": "c2", "brokerName": "broker-h"})
        assert group.body == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"10.0.1.1:10911",'
                              b'1:"10.0.1.2:10911"},"brokerName":"broker-h","cluster":"c2"}}')
        qdv = await client.request(322, {"clusterName": "c2", "brokerAddr": "10.0.1.1:10911",
                                         "brokerName": "broker-h", "brokerId": "0"},
                                   b'{"counter":1,"stateVersion":0,"timestamp":100}')
        assert qdv.ext_fields == {"changed": "false"}
        # Unregistered over remoting, gone over HTTP.
        for body in (HTTP_MASTER, HTTP_SLAVE):
            ident = {k: str(body[k]) for k in ("clusterName", "brokerAddr", "brokerName",
                                               "brokerId")}
            assert (await client.request(104, ident)).code == SUCCESS

        async def gone() -> bool:
            return (await get(http, f"{worker.http_url}/v1/routes/H1"))[0] == 404
        await eventually(gone)
        assert (await client.request(105, {"topic": "H1"})).code == TOPIC_NOT_EXIST
    finally:
        await client.close()


async def test_kv_config_across_protocols(worker: Worker, http: aiohttp.ClientSession) -> None:
    base = f"{worker.http_url}/v1/kv"
    async with http.put(f"{base}/ns1/k1", json={"value": "from-http"}) as resp:
        assert resp.status == 200
    client = await worker.connect()
    try:
        got = await client.request(101, {"namespace": "ns1", "key": "k1"})
        assert (got.code, got.ext_fields) == (SUCCESS, {"value": "from-http"})
        assert (await client.request(219, {"namespace": "ns1"})).body == \
            b'{"table":{"k1":"from-http"}}'
        assert (await client.request(100, {"namespace": "ns1", "key": "k2",
                                           "value": "from-remoting"})).code == SUCCESS
        assert await get(http, f"{base}/ns1/k2") == (200, {"value": "from-remoting"})
        assert await get(http, f"{base}/ns1") == (
            200, {"table": {"k1": "from-http", "k2": "from-remoting"}})
        async with http.delete(f"{base}/ns1/k1") as resp:
            assert resp.status == 200
        got = await client.request(101, {"namespace": "ns1", "key": "k1"})
        assert (got.code, got.remark) == (QUERY_NOT_FOUND,
                                          "No config item, Namespace: ns1 Key: k1")
    finally:
        await client.close()


async def test_config_update_over_remoting_applies_to_http(worker: Worker,
                                                           http: aiohttp.ClientSession) -> None:
    client = await worker.connect()
    try:
        assert (await client.request(318, body=b"enableAllTopicList=false")).code == SUCCESS
    finally:
        await client.close()
    async with http.get(f"{worker.http_url}/v1/topics") as resp:
        assert resp.status == 403


async def test_two_workers_share_one_namespace(worker: Worker, redis_server: RedisServer,
                                               http: aiohttp.ClientSession) -> None:
    """A broker registers on one worker; a client on another sees it; the broker's connection
    closes and the other worker's cached route is invalidated."""
    async with running_worker(redis_server.url, route_cache=True,
                              namespace=worker.settings.namespace) as other:
        broker = await worker.connect()
        reader = await other.connect()
        try:
            assert (await reader.request(105, {"topic": "T1"})).code == TOPIC_NOT_EXIST
            assert (await broker.call(MASTER.register_5x())).code == SUCCESS

            async def visible() -> bool:
                return (await reader.request(105, {"topic": "T1"})).code == SUCCESS
            await eventually(visible)
            # Cached now; a change on the first worker must reach the second one's cache.
            assert (await broker.request(205, {"brokerName": "broker-a"})).ext_fields == {
                "wipeTopicCount": "2"}

            async def wiped() -> bool:
                got = await reader.request(105, {"topic": "T1"})
                return bool(got.body_json()["queueDatas"][0]["perm"] == 4)
            await eventually(wiped)
            await broker.close()

            async def gone() -> bool:
                return (await reader.request(105, {"topic": "T1"})).code == TOPIC_NOT_EXIST
            await eventually(gone)
            status, _ = await get(http, f"{other.http_url}/v1/routes/T1")
            assert status == 404
        finally:
            await broker.close()
            await reader.close()


async def test_remoting_write_invalidates_the_cache_for_http(worker: Worker,
                                                             http: aiohttp.ClientSession) -> None:
    client = await worker.connect()
    try:
        await client.call(MASTER.register_5x())
        assert (await get(http, f"{worker.http_url}/v1/routes/T1"))[0] == 200  # now cached
        assert (await client.call(Command(216, {"topic": "T1"}))).code == SUCCESS

        async def gone() -> bool:
            return (await get(http, f"{worker.http_url}/v1/routes/T1"))[0] == 404
        await eventually(gone)
    finally:
        await client.close()
