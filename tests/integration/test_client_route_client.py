"""RouteClient against real workers: cache, ETag revalidation, refresh, failover, TBW102
fallback and the Java client's publish/subscribe queue derivation on live routes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from nsfleet.client import (
    BrokerAgent,
    BrokerIdentity,
    FleetUnavailable,
    MessageQueue,
    RouteClient,
    TopicNotFound,
)
from nsfleet.domain.model import TopicConfig
from nsfleet.redis_server import RedisServer
from tests.support.fleet import Fleet, async_wait_until, http_json

pytestmark = pytest.mark.redis

A0 = BrokerIdentity("DefaultCluster", "broker-a", "10.0.0.1:10911")
A1 = BrokerIdentity("DefaultCluster", "broker-a", "10.0.0.2:10911", 1)
B0 = BrokerIdentity("DefaultCluster", "broker-b", "10.0.0.3:10911")
C1 = BrokerIdentity("DefaultCluster", "broker-c", "10.0.0.4:10911", 1)  # a group without master
FAST: dict[str, Any] = {"heartbeat_interval": 0.1, "interval_bounds": None}


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    with Fleet(redis_server.url, workers=2) as f:
        yield f


@pytest.fixture
async def agents() -> AsyncIterator[list[BrokerAgent]]:
    """Started agents, closed (unregistered) at the end of the test."""
    started: list[BrokerAgent] = []
    yield started
    await asyncio.gather(*(a.close() for a in started))


async def _start(agents: list[BrokerAgent], fleet: Fleet, ident: BrokerIdentity,
                 topics: list[TopicConfig]) -> BrokerAgent:
    # A real broker always registers several topics; a lone topic from an unknown broker is
    # refused by the single-topic guard of RouteInfoManager.registerBroker.
    agent = BrokerAgent(fleet.urls, ident, [*topics, TopicConfig("SELF_TEST_TOPIC", 1, 1)],
                        **FAST)
    await agent.start()
    agents.append(agent)
    return agent


def _queues(topic: str, spec: dict[str, int]) -> list[MessageQueue]:
    return [MessageQueue(topic, b, i) for b, n in spec.items() for i in range(n)]


async def test_caches_then_revalidates_with_etag(fleet: Fleet,
                                                 agents: list[BrokerAgent]) -> None:
    agent = await _start(agents, fleet, A0, [TopicConfig("TopicTest", 4, 4)])
    async with RouteClient(fleet.urls, poll_interval=0.3) as rc:
        route = await rc.get_route("TopicTest")
        assert route.queue_datas[0].write_queue_nums == 4
        assert await rc.get_route("TopicTest") == route
        assert rc.stats.fetches == 1 and rc.stats.cache_hits == 1
        assert rc.cached("TopicTest").etag  # type: ignore[union-attr]
        # Unchanged after the poll interval: revalidated by a 304, not fetched again.
        await asyncio.sleep(0.35)
        await rc.get_route("TopicTest")
        assert rc.stats.not_modified >= 1 and rc.stats.fetches == 1

        agent.put_topic(TopicConfig("TopicTest", 8, 8))
        await async_wait_until(lambda: agent.stats.registrations == 2)
        changed_at = time.monotonic()
        while (await rc.get_route("TopicTest")).queue_datas[0].write_queue_nums != 8:
            assert time.monotonic() - changed_at < 2.0, "route not refreshed"
            await asyncio.sleep(0.02)
        # Within the poll interval (plus a scheduling margin).
        assert time.monotonic() - changed_at < 0.3 + 0.7


async def test_background_poll_refreshes_cached_topics(fleet: Fleet,
                                                       agents: list[BrokerAgent]) -> None:
    agent = await _start(agents, fleet, A0, [TopicConfig("TopicTest", 4, 4)])
    async with RouteClient(fleet.urls, poll_interval=0.1) as rc:
        await rc.get_route("TopicTest")
        agent.put_topic(TopicConfig("TopicTest", 2, 2))

        def refreshed() -> bool:
            entry = rc.cached("TopicTest")
            return entry is not None and entry.route.queue_datas[0].write_queue_nums == 2

        await async_wait_until(refreshed, 3)  # no get_route call: the poll did it


async def test_fails_over_and_serves_the_cache_when_no_worker_answers(
        fleet: Fleet, agents: list[BrokerAgent]) -> None:
    await _start(agents, fleet, A0, [TopicConfig("TopicTest", 4, 4)])
    both = RouteClient(fleet.urls, poll_interval=30)
    only_first = RouteClient(fleet.urls[:1], poll_interval=30)
    try:
        await both.get_route("TopicTest")
        cached = await only_first.get_route("TopicTest")
        await asyncio.to_thread(fleet.stop_worker, 0)
        route = await both.get_route("TopicTest", refresh=True)
        assert route.queue_datas[0].broker_name == "broker-a"
        assert both.failovers >= 1 and both.http.current == fleet.urls[1]
        # Nobody answers: the last known route is kept, as the Java client does.
        assert await only_first.get_route("TopicTest", refresh=True) == cached
        assert only_first.stats.errors == 1
        with pytest.raises(FleetUnavailable):
            await only_first.get_route("OtherTopic")
    finally:
        await both.close()
        await only_first.close()


async def test_unknown_topic_and_the_tbw102_fallback(fleet: Fleet,
                                                     agents: list[BrokerAgent]) -> None:
    rc = RouteClient(fleet.urls, poll_interval=0.1)
    try:
        with pytest.raises(TopicNotFound):
            await rc.get_route("NewTopic")
        with pytest.raises(TopicNotFound):  # no TBW102 either
            await rc.publish_info("NewTopic")
        a = await _start(agents, fleet, A0, [TopicConfig("TBW102", 8, 8, 7)])
        await _start(agents, fleet, B0, [TopicConfig("TBW102", 2, 2, 7)])
        info = await rc.publish_info("NewTopic")
        # Each QueueData capped at min(defaultTopicQueueNums=4, readQueueNums).
        assert info.from_default_topic and not info.order_topic
        assert info.message_queues == _queues("NewTopic", {"broker-a": 4, "broker-b": 2})
        with pytest.raises(TopicNotFound):  # consumers get no fallback
            await RouteClient(fleet.urls).subscribe_queues("NewTopic")
        # The broker auto-creates the topic on the first send; the next refresh finds it.
        a.put_topic(TopicConfig("NewTopic", 4, 4))
        await async_wait_until(lambda: a.stats.registrations == 2)
        deadline = time.monotonic() + 3
        while (info := await rc.publish_info("NewTopic")).from_default_topic:
            assert time.monotonic() < deadline, "the topic's own route never replaced TBW102's"
            await asyncio.sleep(0.05)
        assert info.message_queues == _queues("NewTopic", {"broker-a": 4})
    finally:
        await rc.close()


async def test_publish_and_subscribe_queues_from_live_routes(
        fleet: Fleet, agents: list[BrokerAgent]) -> None:
    await _start(agents, fleet, A0, [TopicConfig("TopicTest", 4, 4)])
    await _start(agents, fleet, A1, [TopicConfig("TopicTest", 4, 4)])
    await _start(agents, fleet, B0, [TopicConfig("TopicTest", 3, 2, 4)])  # read-only
    await _start(agents, fleet, C1, [TopicConfig("TopicTest", 2, 2)])  # slave only
    async with RouteClient(fleet.urls, poll_interval=0.1) as rc:
        info = await rc.publish_info("TopicTest")
        # Writable and with a master: only broker-a.
        assert info.message_queues == _queues("TopicTest", {"broker-a": 4})
        # Readable: every group, readQueueNums each (broker-b reads 3 but writes 2).
        assert await rc.subscribe_queues("TopicTest") == _queues(
            "TopicTest", {"broker-a": 4, "broker-b": 3, "broker-c": 2})

        # orderTopicConf (orderMessageEnable on, ORDER_TOPIC_CONFIG set) overrides publish.
        fleet.update_config({"orderMessageEnable": "true"})
        http_json(f"{fleet.urls[0]}/v1/kv/ORDER_TOPIC_CONFIG/TopicTest", "PUT",
                  {"value": "broker-b:3;broker-a:2"})

        async def ordered() -> bool:
            return (await rc.get_route("TopicTest", refresh=True)).order_topic_conf is not None

        deadline = time.monotonic() + 5
        while not await ordered():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        info = await rc.publish_info("TopicTest")
        assert info.order_topic
        assert info.message_queues == (_queues("TopicTest", {"broker-b": 3})
                                       + _queues("TopicTest", {"broker-a": 2}))
        # Java's topicRouteData2TopicSubscribeInfo ignores orderTopicConf.
        assert len(await rc.subscribe_queues("TopicTest")) == 9


async def test_watch_streams_route_changes_from_any_worker(fleet: Fleet,
                                                           agents: list[BrokerAgent]) -> None:
    """RouteClient.watch: one long-poll for all topics; a change made through one worker reaches
    a watcher of the other at once, and so does a route's end."""
    await _start(agents, fleet, A0, [TopicConfig("W1", 4, 4), TopicConfig("W2", 2, 2)])
    rc = RouteClient(list(reversed(fleet.urls)))
    try:
        await rc.get_route("W1")
        await rc.get_route("W2")
        changes = rc.watch(["W1", "W2"], wait=5)
        nxt = asyncio.ensure_future(changes.__anext__())
        await asyncio.sleep(0.2)
        assert not nxt.done()
        http_json(f"{fleet.urls[0]}/v1/brokers/broker-a/wipe-write-perm", "POST")
        topic, route = await asyncio.wait_for(nxt, 5)
        assert topic in ("W1", "W2") and route is not None and route.queue_datas[0].perm == 4
        http_json(f"{fleet.urls[0]}/v1/topics/W2", "DELETE")
        seen: dict[str, Any] = {topic: route}
        while "W2" not in seen or seen["W2"] is not None:
            t, r = await asyncio.wait_for(changes.__anext__(), 5)
            seen[t] = r
        assert rc.cached("W2") is None and rc.cached("W1").route.queue_datas[0].perm == 4  # type: ignore[union-attr]
        await changes.aclose()
    finally:
        await rc.close()


async def test_the_background_refresh_watches_when_the_fleet_offers_it(
        fleet: Fleet, agents: list[BrokerAgent]) -> None:
    """With poll_interval 30 s, a change still reaches the cache within a second: start() keeps
    one watch open instead of polling."""
    await _start(agents, fleet, A0, [TopicConfig("W3", 4, 4)])
    async with RouteClient(fleet.urls) as rc:
        assert (await rc.get_route("W3")).queue_datas[0].perm == 6
        await asyncio.sleep(0.3)  # the background watch is open
        http_json(f"{fleet.urls[-1]}/v1/brokers/broker-a/wipe-write-perm", "POST")
        await async_wait_until(
            lambda: rc.cached("W3").route.queue_datas[0].perm == 4,  # type: ignore[union-attr]
            within=3.0)
        assert rc.stats.fetches == 2
