"""Every HTTP endpoint through aiohttp's test client, on fakeredis, including the error cases."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient

from nsfleet.domain.model import QueueData
from nsfleet.http.app import STATE_KEY, HttpOptions, create_app
from nsfleet.http.openapi import openapi_document
from nsfleet.service.address_server import AddressServer
from nsfleet.service.nameserver import NameServer
from nsfleet.store import RouteStore
from tests.support.service import running_nameserver

MASTER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
          "brokerId": 0, "haServerAddr": "10.0.0.1:10912", "enableActingMaster": False,
          "dataVersion": {"counter": 1, "timestamp": 100, "stateVersion": 0},
          "topicConfigTable": {"T1": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
                               "T2": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6}}}
SLAVE = {**MASTER, "brokerAddr": "10.0.0.2:10911", "brokerId": 1, "haServerAddr": "10.0.0.2:1"}

# A small body limit and a short long-poll cap, so their tests stay quick.
OPTIONS = HttpOptions(max_body_size=64 * 1024, long_poll_max=5)


@pytest.fixture
async def http_store(fake_redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(fake_redis, "http")
    await store.load_scripts()
    return store


@pytest.fixture
async def ns(http_store: RouteStore) -> AsyncIterator[NameServer]:
    async with running_nameserver(http_store) as ns:
        yield ns


@pytest.fixture
async def client(ns: NameServer, aiohttp_client: Any) -> TestClient:
    return await aiohttp_client(create_app(ns, options=OPTIONS))


async def _json(resp: Any, status: int) -> Any:
    assert resp.status == status, await resp.text()
    return await resp.json()


async def _register(client: TestClient, body: dict[str, Any] = MASTER) -> Any:
    return await _json(await client.post("/v1/brokers/register", json=body), 200)


async def _keys(store: RouteStore) -> set[str]:
    """Every key but the store's layout (decided by its first queue-data call)."""
    return set(await store.redis.keys("*")) - {store.keys.layout}


async def test_register_route_and_unregister(client: TestClient) -> None:
    out = await _register(client)
    assert out["masterAddr"] is None and out["kvTable"] is None and out["fenced"] is False
    out = await _register(client, SLAVE)
    assert out["masterAddr"] == "10.0.0.1:10911" and out["haServerAddr"] == "10.0.0.1:10912"
    resp = await client.get("/v1/routes/T1")
    route = await _json(resp, 200)
    assert re.fullmatch(r"[0-9a-f]{16}", resp.headers["ETag"].strip('"'))  # the body's digest
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"},
                                     "brokerName": "broker-a", "cluster": "c1",
                                     "enableActingMaster": False}]
    assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                                    "topicSysFlag": 0, "writeQueueNums": 4}]
    assert route["filterServerTable"] == {}
    for body in (MASTER, SLAVE):
        ident = {k: body[k] for k in ("clusterName", "brokerAddr", "brokerName", "brokerId")}
        await _json(await client.post("/v1/brokers/unregister", json=ident), 200)
    body = await _json(await client.get("/v1/routes/T1"), 404)
    assert body == {"code": 17, "error": "No topic route info in name server for the topic: T1"}


async def test_heartbeat_and_query_data_version(client: TestClient) -> None:
    ident = {k: MASTER[k] for k in ("clusterName", "brokerAddr", "brokerName", "brokerId")}
    assert (await _json(await client.post("/v1/brokers/heartbeat", json=ident), 200)) == {
        "known": False}
    await _register(client)
    assert (await _json(await client.post("/v1/brokers/heartbeat", json=ident), 200))["known"]
    same = await _json(await client.post("/v1/brokers/query-data-version", json={
        **ident, "dataVersion": MASTER["dataVersion"]}), 200)
    assert same == {"changed": False, "dataVersion": {"counter": 1, "stateVersion": 0,
                                                      "timestamp": 100}}
    other = await _json(await client.post("/v1/brokers/query-data-version", json={
        **ident, "dataVersion": {"counter": 2, "timestamp": 100}}), 200)
    assert other["changed"] is True
    brokers = (await _json(await client.get("/v1/brokers"), 200))["brokers"]
    assert [b["brokerAddr"] for b in brokers] == ["10.0.0.1:10911"]
    assert brokers[0]["deadline"] - brokers[0]["lastUpdateTimestamp"] == 120_000


async def test_cluster_info_topics_and_members(client: TestClient) -> None:
    await _register(client)
    await _register(client, SLAVE)
    info = await _json(await client.get("/v1/cluster-info"), 200)
    assert info["clusterAddrTable"] == {"c1": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "10.0.0.1:10911",
                                                                  "1": "10.0.0.2:10911"}
    assert (await _json(await client.get("/v1/topics"), 200)) == {"topicList": ["T1", "T2"]}
    assert (await _json(await client.get("/v1/clusters/c1/topics"), 200))["topicList"] == [
        "T1", "T2"]
    assert (await _json(await client.get("/v1/clusters/nope/topics"), 200))["topicList"] == []
    system = await _json(await client.get("/v1/topics/system"), 200)
    assert system == {"topicList": ["broker-a", "c1"], "brokerAddr": "10.0.0.1:10911"}
    for path in ("/v1/topics/unit", "/v1/topics/unit-sub", "/v1/topics/unit-sub-ununit"):
        assert (await _json(await client.get(path), 200))["topicList"] == []
    members = await _json(await client.get("/v1/brokers/broker-a/members?cluster=c1"), 200)
    assert members["brokerMemberGroup"]["brokerAddrs"] == {"0": "10.0.0.1:10911",
                                                           "1": "10.0.0.2:10911"}


async def test_topic_delete_register_and_perm(client: TestClient) -> None:
    await _register(client)
    assert (await _json(await client.post("/v1/brokers/broker-a/wipe-write-perm"), 200)) == {
        "wipeTopicCount": 2}
    route = await _json(await client.get("/v1/routes/T1"), 200)
    assert route["queueDatas"][0]["perm"] == 4
    assert (await _json(await client.post("/v1/brokers/broker-a/add-write-perm"), 200)) == {
        "addTopicCount": 2}
    assert (await _json(await client.get("/v1/routes/T1"), 200))["queueDatas"][0]["perm"] == 6
    await _json(await client.delete("/v1/topics/T1?cluster=other"), 200)
    await _json(await client.get("/v1/routes/T1"), 200)
    await _json(await client.delete("/v1/topics/T1"), 200)
    await _json(await client.get("/v1/routes/T1"), 404)
    qd = {"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    await _json(await client.put("/v1/topics/T9", json={"queueDatas": [qd]}), 200)
    assert (await _json(await client.get("/v1/routes/T9"), 200))["queueDatas"][0][
        "readQueueNums"] == 2
    # A group no broker registered: Java skips it (REGISTER_TOPIC_IN_NAMESRV still does); the
    # HTTP API names it and writes nothing, not even the known groups before it.
    unknown = {**qd, "brokerName": "nobody"}
    out = await _json(await client.put("/v1/topics/T9", json={"queueDatas": [
        {**qd, "readQueueNums": 5}, unknown]}), 400)
    assert out == {"code": 400, "error": "queueDatas[1].brokerName: no broker group nobody is "
                   "registered (a topic is written to registered broker groups only); nothing "
                   "written"}
    assert (await _json(await client.get("/v1/routes/T9"), 200))["queueDatas"][0][
        "readQueueNums"] == 2
    await _json(await client.put("/v1/topics/T10", json={"queueDatas": [unknown]}), 400)
    await _json(await client.get("/v1/routes/T10"), 404)
    # Write perm of a group no broker registered: Java answers a count of 0 (so does remoting).
    for action in ("wipe-write-perm", "add-write-perm"):
        out = await _json(await client.post(f"/v1/brokers/nobody/{action}"), 404)
        assert out == {"code": 404, "error": "no broker group nobody is registered: nothing "
                       "changed (check the name: nsfleet admin cluster-list)"}
    await _json(await client.post("/v1/brokers/bad:name/wipe-write-perm"), 404)


async def test_kv(client: TestClient) -> None:
    body = await _json(await client.get("/v1/kv/ns1/k1"), 404)
    assert body == {"code": 22, "error": "No config item, Namespace: ns1 Key: k1"}
    assert (await _json(await client.get("/v1/kv/ns1"), 404))["code"] == 22
    await _json(await client.put("/v1/kv/ns1/k1", json={"value": "v1"}), 200)
    assert (await _json(await client.get("/v1/kv/ns1/k1"), 200)) == {"value": "v1"}
    assert (await _json(await client.get("/v1/kv/ns1"), 200)) == {"table": {"k1": "v1"}}
    await _json(await client.delete("/v1/kv/ns1/k1"), 200)
    await _json(await client.get("/v1/kv/ns1/k1"), 404)
    assert (await _json(await client.get("/v1/kv/ns1"), 200)) == {"table": {}}


async def test_order_topic_conf_reaches_brokers_and_routes(client: TestClient,
                                                           ns: NameServer) -> None:
    await _json(await client.put("/v1/kv/ORDER_TOPIC_CONFIG/T1", json={"value": "broker-a:4"}),
                200)
    assert (await _register(client))["kvTable"] == {"T1": "broker-a:4"}
    assert "orderTopicConf" not in await _json(await client.get("/v1/routes/T1"), 200)
    await ns.config.update({"orderMessageEnable": "true"})
    route = await _json(await client.get("/v1/routes/T1"), 200)
    assert route["orderTopicConf"] == "broker-a:4"


@pytest.mark.parametrize(("body", "field"), [
    ({**MASTER, "brokerAddr": "no-port"}, "brokerAddr"),
    ({**MASTER, "brokerId": "zero"}, "brokerId"),
    ({k: v for k, v in MASTER.items() if k != "clusterName"}, "clusterName"),
    ({**MASTER, "brokerName": "a:b"}, "brokerName"),
    ({**MASTER, "topicConfigTable": {"T1": {"perm": "rw"}}}, "topicConfigTable.T1.perm"),
    ({**MASTER, "topicConfigTable": [1]}, "topicConfigTable"),
    ({**MASTER, "enableActingMaster": "yes"}, "enableActingMaster"),
    ({**MASTER, "dataVersion": {"counter": "x"}}, "dataVersion.counter"),
    ({**MASTER, "filterServerList": ["bad\n"]}, "filterServerList[0]"),
])
async def test_invalid_registration_names_the_field_and_writes_nothing(
        client: TestClient, http_store: RouteStore, body: dict[str, Any], field: str) -> None:
    before = await _keys(http_store)
    out = await _json(await client.post("/v1/brokers/register", json=body), 400)
    assert out["code"] == 400 and out["error"].startswith(field), out
    assert await _keys(http_store) == before


async def test_registration_follows_the_remoting_acceptance_rules(client: TestClient) -> None:
    """Numbers as decimal strings, as fastjson reads them; a topic that cannot be stored is
    dropped alone and named; host-name broker names and their topics are stored."""
    name = "broker-a.rmq.svc.cluster.local"
    body = {**MASTER, "brokerName": name, "brokerId": "0", "topicConfigTable": {
        name: {"readQueueNums": "8", "perm": 7}, "bad,topic": {}, "%RETRY%g+T1": {"perm": 14}}}
    out = await _register(client, body)
    assert out["droppedTopics"] == [{"topic": "bad,topic", "reason": out["droppedTopics"][0][
        "reason"]}] and "','" in out["droppedTopics"][0]["reason"]
    route = await _json(await client.get(f"/v1/routes/{name}"), 200)
    assert route["queueDatas"][0]["readQueueNums"] == 8
    route = await _json(await client.get("/v1/routes/%25RETRY%25g%2BT1"), 200)
    assert route["queueDatas"][0]["perm"] == 14


async def test_single_topic_registration_of_unknown_id_is_refused(client: TestClient,
                                                                   http_store: RouteStore) -> None:
    body = {**MASTER, "topicConfigTable": {"T1": {}}}
    out = await _json(await client.post("/v1/brokers/register", json=body), 409)
    assert out["code"] == 1 and "register broker failed" in out["error"]
    assert await _keys(http_store) == set()


@pytest.mark.parametrize(("method", "path", "data", "status"), [
    ("post", "/v1/brokers/register", b"{not json", 400),
    ("post", "/v1/brokers/register", b"[1, 2]", 400),
    ("post", "/v1/brokers/register", b"", 400),
    ("post", "/v1/brokers/heartbeat", b"\xff\xfe", 400),
    ("put", "/v1/kv/ns/k", b'{"value": 3}', 400),
    ("put", "/v1/topics/T1", b'{"queueDatas": []}', 400),
    ("get", "/v1/routes/bad,topic", None, 400),
    ("get", "/v1/routes/T1?wait=99", None, 400),
    ("get", "/v1/nothing-here", None, 404),
    ("delete", "/v1/cluster-info", None, 405),
])
async def test_bad_requests_get_json_errors(client: TestClient, method: str, path: str,
                                            data: bytes | None, status: int) -> None:
    resp = await client.request(method, path, data=data)
    body = await _json(resp, status)
    assert body["code"] in (status, 1) and body["error"]


DEEP = b'{"a":' * 2000 + b"1" + b"}" * 2000


@pytest.mark.parametrize(("method", "path"), [
    ("post", "/v1/brokers/register"), ("post", "/v1/brokers/heartbeat"),
    ("put", "/v1/kv/ns/k"), ("post", "/v1/routes/watch"), ("put", "/v1/namesrv-config")])
async def test_deep_nesting_is_a_400_naming_the_limit(client: TestClient, method: str,
                                                      path: str) -> None:
    """Once a 500 with ~270 lines of traceback per request (issue 39)."""
    body = await _json(await client.request(method, path, data=DEEP), 400)
    assert body == {"code": 400, "error": "invalid JSON: nested deeper than 100 levels"}


async def test_a_handler_bug_is_a_json_500(
        ns: NameServer, aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*_: Any) -> Any:
        raise KeyError("x" * 5000)

    monkeypatch.setattr(NameServer, "live_brokers", broken)
    client = await aiohttp_client(create_app(ns, options=OPTIONS))
    body = await _json(await client.get("/v1/brokers"), 500)
    assert body["code"] == 1 and body["error"].startswith("KeyError: 'xxx")
    assert len(body["error"]) < 300


async def test_oversized_body_is_413_and_writes_nothing(client: TestClient,
                                                       http_store: RouteStore) -> None:
    big = {**MASTER, "pad": "x" * (70 * 1024)}
    body = await _json(await client.post("/v1/brokers/register", data=json.dumps(big)), 413)
    assert body["code"] == 413
    assert await _keys(http_store) == set()


async def test_redis_down_is_503(client: TestClient, http_store: RouteStore) -> None:
    await http_store.redis.connection_pool.disconnect()
    http_store.redis.connection_pool.connection_kwargs["server"] = None  # type: ignore[index]
    broken = aioredis.Redis(host="127.0.0.1", port=1, decode_responses=True)
    http_store.calls.redis = broken
    for s in http_store.calls._scripts.values():
        s.registered_client = broken
    body = await _json(await client.get("/v1/cluster-info"), 503)
    assert body["code"] == 503 and "Redis unavailable" in body["error"]
    ready = await _json(await client.get("/readyz"), 503)
    assert ready["error"].startswith("Redis unavailable: ") and len(ready["error"]) > 20
    text = await (await client.get("/metrics")).text()
    assert "nsfleet_store_up 0.0" in text and "nsfleet_ready 0.0" in text
    await broken.aclose()


async def test_health_metrics_openapi(client: TestClient) -> None:
    assert (await _json(await client.get("/livez"), 200))["status"] == "alive"
    assert (await _json(await client.get("/readyz"), 200))["status"] == "ready"
    assert "nsfleet_ready 1.0" in await (await client.get("/metrics")).text()
    client.app[STATE_KEY]["draining"] = True
    assert (await client.get("/readyz")).status == 503
    assert "nsfleet_ready 0.0" in await (await client.get("/metrics")).text()
    client.app[STATE_KEY]["draining"] = False
    await client.get("/v1/routes/T1")
    text = await (await client.get("/metrics")).text()
    assert 'nsfleet_http_requests_total{method="GET",route="/v1/routes/{topic}",status="404"}' \
        in text
    assert "nsfleet_http_request_seconds_bucket" in text
    assert "process_cpu_seconds_total" in text and "python_info{" in text  # standard collectors
    doc = await _json(await client.get("/openapi.json"), 200)
    assert doc == json.loads(json.dumps(openapi_document()))


async def test_openapi_covers_every_route(ns: NameServer, http_store: RouteStore) -> None:
    app: web.Application = create_app(ns, options=OPTIONS,
                                      addresses=AddressServer(http_store, ns.history))
    routes = {(r.method.lower(), r.resource.canonical) for r in app.router.routes()
              if r.method != "HEAD" and r.resource is not None}
    documented = {(m, p) for p, ops in openapi_document()["paths"].items() for m in ops}
    assert routes == documented


async def test_route_long_poll_wakes_on_change(client: TestClient) -> None:
    await _register(client)
    first = await client.get("/v1/routes/T1")
    etag = first.headers["ETag"]
    unchanged = await client.get("/v1/routes/T1?wait=0.2", headers={"If-None-Match": etag})
    assert unchanged.status == 304
    poll = asyncio.create_task(client.get("/v1/routes/T1?wait=5",
                                          headers={"If-None-Match": etag}))
    await asyncio.sleep(0.2)
    assert not poll.done()
    await client.post("/v1/brokers/broker-a/wipe-write-perm")
    resp = await asyncio.wait_for(poll, 3)
    assert resp.status == 200 and resp.headers["ETag"] != etag
    assert (await resp.json())["queueDatas"][0]["perm"] == 4


async def test_topic_lists_can_be_disabled(client: TestClient, ns: NameServer) -> None:
    await ns.config.update({"enableAllTopicList": "false", "enableTopicList": "false"})
    assert (await _json(await client.get("/v1/topics"), 403))["error"].startswith("disable")
    await _json(await client.get("/v1/clusters/c1/topics"), 403)
    await _json(await client.get("/v1/topics/unit"), 403)


async def test_etag_follows_the_body_and_a_deadline_wakes_the_long_poll(
        client: TestClient) -> None:
    """A route changes shape when a listed broker's deadline passes, with no change counter
    moving: the ETag changes with the body, and a long-poll wakes then, before any sweep."""
    await _register(client, {**MASTER, "heartbeatTimeoutMillis": 700})
    await _register(client, {**SLAVE, "heartbeatTimeoutMillis": 60_000})
    first = await client.get("/v1/routes/T1")
    etag = first.headers["ETag"]
    assert sorted((await first.json())["brokerDatas"][0]["brokerAddrs"]) == ["0", "1"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await client.get("/v1/routes/T1?wait=5", headers={"If-None-Match": etag})
    assert resp.status == 200 and loop.time() - started < 3.0
    assert resp.headers["ETag"] != etag
    assert (await resp.json())["brokerDatas"][0]["brokerAddrs"] == {"1": "10.0.0.2:10911"}


async def test_watch_answers_only_the_changed_topics(client: TestClient) -> None:
    await _register(client)
    etags = {t: (await client.get(f"/v1/routes/{t}")).headers["ETag"].strip('"')
             for t in ("T1", "T2")}
    held = {**etags, "T9": "0"}
    resp = await client.post("/v1/routes/watch?wait=0.2", json={"topics": held})
    assert resp.status == 304
    # One route changes while the watch waits: only it is answered, at once.
    watch = asyncio.create_task(client.post("/v1/routes/watch?wait=5", json={"topics": held}))
    await asyncio.sleep(0.1)
    qd = {"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    await _json(await client.put("/v1/topics/T9", json={"queueDatas": [qd]}), 200)
    out = await _json(await watch, 200)
    assert list(out["routes"]) == ["T9"]
    assert out["routes"]["T9"]["route"]["queueDatas"][0]["readQueueNums"] == 2
    # A topic that loses its route is answered with route null and ETag "0".
    await _json(await client.delete("/v1/topics/T2"), 200)
    out = await _json(await client.post("/v1/routes/watch?wait=5", json={"topics": held}), 200)
    assert out["routes"]["T2"] == {"etag": "0", "route": None} and "T1" not in out["routes"]
    # Unknown ETags (null: none held) answer at once with the current routes.
    out = await _json(await client.post("/v1/routes/watch", json={"topics": {"T1": None}}), 200)
    assert out["routes"]["T1"]["etag"] == etags["T1"]


@pytest.mark.parametrize("body", [{}, {"topics": []}, {"topics": {"T1": 5}},
                                  {"topics": {"bad,topic": None}}])
async def test_watch_refuses_bad_bodies(client: TestClient, body: dict[str, Any]) -> None:
    out = await _json(await client.post("/v1/routes/watch", json=body), 400)
    assert out["code"] == 400


async def test_a_thousand_watchers_are_woken_by_one_change(client: TestClient,
                                                           ns: NameServer) -> None:
    """1,000 concurrent watchers of overlapping topic sets: one change wakes exactly those that
    watch its topic, each with only that topic."""
    topics = [f"W{i}" for i in range(20)]
    await _register(client, {**MASTER, "topicConfigTable": {t: {} for t in topics}})
    etags = {t: (await ns.route(t)).etag for t in topics}
    stop = False
    watchers = [asyncio.create_task(ns.watch_routes(
        {t: etags[t] for t in (topics[i % 20], topics[(i + 1) % 20], topics[(i + 7) % 20])},
        10.0, lambda: stop)) for i in range(1000)]
    await asyncio.sleep(0.3)
    assert not any(w.done() for w in watchers)
    await ns.register_topic("W3", [QueueData("broker-a", 1, 1, 6)])
    woken = {i for i, w in enumerate(watchers) if "W3" in (
        topics[i % 20], topics[(i + 1) % 20], topics[(i + 7) % 20])}
    results = await asyncio.wait_for(asyncio.gather(*(watchers[i] for i in woken)), 5.0)
    assert all(list(r) == ["W3"] for r in results) and len(results) == 150
    assert not any(w.done() for i, w in enumerate(watchers) if i not in woken)
    stop = True
    idle = [w for i, w in enumerate(watchers) if i not in woken][:5]
    assert all(r == {} for r in await asyncio.wait_for(asyncio.gather(*idle), 5.0))
    for w in watchers:
        w.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)


async def test_a_config_change_that_alters_routes_reaches_long_polls(client: TestClient,
                                                                     ns: NameServer) -> None:
    await _register(client)
    await _json(await client.put("/v1/kv/ORDER_TOPIC_CONFIG/T1", json={"value": "broker-a:4"}),
                200)
    etag = (await client.get("/v1/routes/T1")).headers["ETag"]
    poll = asyncio.create_task(client.get("/v1/routes/T1?wait=5",
                                          headers={"If-None-Match": etag}))
    await asyncio.sleep(0.1)
    await ns.update_config("orderMessageEnable=true\n")
    resp = await poll
    assert resp.status == 200 and resp.headers["ETag"] != etag
    assert (await resp.json())["orderTopicConf"] == "broker-a:4"


async def test_namesrv_config_over_http(client: TestClient) -> None:
    config = (await _json(await client.get("/v1/namesrv-config"), 200))["config"]
    assert len(config) == 38 and config["enableTopicList"] == "true"  # no listenPort here
    # Unknown keys (Java ignores them silently): refused, named, nothing applied.
    out = await _json(await client.put("/v1/namesrv-config", json={
        "enableTopicList": False, "unknownKey": 1, "listenPort": 9877}), 400)
    assert out == {"code": 400, "error": "not a fleet-wide NameServer config key: unknown keys: "
                   "unknownKey; each worker's own, set by its flags: listenPort "
                   "(--remoting-port); nothing applied"}
    assert (await _json(await client.get("/v1/namesrv-config"), 200))["config"][
        "enableTopicList"] == "true"
    # A value Java cannot parse leaves the key as it was, as in Java.
    out = await _json(await client.put("/v1/namesrv-config", json={
        "enableTopicList": False, "waitSecondsForService": "abc"}), 200)
    assert out == {"applied": {"enableTopicList": "false"}}
    assert (await _json(await client.get("/v1/topics/unit"), 403))["error"].startswith("disable")
    refused = await _json(await client.put("/v1/namesrv-config",
                                           json={"configStorePath": "/tmp/x"}), 403)
    assert refused == {"code": 16, "error": "Can not update config in black list. Refused: "
                                            "configStorePath"}
    await _json(await client.put("/v1/namesrv-config", json={"nested": {"a": 1}}), 400)
    await _json(await client.put("/v1/namesrv-config", json={"enableTopicList": True}), 200)


async def test_fleet_changes_kv_namespaces_and_status(client: TestClient) -> None:
    rev = (await _json(await client.get("/v1/changes"), 200))["rev"]
    assert (await _json(await client.get(f"/v1/changes?since={rev}&wait=0.2"), 200)) == {
        "rev": rev}
    poll = asyncio.create_task(client.get(f"/v1/changes?since={rev}&wait=5"))
    await asyncio.sleep(0.1)
    await _register(client)
    assert (await _json(await poll, 200))["rev"] > rev
    await _json(await client.put("/v1/kv/ns1/k", json={"value": "v"}), 200)
    assert await _json(await client.get("/v1/kv"), 200) == {"namespaces": ["ns1"]}
    status = await _json(await client.get("/v1/status"), 200)
    assert status["sweepHeld"] == 0 and status["workerId"]
    await _json(await client.get("/v1/changes?since=x"), 400)
    page = await client.get("/ui")
    assert page.status == 200 and "nsfleet console" in await page.text()
    assert (await client.get("/ui/static/console.js")).status == 200
