"""Redis away, routes still answered (docs/reliability.md, "Redis away"): the service layer over a
real redis-server that a test kills, restarts, or cuts off behind a TCP proxy.

The worker keeps its last coherent view while the change feed is lost and serves it marked
stale, within ``stale_serve_max``; once the store answers again it serves nothing from that view
until the store proves it missed no change (same Redis process, same change counter), and it
replays what brokers sent it meanwhile.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.errors import StoreUnavailable
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.metrics import Metrics
from nsfleet.redis_conn import connect
from nsfleet.redis_server import RedisServer
from nsfleet.service.nameserver import NameServer
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.service.outage import StoreOutage
from nsfleet.service.route_cache import RouteCache
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis
NS = "outage"


def reg(i: int, *, queues: int = 4, counter: int = 1, timeout_ms: int = 60_000
        ) -> BrokerRegistration:
    return BrokerRegistration("c", f"10.0.0.{i}:10911", f"b{i}", 0,
                              heartbeat_timeout_millis=timeout_ms,
                              data_version=DataVersion(counter, counter),
                              topic_configs=[TopicConfig(f"T{i}", queues, queues),
                                             TopicConfig("Shared", queues, queues)])


class Worker:
    """One worker's service layer (what ``nsfleet serve`` assembles) over a Redis URL."""

    def __init__(self, url: str, stale_serve_max: float = 30.0) -> None:
        self.client = connect(url)
        self.store = RouteStore(self.client, NS)
        self.metrics = Metrics()
        self.cache = RouteCache(self.store, self.metrics,
                                outage=StoreOutage(self.metrics, stale_serve_max=stale_serve_max))
        self.ns = NameServer(self.store, self.cache, NamesrvConfig(self.store),
                             self.metrics)

    async def start(self) -> Worker:
        await self.store.load_scripts()
        await self.cache.start()
        await until(lambda: self.cache.feed.subscribed, "the change feed")
        return self

    async def close(self) -> None:
        await self.cache.close()
        await self.client.aclose()

    def stale_count(self, read: str = "route") -> float:
        return self.metrics.registry.get_sample_value("nsfleet_stale_answers_total",
                                                      {"read": read}) or 0.0


async def until(check: Callable[[], Any], what: str, within: float = 10.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def members(answer: Any) -> set[str]:
    return {b.broker_name for b in answer.route.broker_datas}


@pytest.fixture
async def redis_aof(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", appendonly=True,
                         extra_args=["--appendfsync", "always"]).start()
    yield server
    server.stop()


def kill(server: RedisServer) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)


async def test_cached_routes_answered_stale_while_redis_is_away(redis_aof: RedisServer) -> None:
    w = await Worker(redis_aof.url).start()
    try:
        for i in range(3):
            await w.ns.register_broker(reg(i))
        for i in range(3):
            await w.ns.route(f"T{i}")
        before = await w.ns.cluster_info()
        topics = await w.ns.all_topics()

        kill(redis_aof)
        await until(lambda: w.ns.stale_age() is not None, "the stale view")
        for i in range(3):
            assert members(await w.ns.route(f"T{i}")) == {f"b{i}"}
            assert w.ns.cached_route(f"T{i}") is not None  # the inline (remoting) path too
        assert w.stale_count() >= 6
        assert (await w.ns.cluster_info()).to_dict() == before.to_dict()
        assert await w.ns.all_topics() == topics
        assert w.stale_count("cluster_info") == 1 and w.stale_count("topic_list") == 1
        # A route the view never held fails fast, with an error naming the store.
        async with asyncio.timeout(3):
            with pytest.raises(StoreUnavailable, match="Redis unavailable"):
                await w.ns.route("NeverRead")
        # Writes are refused honestly, never answered as done.
        with pytest.raises(StoreUnavailable):
            await w.ns.register_broker(reg(9))
    finally:
        await w.close()


async def test_a_read_that_finds_redis_away_serves_the_view_past_its_deadlines(
        redis_aof: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first read to meet the outage (here the change feed never notices) is answered from
    the view, and an entry whose member's deadline has passed is served too: only a heartbeat
    the store could not record would have renewed it (self-preservation)."""
    w = await Worker(redis_aof.url).start()
    try:
        await w.ns.register_broker(reg(1, timeout_ms=300))
        await w.ns.route("T1")
        await asyncio.sleep(0.4)  # the entry expired with its member's deadline
        assert w.ns.cached_route("T1") is None
        monkeypatch.setattr(w.cache.feed, "on_lost", lambda: None)
        kill(redis_aof)
        assert members(await w.ns.route("T1")) == {"b1"}
        assert w.ns.stale_age() is not None
    finally:
        await w.close()


async def test_the_view_is_not_served_past_stale_serve_max(redis_aof: RedisServer) -> None:
    w = await Worker(redis_aof.url, stale_serve_max=0.5).start()
    try:
        await w.ns.register_broker(reg(1))
        await w.ns.route("T1")
        kill(redis_aof)
        await until(lambda: w.ns.stale_age() is not None, "the stale view")
        assert members(await w.ns.route("T1")) == {"b1"}
        await asyncio.sleep(0.6)
        assert w.ns.stale_age() is None
        async with asyncio.timeout(3):
            with pytest.raises(StoreUnavailable):
                await w.ns.route("T1")
    finally:
        await w.close()


async def test_stale_serve_max_zero_fails_reads_as_before(redis_aof: RedisServer) -> None:
    w = await Worker(redis_aof.url, stale_serve_max=0).start()
    try:
        await w.ns.register_broker(reg(1))
        await w.ns.route("T1")
        kill(redis_aof)
        await until(lambda: not w.cache.feed.subscribed, "the lost feed")
        assert w.ns.stale_age() is None and w.ns.cached_route("T1") is None
        with pytest.raises(StoreUnavailable):
            await w.ns.route("T1")
    finally:
        await w.close()


async def test_a_restart_drops_the_view_and_replays_what_brokers_sent(
        redis_aof: RedisServer) -> None:
    """Redis comes back from its AOF as another process: the view cannot be proven, so it is
    dropped; the registration refused during the outage is applied from the backlog."""
    w = await Worker(redis_aof.url).start()
    try:
        await w.ns.register_broker(reg(1))
        await w.ns.route("T1")
        kill(redis_aof)
        await until(lambda: w.ns.stale_age() is not None, "the stale view")
        with pytest.raises(StoreUnavailable):  # a new queue count, sent while Redis is away
            await w.ns.register_broker(reg(1, queues=8, counter=2))
        with pytest.raises(StoreUnavailable):  # a broker first seen during the outage
            await w.ns.register_broker(reg(2))
        redis_aof.start()
        await until(lambda: w.cache.feed.subscribed and w.cache.outage.resumed.is_set(),
                    "the return")
        assert w.ns.stale_age() is None
        t1 = await w.ns.route("T1")
        assert t1.route.queue_datas[0].read_queue_nums == 8
        assert members(await w.ns.route("T2")) == {"b2"}
        replayed = w.metrics.registry.get_sample_value("nsfleet_outage_replays_total",
                                                       {"result": "applied"})
        assert replayed == 2
    finally:
        await w.close()


async def test_a_replay_never_overwrites_a_newer_registration(redis_aof: RedisServer,
                                                               tmp_path: Path) -> None:
    """Worker A is cut off from Redis; the broker's newer registration reaches Redis through
    worker B; A's remembered older one must not overwrite it when A reconnects."""
    proxy = TcpProxy(redis_aof.port).start()
    a = await Worker(proxy.url).start()
    b = await Worker(redis_aof.url).start()
    try:
        await a.ns.register_broker(reg(1, counter=1))
        proxy.cut()
        await until(lambda: not a.cache.feed.subscribed, "A's lost feed")
        with pytest.raises(StoreUnavailable):
            await a.ns.register_broker(reg(1, queues=8, counter=2))
        await b.ns.register_broker(reg(1, queues=16, counter=3))
        proxy.restore()
        await until(lambda: a.cache.feed.subscribed and a.cache.outage.resumed.is_set(),
                    "A's return")
        for w in (a, b):
            assert (await w.ns.route("T1")).route.queue_datas[0].read_queue_nums == 16
        assert a.metrics.registry.get_sample_value("nsfleet_outage_replays_total",
                                                   {"result": "superseded"}) == 1
    finally:
        await a.close()
        await b.close()
        proxy.stop()


async def test_a_partitioned_worker_serves_nothing_older_than_redis(
        redis_aof: RedisServer) -> None:
    """While A is cut off, B changes a route A holds: A may answer its stale view while it
    cannot reach Redis, never once it can."""
    proxy = TcpProxy(redis_aof.port).start()
    a = await Worker(proxy.url).start()
    b = await Worker(redis_aof.url).start()
    try:
        await b.ns.register_broker(reg(1, queues=4))
        assert (await a.ns.route("T1")).route.queue_datas[0].read_queue_nums == 4
        proxy.cut()
        await until(lambda: a.ns.stale_age() is not None, "A's stale view")
        await b.ns.register_broker(reg(1, queues=8, counter=2))
        assert (await a.ns.route("T1")).route.queue_datas[0].read_queue_nums == 4  # stale
        proxy.restore()
        await until(lambda: a.ns.stale_age() is None, "A's return")
        assert (await a.ns.route("T1")).route.queue_datas[0].read_queue_nums == 8
        assert a.ns.cached_route("T1") is not None  # cached again once coherent
    finally:
        await a.close()
        await b.close()
        proxy.stop()


async def test_a_feed_blip_with_no_change_keeps_the_view(redis_aof: RedisServer) -> None:
    """The same Redis and the same change counter prove nothing was missed: the entries stay
    (and stay coherent: a later change still invalidates them)."""
    w = await Worker(redis_aof.url).start()
    admin = aioredis.Redis(port=redis_aof.port, decode_responses=True)
    try:
        await w.ns.register_broker(reg(1))
        await w.ns.route("T1")
        await admin.client_kill_filter(_type="pubsub")
        await until(lambda: w.ns.stale_age() is not None, "the stale view")
        await until(lambda: w.cache.feed.subscribed and w.ns.stale_age() is None, "the return")
        assert w.ns.cached_route("T1") is not None
        await w.ns.register_broker(reg(1, queues=8, counter=2))
        assert (await w.ns.route("T1")).route.queue_datas[0].read_queue_nums == 8
    finally:
        await admin.aclose()
        await w.close()


async def test_a_change_mid_outage_drops_the_view(redis_aof: RedisServer) -> None:
    """Another writer changes the store while this worker's feed is down and its own calls
    fail: the change counter moved, so nothing of the old view is served once it is back."""
    proxy = TcpProxy(redis_aof.port).start()
    a = await Worker(proxy.url).start()
    b = await Worker(redis_aof.url).start()
    try:
        await b.ns.register_broker(reg(1))
        await b.ns.register_broker(reg(2))
        await a.ns.route("T1")
        await a.ns.route("T2")
        proxy.cut()
        await until(lambda: a.ns.stale_age() is not None, "A's stale view")
        await b.ns.unregister_broker("c", "10.0.0.2:10911", "b2")
        proxy.restore()
        await until(lambda: a.cache.feed.subscribed and a.ns.stale_age() is None, "A's return")
        assert a.ns.cached_route("T1") is None and a.ns.cached_route("T2") is None
        with pytest.raises(Exception, match="T2"):
            await a.ns.route("T2")
    finally:
        await a.close()
        await b.close()
        proxy.stop()


async def test_the_sweep_spares_brokers_whose_deadline_passed_while_redis_was_away(
        redis_aof: RedisServer) -> None:
    """A broker whose deadline passed during the outage is kept for one heartbeat after the
    return, and comes back with its next heartbeat; one already due before the outage goes."""
    w = await Worker(redis_aof.url).start()
    try:
        await w.ns.register_broker(reg(1, timeout_ms=200))  # due before the outage
        await asyncio.sleep(0.3)
        await w.ns.register_broker(reg(2, timeout_ms=1000))  # due during the outage
        kill(redis_aof)
        await until(lambda: not w.cache.feed.subscribed, "the lost feed")
        await asyncio.sleep(1.2)
        redis_aof.start()
        await until(lambda: w.cache.feed.subscribed, "the return")
        sweeper = Sweeper(w.store, w.metrics, interval=1, guard_share=0,
                          outage=w.cache.outage.clock)
        removed = await sweeper.sweep_once()
        assert removed == 1  # b1 only
        assert await w.ns.heartbeat("c", "10.0.0.2:10911")  # revived from its record
        assert members(await w.ns.route("T2")) == {"b2"}
    finally:
        await w.close()
