"""What the console reads besides the classic API: the topic summary (GET /v1/topics/summary), the
fleet's recent changes (GET /v1/changes without ``since``; P:history), the favicon, and the
kinds of topic it groups. aiohttp's test client on fakeredis (the HTTP tests' fixtures); the
history stream itself on fakeredis and a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient

from nsfleet.domain.errors import StoreUnavailable
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.domain.topic_kinds import topic_kind
from nsfleet.metrics import Metrics
from nsfleet.service.nameserver import NameServer
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore
from nsfleet.store.history import ChangeHistory, HistoryEntry
from nsfleet.store.keys import Keys
from tests.unit.http.test_api import MASTER, SLAVE, _json, _register
from tests.unit.http.test_api import client as client  # the fixtures
from tests.unit.http.test_api import http_store as http_store
from tests.unit.http.test_api import ns as ns

B_TOPICS = {"T1": {"readQueueNums": 2, "writeQueueNums": 2, "perm": 4},
            "%RETRY%GID_x": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
            "%DLQ%GID_x": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
            "TBW102": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 7},
            "rmq_sys_SYNC_BROKER_MEMBER_broker-b": {"readQueueNums": 1, "writeQueueNums": 1,
                                                    "perm": 1},
            "broker-b": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 7}}
BROKER_B = {**MASTER, "brokerAddr": "10.0.0.3:10911", "brokerName": "broker-b",
            "topicConfigTable": B_TOPICS}


def test_topic_kinds_follow_rocketmq_names() -> None:
    own = {"DefaultCluster", "broker-a"}
    assert [topic_kind(t, own) for t in (
        "%RETRY%GID_a", "%DLQ%GID_a", "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC",
        "rmq_sys_wheel_timer", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "DefaultCluster",
        "broker-a", "Orders", "rmq_orders")] == [
        "retry", "dlq", "system", "system", "system", "system", "system", "system", "system",
        "system", "normal", "normal"]


async def test_topic_summary_lists_every_topic_with_its_queues(client: TestClient) -> None:
    await _register(client)
    await _register(client, SLAVE)
    await _register(client, BROKER_B)
    await _json(await client.put("/v1/kv/ORDER_TOPIC_CONFIG/T1",
                                 json={"value": "broker-a:4;broker-b:2"}), 200)
    resp = await client.get("/v1/topics/summary", headers={"Accept-Encoding": "gzip"})
    body = await _json(resp, 200)
    assert resp.headers["Content-Encoding"] == "gzip"
    assert body["queueFields"] == ["brokerName", "readQueueNums", "writeQueueNums", "perm",
                                   "topicSysFlag"]
    topics = {t["topic"]: t for t in body["topics"]}
    assert [t["topic"] for t in body["topics"]] == sorted(topics)
    assert topics["T1"] == {"topic": "T1", "kind": "normal", "orderConf": "broker-a:4;broker-b:2",
                            "queues": [["broker-a", 4, 4, 6, 0], ["broker-b", 2, 2, 4, 0]]}
    assert topics["T2"]["queues"] == [["broker-a", 8, 8, 6, 0]] and not topics["T2"]["orderConf"]
    assert {t: topics[t]["kind"] for t in B_TOPICS} == {
        "T1": "normal", "%RETRY%GID_x": "retry", "%DLQ%GID_x": "dlq", "TBW102": "system",
        "rmq_sys_SYNC_BROKER_MEMBER_broker-b": "system", "broker-b": "system"}
    assert body["rev"] == (await _json(await client.get("/v1/changes"), 200))["rev"]

    # A change shows at once (the cached answer is keyed by the change counter).
    await _json(await client.delete("/v1/topics/T2"), 200)
    assert "T2" not in {t["topic"] for t in
                        (await _json(await client.get("/v1/topics/summary"), 200))["topics"]}


async def test_topic_summary_is_refused_like_the_topic_list(client: TestClient) -> None:
    await _json(await client.put("/v1/namesrv-config",
                                 json={"enableAllTopicList": "false"}), 200)
    await _json(await client.get("/v1/topics/summary"), 403)


async def test_changes_record_what_changed_with_time_and_worker(client: TestClient,
                                                                 ns: NameServer) -> None:
    await _register(client)
    await _register(client)  # unchanged: nothing recorded
    await _json(await client.put("/v1/kv/NS/k", json={"value": "v"}), 200)
    await _json(await client.post("/v1/brokers/broker-a/wipe-write-perm"), 200)
    await _json(await client.post("/v1/brokers/unregister", json=MASTER), 200)
    body = await _json(await client.get("/v1/changes"), 200)
    assert [c["action"] for c in body["changes"]] == [
        "broker unregistered", "write perm wiped", "kv put", "broker registered"]
    registered = body["changes"][-1]
    assert registered["worker"] == ns.worker_id
    assert registered["detail"]["broker_addr"] == "10.0.0.1:10911"
    assert registered["detail"]["data_version"]["counter"] == 1
    assert registered["id"].startswith(f"{registered['time']}-")
    assert body["changes"][1]["detail"] == {"broker_name": "broker-a", "topics": 2,
                                            "remote": "127.0.0.1"}

    page = await _json(await client.get("/v1/changes?limit=2"), 200)
    assert [c["action"] for c in page["changes"]] == ["broker unregistered", "write perm wiped"]
    rest = await _json(await client.get(
        f"/v1/changes?limit=2&before={page['changes'][-1]['id']}"), 200)
    assert [c["action"] for c in rest["changes"]] == ["kv put", "broker registered"]
    for bad in ("limit=0", "limit=1001", "limit=x", "before=abc", "before=1-2-3"):
        await _json(await client.get(f"/v1/changes?{bad}"), 400)


async def test_a_failed_history_write_never_fails_the_request(client: TestClient,
                                                              ns: NameServer,
                                                              monkeypatch: Any) -> None:
    async def unavailable(changes: list[HistoryEntry]) -> None:
        raise StoreUnavailable("history down")

    monkeypatch.setattr(ns._store.history, "append", unavailable)
    await _register(client)
    assert (await _json(await client.get("/v1/routes/T1"), 200))["queueDatas"]
    errors = ns.metrics.registry.get_sample_value("nsfleet_redis_errors_total",
                                                  {"operation": "history"})
    assert errors == 1


async def test_a_sweep_records_the_brokers_it_expired(http_store: RouteStore) -> None:
    http_store.history.worker = "sweeping-worker"
    await http_store.register_broker(BrokerRegistration(
        "c", "10.0.0.9:10911", "b9", 0, heartbeat_timeout_millis=50,
        data_version=DataVersion(1, 1), topic_configs=[TopicConfig("T9"), TopicConfig("T10")]))
    await asyncio.sleep(0.2)
    assert await Sweeper(http_store, Metrics(), interval=1, guard_share=0).sweep_once() == 1
    [expired] = await http_store.history.recent(10)
    assert (expired.action, expired.worker) == ("broker expired", "sweeping-worker")
    assert expired.detail == {"reason": "silent past its deadline", "cluster": "c",
                              "broker_addr": "10.0.0.9:10911", "broker_name": "b9"}


async def test_favicon(client: TestClient) -> None:
    resp = await client.get("/favicon.ico")
    assert resp.status == 200 and (await resp.read())[:4] == b"\x00\x00\x01\x00"
    assert (await client.get("/ui/static/favicon.svg")).status == 200


async def test_history_is_capped_and_pages(any_redis: aioredis.Redis) -> None:
    history = ChangeHistory(any_redis, Keys("h").history, length=10)
    history.worker = "w1"
    await history.append([HistoryEntry(f"a{i}", {"i": i}) for i in range(300)])
    await history.append([HistoryEntry("last", {})])
    assert 11 <= await any_redis.xlen(Keys("h").history) < 301  # MAXLEN ~: trimmed by node
    newest = await history.recent(3)
    assert [c.action for c in newest] == ["last", "a299", "a298"]
    assert newest[1].detail == {"i": 299} and newest[1].worker == "w1"
    older = await history.recent(2, before=newest[-1].id)
    assert [c.action for c in older] == ["a297", "a296"]



def recorded_row_reads(store: RouteStore, monkeypatch: Any) -> list[list[str]]:
    """The topics of every row read the summary makes from now on, one list per read."""
    overview = store.topic_summary_rows
    asked: list[list[str]] = []
    read_rows = overview.rows

    async def recording(topics: list[str]) -> Any:
        asked.append(list(topics))
        return await read_rows(topics)

    monkeypatch.setattr(overview, "rows", recording)
    return asked


async def summary(client: TestClient) -> dict[str, Any]:
    """GET /v1/topics/summary's topics, by name."""
    body = await _json(await client.get("/v1/topics/summary"), 200)
    return {t["topic"]: t for t in body["topics"]}


async def test_topic_summary_reads_again_only_the_topics_that_changed(
        client: TestClient, http_store: RouteStore, monkeypatch: Any) -> None:
    await _register(client)
    await _register(client, BROKER_B)
    asked = recorded_row_reads(http_store, monkeypatch)

    assert len(await summary(client)) == 7 and len(asked[-1]) == 7
    await _json(await client.post("/v1/brokers/broker-a/wipe-write-perm"), 200)
    topics = await summary(client)
    assert sorted(asked[-1]) == ["T1", "T2"]  # broker-a's topics only
    assert topics["T1"]["queues"] == [["broker-a", 4, 4, 4, 0], ["broker-b", 2, 2, 4, 0]]
    assert topics["T2"]["queues"] == [["broker-a", 8, 8, 4, 0]]
    await _json(await client.put("/v1/kv/ORDER_TOPIC_CONFIG/TBW102", json={"value": "b:1"}), 200)
    assert (await summary(client))["TBW102"]["orderConf"] == "b:1"
    await _json(await client.post("/v1/brokers/unregister", json=MASTER), 200)
    topics = await summary(client)
    assert "T2" not in topics and topics["T1"]["queues"] == [["broker-b", 2, 2, 4, 0]]
    calls = len(asked)
    await _json(await client.put("/v1/kv/other/k", json={"value": "v"}), 200)  # no topic moved
    assert (await summary(client)) == topics and len(asked) == calls


async def test_topic_summary_shows_a_change_made_through_another_worker_at_once(
        client: TestClient, http_store: RouteStore) -> None:
    # The summary keeps its rows by the change feed; a write through another worker reaches this
    # one as a message, and an answer first waits until the feed has delivered every change
    # P:rev counts, so the kept rows of T1 are not served after it.
    await _register(client)

    async def perm_of_t1() -> int:
        body = await _json(await client.get("/v1/topics/summary"), 200)
        (t1,) = [t for t in body["topics"] if t["topic"] == "T1"]
        return int(t1["queues"][0][3])

    assert await perm_of_t1() == 6
    await http_store.wipe_write_perm("broker-a")  # not this worker's NameServer: no sync
    assert await perm_of_t1() == 4
    await http_store.add_write_perm("broker-a")
    assert await perm_of_t1() == 6


async def test_topic_summary_keeps_no_rows_read_while_their_topic_changed(
        client: TestClient, http_store: RouteStore, ns: NameServer, monkeypatch: Any) -> None:
    await _register(client)
    await _register(client, BROKER_B)
    asked = recorded_row_reads(http_store, monkeypatch)
    overview = http_store.topic_summary_rows
    read_rows = overview.rows
    inject = [True]

    async def change_mid_fill(topics: list[str]) -> Any:
        rows = await read_rows(topics)
        if inject[0] and "TBW102" in topics:
            # TBW102 (and broker-b's other writable topics) change after their rows were read
            # and before the fill ends; the message reaches this worker while it is in flight.
            inject[0] = False
            assert await http_store.wipe_write_perm("broker-b")
            await ns._cache.feed.sync()  # its message applied here, before the fill ends
        return rows

    monkeypatch.setattr(overview, "rows", change_mid_fill)

    first = await summary(client)
    assert first["TBW102"]["queues"] == [["broker-b", 8, 8, 7, 0]]  # read before the change
    topics = await summary(client)
    # The rows read mid-fill were not kept: the changed topics are read again, the others not.
    assert sorted(asked[-1]) == ["%DLQ%GID_x", "%RETRY%GID_x", "TBW102", "broker-b"]
    assert topics["TBW102"]["queues"] == [["broker-b", 8, 8, 5, 0]]
    calls = len(asked)
    assert await summary(client) == topics and len(asked) == calls  # now kept


async def test_topic_summary_reads_every_row_while_the_feed_lags(
        client: TestClient, http_store: RouteStore, ns: NameServer, monkeypatch: Any) -> None:
    await _register(client)
    asked = recorded_row_reads(http_store, monkeypatch)
    monkeypatch.setattr("nsfleet.service.topic_summary.FEED_CATCH_UP", 0.05)
    body = await _json(await client.get("/v1/topics/summary"), 200)
    every = sorted(t["topic"] for t in body["topics"])
    await _json(await client.get("/v1/topics/summary"), 200)
    assert len(asked) == 1  # kept
    # The feed has not delivered what P:rev counts (a message in flight, or lost): what the
    # worker kept cannot be vouched for, so each answer reads every row and keeps nothing.
    monkeypatch.setattr(ns._cache.feed, "rev", 0)
    for _ in range(2):
        await _json(await client.get("/v1/topics/summary"), 200)
        assert sorted(asked[-1]) == every
    assert len(asked) == 3
