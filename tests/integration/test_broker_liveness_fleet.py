"""Issue 12, items 3, 4 and 7: when a broker stops being registered, through the remoting protocol.

* Item 3: a broker connects to every worker and registers through each. In Java every NameServer
  has its own channel to the broker (BrokerHousekeepingService -> RouteInfoManager.onChannelDestroy
  unregisters only when the closed channel is the one of the broker's live entry). A fleet shares
  one table, so a broker is removed only when the last connection over which it registered closes,
  across all workers, or when it expires.
* Item 4: every broker falling silent at once is a real outage (a network partition, a
  datacenter): scanNotActiveBroker removes them all. A mass-expiry guard must not hold them past
  a documented bound; with default settings they are gone within timeout + two sweep intervals.
* Item 7: scanNotActiveBroker closes the expired broker's channel (RemotingHelper.closeChannel).

Timing assertions are bounds measured from the moment the registration's answer arrived (the
deadline cannot be later than that plus the timeout), polled with deadlines, never fixed sleeps
standing in for a condition. Workers bind 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import (
    SUCCESS,
    TOPIC_NOT_EXIST,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    running_worker,
    wait_for_port,
)
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

EMPTY_CLUSTER_INFO = b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def make_broker(i: int = 0, *, cluster: str = "c1") -> Broker:
    return Broker(cluster, f"10.0.0.{i + 1}:10911", f"broker-{i}", 0, f"10.0.0.{i + 1}:10912",
                  [TopicConf(f"Own-{i}", 4, 4), TopicConf("Common", 8, 8)])


async def register(client: RemotingClient, broker: Broker, timeout_ms: int | None = None) -> float:
    """REGISTER_BROKER as a 5.3 broker sends it; returns time.monotonic() when the answer came."""
    cmd = broker.register_5x(timeout_ms=timeout_ms)
    resp = await client.call(Command(cmd.code, cmd.ext_fields, cmd.body, cmd.version))
    assert (resp.code, resp.remark) == (SUCCESS, None), (resp.code, resp.remark)
    return time.monotonic()


async def routed(client: RemotingClient, topic: str, addr: str) -> bool:
    """Whether GET_ROUTEINFO_BY_TOPIC lists ``addr`` for ``topic``."""
    resp = await client.request(105, {"topic": topic})
    if resp.code == TOPIC_NOT_EXIST:
        return False
    assert resp.code == SUCCESS, (resp.code, resp.remark)
    return any(addr in b["brokerAddrs"].values() for b in resp.body_json()["brokerDatas"])


async def poll_until(check: object, within: float, interval: float = 0.05) -> float:
    """Await ``check()`` until it is true; returns when. Fails after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():  # type: ignore[operator]
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await asyncio.sleep(interval)


@dataclass
class RoutePoller:
    """Asks one worker for a topic's route without pause and records every answer that does not
    list the broker (a gap)."""

    client: RemotingClient
    topic: str
    addr: str
    answers: int = 0
    gaps: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> RoutePoller:
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                resp = await self.client.request(105, {"topic": self.topic}, wait=3.0)
            except (TimeoutError, ConnectionError) as exc:
                self.gaps.append(f"{time.monotonic():.3f} {exc!r}")
                return
            self.answers += 1
            if resp.code != SUCCESS:
                self.gaps.append(f"{time.monotonic():.3f} code {resp.code} {resp.remark}")
            elif not any(self.addr in b["brokerAddrs"].values()
                         for b in resp.body_json()["brokerDatas"]):
                self.gaps.append(f"{time.monotonic():.3f} broker missing")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 5.0)


@contextlib.asynccontextmanager
async def two_workers(redis_url: str, **overrides: object) -> AsyncIterator[tuple[Worker, Worker]]:
    """Two in-process workers on one namespace (one fleet); per-worker settings in overrides as
    ``a_<name>`` / ``b_<name>``."""
    namespace = f"lv-{uuid.uuid4().hex[:12]}"
    a_kw = {k[2:]: v for k, v in overrides.items() if k.startswith("a_")}
    b_kw = {k[2:]: v for k, v in overrides.items() if k.startswith("b_")}
    async with running_worker(redis_url, namespace=namespace, **a_kw) as a, \
            running_worker(redis_url, namespace=namespace, **b_kw) as b:
        yield a, b


# --- item 3: the last connection decides ---------------------------------------------------------


@pytest.mark.parametrize("closed_first", ["last-registrant", "earlier-registrant"])
async def test_closing_one_of_two_connections_keeps_the_broker(
        redis_server: RedisServer, closed_first: str) -> None:
    """RouteInfoManager.onChannelDestroy(Channel) (via BrokerHousekeepingService.onChannelClose)
    unregisters a broker only when the closed channel is the channel of its live entry; a broker
    still connected and registered elsewhere stays. In a fleet that is: removed only when the last
    connection over which it registered closes, then at once (setupUnRegisterRequest +
    BatchUnregistrationService)."""
    broker = make_broker()
    async with two_workers(redis_server.url) as (a, b):
        conn_a, conn_b, watch_a, watch_b = (await a.connect(), await b.connect(),
                                            await a.connect(), await b.connect())
        try:
            await register(conn_a, broker)
            await register(conn_b, broker)  # worker B took the last registration
            first, last = ((conn_b, conn_a) if closed_first == "last-registrant"
                           else (conn_a, conn_b))
            pollers = [RoutePoller(watch_a, "Own-0", broker.addr).start(),
                       RoutePoller(watch_b, "Own-0", broker.addr).start()]
            await first.close()
            await asyncio.sleep(1.0)  # the window in which a wrong unregister would show
            for p in pollers:
                await p.stop()
                assert p.gaps == [], p.gaps
                assert p.answers >= 5
            info = await watch_a.request(106)
            assert info.body_json()["clusterAddrTable"] == {"c1": ["broker-0"]}

            await last.close()
            for watch in (watch_a, watch_b):
                await poll_until(lambda w=watch: _gone(w, broker), within=5.0)
        finally:
            for c in (conn_a, conn_b, watch_a, watch_b):
                await c.close()


async def _gone(client: RemotingClient, broker: Broker) -> bool:
    if await routed(client, "Own-0", broker.addr):
        return False
    return (await client.request(106)).body == EMPTY_CLUSTER_INFO


@pytest.fixture
async def fleet_processes(redis_server: RedisServer,
                          tmp_path: Path) -> AsyncIterator[list[WorkerProcess]]:
    namespace = f"lvf-{uuid.uuid4().hex[:12]}"
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": namespace,
           "NSFLEET_SWEEP_INTERVAL": "1", "NSFLEET_DRAIN_TIMEOUT": "2"}
    workers = [WorkerProcess(env, tmp_path / f"worker{i}.log") for i in range(2)]
    try:
        for w in workers:
            await asyncio.to_thread(w.start)
        yield workers
    finally:
        for w in workers:
            if w.process is not None and w.process.poll() is None:
                await asyncio.to_thread(w.stop)
        client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
        keys = [k async for k in client.scan_iter(match=f"nsfleet:{{{namespace}}}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_fleet_connection_close_and_kill_9_leave_no_route_gap(
        fleet_processes: list[WorkerProcess]) -> None:
    """Two `nsfleet serve` processes. A broker registers through both (as a broker registers with
    every NameServer, BrokerOuterAPI.registerBrokerAll); its connection to worker B, which took the
    last registration, closes, then worker B is killed with SIGKILL. Worker A, polled without pause
    all along, routes the broker throughout (and B does until it dies). Closing the broker's last
    connection, to A, then removes it (RouteInfoManager.onChannelDestroy)."""
    a, b = fleet_processes
    for w in (a, b):
        await wait_for_port(w.remoting_port)
    broker = make_broker()
    conn_a = await RemotingClient.connect(a.remoting_port)
    conn_b = await RemotingClient.connect(b.remoting_port)
    watch_a = await RemotingClient.connect(a.remoting_port)
    watch_b = await RemotingClient.connect(b.remoting_port)
    try:
        await register(conn_a, broker)
        await register(conn_b, broker)
        assert await routed(watch_a, "Own-0", broker.addr)
        assert await routed(watch_b, "Own-0", broker.addr)
        poll_a = RoutePoller(watch_a, "Own-0", broker.addr).start()
        poll_b = RoutePoller(watch_b, "Own-0", broker.addr).start()

        await conn_b.close()
        await asyncio.sleep(1.0)
        await poll_b.stop()
        assert poll_b.gaps == [], poll_b.gaps
        assert poll_b.answers >= 5

        assert b.process is not None
        b.process.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(b.process.wait, 10) == -signal.SIGKILL
        await asyncio.sleep(1.5)
        await poll_a.stop()
        assert poll_a.gaps == [], poll_a.gaps
        assert poll_a.answers >= 10
        info = await watch_a.request(106)
        assert info.body_json()["clusterAddrTable"] == {"c1": ["broker-0"]}

        await conn_a.close()
        await poll_until(lambda: _gone(watch_a, broker), within=5.0)
    finally:
        for c in (conn_a, conn_b, watch_a, watch_b):
            await c.close()


# --- item 4: everything silent at once -----------------------------------------------------------

TIMEOUT_MS = 2000
SWEEP_S = 1.0


async def test_every_broker_silent_at_once_is_gone_within_timeout_plus_two_sweeps(
        redis_server: RedisServer) -> None:
    """RouteInfoManager.scanNotActiveBroker removes every broker whose lastUpdateTimestamp +
    heartbeatTimeoutMillis has passed, however many: six brokers silent at once are gone from
    routes (pickupTopicRouteData) and cluster info (getAllClusterInfo). With the default
    expiry-guard settings nsfleet must do the same within timeout + two sweep intervals."""
    brokers = [make_broker(i) for i in range(6)]
    async with running_worker(redis_server.url, sweep_interval=SWEEP_S) as w:
        conn, watch = await w.connect(), await w.connect()
        try:
            answered = 0.0
            for b in brokers:
                answered = await register(conn, b, timeout_ms=TIMEOUT_MS)
            bound = answered + TIMEOUT_MS / 1000 + 2 * SWEEP_S
            last_seen: dict[str, float] = {}
            while True:
                started = time.monotonic()
                present = [b.name for b in brokers if await routed(watch, b.topics[0].name, b.addr)]
                info = await watch.request(106)
                if present:
                    last_seen["routes"] = started
                if info.body != EMPTY_CLUSTER_INFO:
                    last_seen["cluster info"] = started
                if not present and info.body == EMPTY_CLUSTER_INFO:
                    break
                assert started <= bound, (
                    f"{started - answered:.2f} s after the last registration, still there: "
                    f"routes {present}, cluster info {info.body!r}")
                await asyncio.sleep(0.05)
            for what, seen in last_seen.items():
                assert seen <= bound, (what, seen - answered)
        finally:
            await conn.close()
            await watch.close()


# --- item 7: an expired broker's connection is closed --------------------------------------------


async def test_expired_broker_connection_is_closed(redis_server: RedisServer) -> None:
    """RouteInfoManager.scanNotActiveBroker calls RemotingHelper.closeChannel on the expired
    broker's channel before unregistering it. Other connections (a client's) stay open."""
    broker = make_broker()
    async with running_worker(redis_server.url, sweep_interval=0.5) as w:
        conn, watch = await w.connect(), await w.connect()
        try:
            answered = await register(conn, broker, timeout_ms=1000)
            bound = answered + 1.0 + 2 * 0.5
            closed = await conn.wait_closed_by_peer(bound - time.monotonic() + 0.5)
            assert closed, "the expired broker's connection is still open"
            assert not await routed(watch, "Own-0", broker.addr)
            assert not watch.closed.is_set()
            assert (await watch.request(106)).body == EMPTY_CLUSTER_INFO
        finally:
            await conn.close()
            await watch.close()


async def test_expired_broker_connection_is_closed_by_the_worker_holding_it(
        redis_server: RedisServer) -> None:
    """The fleet form of scanNotActiveBroker's closeChannel: the broker registered through worker
    A, whose sweep does not run during the test; worker B's sweep expires it. A still closes the
    broker's connection (each Java NameServer closes its own channel to an expired broker)."""
    broker = make_broker()
    async with two_workers(redis_server.url, a_sweep_interval=3600.0,
                           b_sweep_interval=0.5) as (a, b):
        conn, watch = await a.connect(), await b.connect()
        try:
            answered = await register(conn, broker, timeout_ms=1000)
            bound = answered + 1.0 + 2 * 0.5
            await poll_until(lambda: _gone(watch, broker), within=bound - time.monotonic() + 2.0)
            closed = await conn.wait_closed_by_peer(3.0)
            assert closed, "worker A kept the expired broker's connection open"
        finally:
            await conn.close()
            await watch.close()
