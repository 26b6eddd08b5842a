"""Issue 12, items 3, 4 and 7: when a broker stops being registered, through the remoting protocol
on the session's real redis-server.

* Item 3, liveness per broker: a broker keeps a connection to every name server; in a fleet those
  are workers sharing one table, so a closed connection removes the broker only when no other
  connection it registered over is still open (on any live worker). Several brokers registered
  over one connection all go when it closes. A SIGKILLed worker's connections count as closed
  only once its presence key expires (20 s), and never remove a broker by themselves.
* Item 4, every broker silent at once: scanNotActiveBroker removes them all, within timeout + two
  sweep intervals with the default guard settings, and within timeout + max hold + two sweep
  intervals with the mass-expiry guard on; routes and cluster info never list a broker past its
  deadline meanwhile.
* Item 7: an expired broker's connection is closed by the worker holding it.

Every wait is a poll with a deadline. Time bounds are measured on the test's clock from the
registration's answer (a broker's deadline is at most that plus its timeout), with slack for a
loaded 2-core machine. Workers bind 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import (
    FAQ,
    SUCCESS,
    TOPIC_NOT_EXIST,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    dumps_fastjson,
    running_worker,
    wait_for_port,
)
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

EMPTY_CLUSTER_INFO = b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
SLACK = 2.0  # seconds of scheduling slack on a noisy 2-core machine


def make_broker(i: int, cluster: str = "c1") -> Broker:
    return Broker(cluster, f"10.0.1.{i + 1}:10911", f"broker-{i}", 0, f"10.0.1.{i + 1}:10912",
                  [TopicConf(f"Own-{i}", 4, 4), TopicConf("Common", 8, 8)])


def cluster_info(brokers: list[Broker]) -> bytes:
    """GET_BROKER_CLUSTER_INFO of masters, each alone in its group (fastjson defaults)."""
    table = {b.name: {"brokerAddrs": {0: b.addr}, "brokerName": b.name, "cluster": b.cluster,
                      "enableActingMaster": False} for b in brokers}
    clusters: dict[str, list[str]] = {}
    for b in sorted(brokers, key=lambda b: b.name):
        clusters.setdefault(b.cluster, []).append(b.name)
    return dumps_fastjson({"brokerAddrTable": table, "clusterAddrTable": clusters})


async def register(client: RemotingClient, broker: Broker,
                   timeout_ms: int | None = None) -> tuple[float, float]:
    """REGISTER_BROKER as a 5.3 broker sends it; (sent, answered) on time.monotonic()."""
    cmd = broker.register_5x(timeout_ms=timeout_ms)
    sent = time.monotonic()
    resp = await client.call(Command(cmd.code, cmd.ext_fields, cmd.body, cmd.version))
    assert (resp.code, resp.remark) == (SUCCESS, None), (resp.code, resp.remark)
    return sent, time.monotonic()


async def routed_names(client: RemotingClient, topic: str) -> set[str]:
    """The brokerNames GET_ROUTEINFO_BY_TOPIC lists for ``topic`` (empty: TOPIC_NOT_EXIST)."""
    resp = await client.request(105, {"topic": topic})
    if resp.code == TOPIC_NOT_EXIST:
        assert resp.remark == (f"No topic route info in name server for the topic: {topic}{FAQ}")
        return set()
    assert (resp.code, resp.remark) == (SUCCESS, None), (resp.code, resp.remark)
    return {b["brokerName"] for b in resp.body_json()["brokerDatas"]}


async def info_names(client: RemotingClient) -> set[str]:
    resp = await client.request(106)
    assert resp.code == SUCCESS
    return set(resp.body_json()["brokerAddrTable"])


async def poll(check: Callable[[], Awaitable[bool]], within: float,
               interval: float = 0.05) -> float:
    """Await ``check()`` until it is true; returns when (monotonic). Fails after ``within`` s."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"condition not met within {within} s"
        await asyncio.sleep(interval)
    return time.monotonic()


async def gone_everywhere(clients: list[RemotingClient], brokers: list[Broker],
                          remaining: list[Broker]) -> bool:
    """Every broker of ``brokers`` is gone from its own topic's route and from cluster info on
    every worker, and cluster info lists exactly ``remaining``."""
    for c in clients:
        for b in brokers:
            if await routed_names(c, b.topics[0].name):
                return False
        if (await c.request(106)).body != cluster_info(remaining):
            return False
    return True


@contextlib.asynccontextmanager
async def two_workers(redis_url: str, **overrides: Any) -> AsyncIterator[tuple[Worker, Worker]]:
    """Two in-process workers on one namespace: one fleet."""
    namespace = f"live-{uuid.uuid4().hex[:12]}"
    async with running_worker(redis_url, namespace=namespace, **overrides) as a, \
            running_worker(redis_url, namespace=namespace, **overrides) as b:
        yield a, b


# --- item 3: liveness per broker, in-process workers ---------------------------------------------


@pytest.mark.parametrize("closed_first", ["a", "b"])
async def test_broker_stays_until_its_last_connection_closes(redis_server: RedisServer,
                                                             closed_first: str) -> None:
    """BrokerHousekeepingService.onChannelClose -> RouteInfoManager.onChannelDestroy removes a
    broker whose channel closed (then unRegisterBroker). A broker talks to every name server over
    its own channel; in a fleet one closed connection must not remove a broker still registered
    over another worker's connection: it stays routed on both workers, with no gap, whichever
    connection closes first (the one of the first or of the last registration). When the last
    one closes it goes: TOPIC_NOT_EXIST on both workers and absent from cluster info."""
    broker = make_broker(0)
    async with two_workers(redis_server.url) as (a, b):
        conn_a, conn_b = await a.connect(), await b.connect()
        watch_a, watch_b = await a.connect(), await b.connect()
        try:
            await register(conn_a, broker)
            await register(conn_b, broker)
            first, last = (conn_a, conn_b) if closed_first == "a" else (conn_b, conn_a)
            await first.close()
            # Watch both workers for a while: a wrong unregister would show in this window.
            answers = 0
            until = time.monotonic() + 1.0
            while time.monotonic() < until:
                for w in (watch_a, watch_b):
                    assert await routed_names(w, "Own-0") == {"broker-0"}
                    assert (await w.request(106)).body == cluster_info([broker])
                    answers += 1
                await asyncio.sleep(0.02)
            assert answers >= 10
            await last.close()
            await poll(lambda: gone_everywhere([watch_a, watch_b], [broker], []), within=5.0)
            assert (await watch_a.request(106)).body == EMPTY_CLUSTER_INFO
        finally:
            for c in (conn_a, conn_b, watch_a, watch_b):
                await c.close()


async def test_every_broker_of_a_closed_connection_goes(redis_server: RedisServer) -> None:
    """RouteInfoManager.onChannelDestroy finds the broker of a closed channel and unregisters it
    (Java removes the first it finds; nsfleet every broker registered over that connection, each
    under the last-connection rule). Three brokers registered over one connection all go when it
    closes, on both workers; a broker registered over another connection stays."""
    over_one = [make_broker(i) for i in range(3)]
    other = make_broker(3)
    async with two_workers(redis_server.url) as (a, b):
        shared, own = await a.connect(), await b.connect()
        watch_a, watch_b = await a.connect(), await b.connect()
        try:
            for broker in over_one:
                await register(shared, broker)
            await register(own, other)
            for w in (watch_a, watch_b):
                assert await routed_names(w, "Common") == {"broker-0", "broker-1", "broker-2",
                                                           "broker-3"}
                assert (await w.request(106)).body == cluster_info([*over_one, other])
            await shared.close()
            await poll(lambda: gone_everywhere([watch_a, watch_b], over_one, [other]),
                       within=5.0)
            for w in (watch_a, watch_b):
                assert await routed_names(w, "Common") == {"broker-3"}
                assert await routed_names(w, "Own-3") == {"broker-3"}
        finally:
            for c in (shared, own, watch_a, watch_b):
                await c.close()


async def test_connection_closed_before_its_registration_completed_does_not_pin_the_broker(
        redis_server: RedisServer) -> None:
    """RouteInfoManager.registerBroker replaces the BrokerLiveInfo, channel included, at every
    registration, and onChannelDestroy(channel) unregisters the broker whose live entry holds the
    closed channel. So a connection that closed while its REGISTER_BROKER was still being handled
    (the broker crashed or reconnected at that moment) matters only until the broker's next
    registration: once it registered again over a new connection, closing that connection, its
    last open one, removes it."""
    broker = make_broker(0)
    async with running_worker(redis_server.url) as w:
        watch = await w.connect()
        fresh: RemotingClient | None = None
        try:
            # A REGISTER_BROKER frame, and the connection closed right behind it.
            dropped = await w.connect()
            cmd = broker.register_5x()
            cmd.opaque = RemotingClient.next_opaque()
            dropped.send(cmd)
            await dropped.close()

            async def registered() -> bool:
                return await routed_names(watch, "Own-0") == {"broker-0"}

            # Either the close came first (the registration stands until the deadline, as in
            # Java when onChannelDestroy ran first) or the close removed it already.
            with contextlib.suppress(AssertionError):
                await poll(registered, within=1.0)
            fresh = await w.connect()
            await register(fresh, broker)
            assert await routed_names(watch, "Own-0") == {"broker-0"}
            await fresh.close()
            await poll(lambda: gone_everywhere([watch], [broker], []), within=5.0)
        finally:
            await watch.close()
            if fresh is not None:
                await fresh.close()


# --- item 3: liveness per broker, real processes and SIGKILL ------------------------------------


@pytest.fixture
async def process_fleet(redis_server: RedisServer,
                        tmp_path: Path) -> AsyncIterator[tuple[list[WorkerProcess], str]]:
    """Two `nsfleet serve` processes on one namespace of the session's redis-server."""
    namespace = f"procs-{uuid.uuid4().hex[:12]}"
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": namespace,
           "NSFLEET_DRAIN_TIMEOUT": "2"}
    workers = [WorkerProcess(env, tmp_path / f"worker-{i}.log") for i in range(2)]
    try:
        await asyncio.gather(*(asyncio.to_thread(w.start) for w in workers))
        for w in workers:
            await wait_for_port(w.remoting_port)
        yield workers, namespace
    finally:
        for w in workers:
            if w.process is not None and w.process.poll() is None:
                await asyncio.to_thread(w.stop)
        client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
        keys = [k async for k in client.scan_iter(match=f"nsfleet:{{{namespace}}}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_process_fleet_close_and_sigkill_leave_no_gap(
        process_fleet: tuple[list[WorkerProcess], str], redis_server: RedisServer) -> None:
    """RouteInfoManager.onChannelDestroy, across a fleet of real `nsfleet serve` processes: a
    broker registers through workers A and B (as BrokerOuterAPI.registerBrokerAll registers with
    every name server); its connection to A closes, then A is killed with SIGKILL. B, asked for
    the route every 20 ms through all of that, answers SUCCESS with the broker every time. Then
    its connection to B, the last one, closes: B drops it within a few seconds."""
    (a, b), namespace = process_fleet
    broker = make_broker(0)
    conns_key = f"nsfleet:{{{namespace}}}:idx:conns:{broker.cluster}:{broker.addr}"
    conn_a = await RemotingClient.connect(a.remoting_port)
    conn_b = await RemotingClient.connect(b.remoting_port)
    watch_b = await RemotingClient.connect(b.remoting_port)
    redis = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    answers: list[str] = []
    stop = asyncio.Event()

    async def watch() -> None:
        deadline = time.monotonic() + 30.0  # bounded whatever happens
        while not stop.is_set() and time.monotonic() < deadline:
            resp = await watch_b.request(105, {"topic": "Own-0"}, wait=3.0)
            if resp.code != SUCCESS:
                answers.append(f"code {resp.code}: {resp.remark}")
            else:
                names = [bd["brokerName"] for bd in resp.body_json()["brokerDatas"]]
                answers.append("ok" if names == ["broker-0"] else f"brokers {names}")
            await asyncio.sleep(0.02)

    try:
        await register(conn_a, broker)
        await register(conn_b, broker)
        assert await routed_names(watch_b, "Own-0") == {"broker-0"}
        assert await redis.scard(conns_key) == 2
        poller = asyncio.create_task(watch())
        try:
            seen = len(answers)
            await conn_a.close()

            async def a_forgot_its_connection() -> bool:
                # A has handled the close (the broker now hangs on B's connection alone), and B
                # was asked a few times meanwhile.
                return await redis.scard(conns_key) == 1 and len(answers) - seen >= 10

            await poll(a_forgot_its_connection, within=5.0)
            assert a.process is not None
            a.process.send_signal(signal.SIGKILL)
            assert await asyncio.to_thread(a.process.wait, 10) == -signal.SIGKILL
            seen = len(answers)
            await poll(lambda: _answers_since(answers, seen, 25), within=5.0)
        finally:
            stop.set()
            await asyncio.wait_for(poller, 5.0)
        bad = [x for x in answers if x != "ok"]
        assert bad == [], bad
        assert len(answers) >= 35
        assert (await watch_b.request(106)).body == cluster_info([broker])

        await conn_b.close()
        await poll(lambda: gone_everywhere([watch_b], [broker], []), within=5.0)
    finally:
        for c in (conn_a, conn_b, watch_b):
            await c.close()
        await redis.aclose()


async def _answers_since(answers: list[str], seen: int, count: int) -> bool:
    return len(answers) - seen >= count


# --- item 4: every broker silent at once ---------------------------------------------------------

TIMEOUT_S = 2.0
SWEEP_S = 0.5
SIX = 6


async def tables_empty(worker: Worker) -> bool:
    """The sweep has removed every broker from the tables (brokerLiveTable, brokerAddrTable,
    topicQueueTable, the deadlines)."""
    if await worker.redis.zcard(f"{worker.prefix}:idx:deadlines"):
        return False
    return not any(part in key for key in await worker.keys()
                   for part in (":broker:", ":group:", ":queue:"))


async def expire_all_and_watch(worker: Worker, bound_after_deadline: float) -> None:
    """Register six brokers (heartbeatTimeoutMillis 2000) over one connection that then stays open
    and silent, and watch routes (the shared topic lists every live group) and cluster info until
    all six are gone from both and from the tables. Asserts: no answer lists a broker past its
    deadline, the two agree whenever no deadline falls inside a sample, and everything is gone
    within ``bound_after_deadline`` of the last deadline (+ SLACK)."""
    brokers = [make_broker(i) for i in range(SIX)]
    conn, watch = await worker.connect(), await worker.connect()
    try:
        windows: dict[str, tuple[float, float]] = {}  # name -> the deadline lies in this window
        for b in brokers:
            sent, answered = await register(conn, b, timeout_ms=int(TIMEOUT_S * 1000))
            windows[b.name] = (sent + TIMEOUT_S, answered + TIMEOUT_S)
        assert await routed_names(watch, "Common") == {b.name for b in brokers}
        assert (await watch.request(106)).body == cluster_info(brokers)
        last_deadline = max(hi for _, hi in windows.values())
        bound = last_deadline + bound_after_deadline + SLACK
        samples = 0
        while True:
            start = time.monotonic()
            in_route, in_info = await asyncio.gather(routed_names(watch, "Common"),
                                                     info_names(watch))
            end = time.monotonic()
            samples += 1
            for what, names in (("route", in_route), ("cluster info", in_info)):
                late = sorted(n for n in names if start > windows[n][1] + 0.05)
                assert not late, f"{what} lists {late} {start - last_deadline:+.2f} s after"
            if not any(lo - 0.05 <= end and start <= hi + 0.05
                       for lo, hi in windows.values()):
                assert in_route == in_info, (in_route, in_info)
            if not in_route and not in_info and await tables_empty(worker):
                break
            assert start <= bound, (
                f"{start - last_deadline:.2f} s after the last deadline: route {in_route}, "
                f"cluster info {in_info}, tables empty: {await tables_empty(worker)}")
            await asyncio.sleep(0.05)
        assert samples >= 5
        assert (await watch.request(106)).body == EMPTY_CLUSTER_INFO
        for b in brokers:
            assert await routed_names(watch, b.topics[0].name) == set()
    finally:
        await conn.close()
        await watch.close()


@pytest.mark.parametrize("route_cache", [False, True], ids=["uncached", "cached"])
async def test_every_broker_silent_at_once_expires_with_default_guard(
        redis_server: RedisServer, route_cache: bool) -> None:
    """RouteInfoManager.scanNotActiveBroker removes every broker whose lastUpdateTimestamp +
    heartbeatTimeoutMillis has passed, however many fall silent together (a network partition, a
    lost data centre). With the default guard settings (no expiry_guard_share override) six of
    six silent brokers leave routes (pickupTopicRouteData), cluster info (getAllClusterInfo) and
    the tables within timeout + two sweep intervals, whether routes come from Redis or from the
    worker's route cache (the production default)."""
    async with running_worker(redis_server.url, sweep_interval=SWEEP_S,
                              route_cache=route_cache) as w:
        assert w.settings.expiry_guard_share == 0.0  # the shipped default
        await expire_all_and_watch(w, 2 * SWEEP_S)


async def test_every_broker_silent_at_once_expires_within_the_guard_bound(
        redis_server: RedisServer) -> None:
    """The mass-expiry guard (not in Java) may hold a sweep that would expire more than its share
    of live brokers, but never past expiry_guard_max_hold after a broker's deadline, and a held
    broker is left out of routes and cluster info all along (they agree on who is alive, as
    pickupTopicRouteData and getAllClusterInfo read one table in Java). With share 0.5 and max
    hold 1 s, six of six silent brokers are gone within timeout + max hold + two sweeps."""
    async with running_worker(redis_server.url, sweep_interval=SWEEP_S, expiry_guard_share=0.5,
                              expiry_guard_max_hold=1.0) as w:
        await expire_all_and_watch(w, 1.0 + 2 * SWEEP_S)


# --- item 7: an expired broker's connection is closed --------------------------------------------


async def test_expired_broker_connection_is_closed(redis_server: RedisServer) -> None:
    """RouteInfoManager.scanNotActiveBroker calls RemotingHelper.closeChannel on an expired
    broker's channel before unregistering it: a broker that stops heartbeating (timeout 1 s,
    sweep every 0.5 s) has its connection closed by the worker (the client reads EOF) within
    timeout + two sweeps. A connection that only reads routes stays open and keeps serving."""
    broker = make_broker(0)
    async with running_worker(redis_server.url, sweep_interval=SWEEP_S) as w:
        conn, reader = await w.connect(), await w.connect()
        try:
            assert await routed_names(reader, "Own-0") == set()  # a route read, nothing else
            _, answered = await register(conn, broker, timeout_ms=1000)
            assert await routed_names(reader, "Own-0") == {"broker-0"}
            bound = answered + 1.0 + 2 * SWEEP_S + SLACK
            closed = await conn.wait_closed_by_peer(bound - time.monotonic())
            assert closed, "the expired broker's connection is still open"
            assert time.monotonic() <= bound + 0.1
            assert conn.unexpected == []
            assert not reader.closed.is_set()
            assert await routed_names(reader, "Own-0") == set()
            assert (await reader.request(106)).body == EMPTY_CLUSTER_INFO
            # Still open after further sweeps.
            await asyncio.sleep(2 * SWEEP_S)
            assert not reader.closed.is_set()
            assert (await reader.request(106)).body == EMPTY_CLUSTER_INFO
        finally:
            await conn.close()
            await reader.close()
