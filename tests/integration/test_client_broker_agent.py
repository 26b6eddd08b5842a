"""BrokerAgent and SyncBrokerAgent against real workers over a real redis-server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.error
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from nsfleet.client import (
    ApiError,
    BrokerAgent,
    BrokerIdentity,
    FleetUnavailable,
    RouteClient,
    SyncBrokerAgent,
    clamp_interval,
)
from nsfleet.domain.model import TopicConfig
from nsfleet.redis_server import RedisServer, free_port
from tests.support.fleet import Fleet, async_wait_until, wait_until

pytestmark = pytest.mark.redis
REPO = Path(__file__).resolve().parents[2]

MASTER = BrokerIdentity("DefaultCluster", "broker-a", "10.0.0.1:10911",
                        ha_server_addr="10.0.0.1:10912")
SLAVE = BrokerIdentity("DefaultCluster", "broker-a", "10.0.0.2:10911", 1,
                       ha_server_addr="10.0.0.2:10912")
TOPICS = [TopicConfig("TopicTest", 4, 4), TopicConfig("TBW102", 8, 8, 7),
          TopicConfig("SELF_TEST_TOPIC", 1, 1)]
FAST: dict[str, Any] = {"heartbeat_interval": 0.1, "interval_bounds": None}


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    with Fleet(redis_server.url, workers=3) as f:
        yield f


def _live(fleet: Fleet, addr: str, worker: int = -1) -> dict[str, Any] | None:
    return next((b for b in fleet.brokers(worker) if b["brokerAddr"] == addr), None)


def _route_status(fleet: Fleet, topic: str) -> int:
    try:
        fleet.get(f"/v1/routes/{topic}")
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


async def test_registers_heartbeats_and_unregisters_on_close(fleet: Fleet) -> None:
    agent = BrokerAgent(fleet.urls, MASTER, TOPICS, **FAST)
    await agent.start()
    try:
        row = _live(fleet, MASTER.broker_addr)
        assert row is not None and row["brokerName"] == "broker-a" and row["brokerId"] == 0
        assert row["haServerAddr"] == "10.0.0.1:10912"
        first_beat = row["lastUpdateTimestamp"]
        await async_wait_until(lambda: agent.stats.heartbeats >= 3)
        # The DataVersion did not change: query-data-version only, no second registration.
        assert agent.stats.registrations == 1 and agent.stats.errors == 0
        row = _live(fleet, MASTER.broker_addr)
        assert row is not None and row["lastUpdateTimestamp"] > first_beat
        assert _route_status(fleet, "TopicTest") == 200
        assert agent.master_addr is None  # a master learns no master
    finally:
        assert await agent.close() is True
    assert _live(fleet, MASTER.broker_addr) is None
    assert _route_status(fleet, "TopicTest") == 404


async def test_topic_change_bumps_the_data_version_and_registers_at_once(fleet: Fleet) -> None:
    # A 60 s period: only the wake-up on a topic change can register within the test.
    agent = BrokerAgent(fleet.urls, MASTER, TOPICS, heartbeat_interval=60)
    await agent.start()
    try:
        before = agent.data_version
        agent.put_topic(TopicConfig("TopicNew", 2, 2))
        after = agent.data_version
        assert after.counter == before.counter + 1 and after.timestamp >= before.timestamp
        await async_wait_until(lambda: agent.stats.registrations == 2, 5)
        assert _route_status(fleet, "TopicNew") == 200
        row = _live(fleet, MASTER.broker_addr)
        assert row is not None and row["dataVersion"]["counter"] == after.counter
        agent.remove_topic("no-such-topic")  # not in the table: no new DataVersion
        assert agent.data_version == after
    finally:
        await agent.close()


async def test_registers_again_when_the_fleet_forgot_the_broker(fleet: Fleet) -> None:
    agent = BrokerAgent(fleet.urls, MASTER, TOPICS, **FAST)
    await agent.start()
    try:
        fleet.post("/v1/brokers/unregister", MASTER.key())
        assert _live(fleet, MASTER.broker_addr) is None
        # query-data-version answers changed=true for an unknown broker: full registration.
        await async_wait_until(lambda: agent.stats.registrations >= 2, 5)
        assert _live(fleet, MASTER.broker_addr) is not None
    finally:
        await agent.close()


async def test_fails_over_when_its_worker_stops(fleet: Fleet) -> None:
    agent = BrokerAgent(fleet.urls, MASTER, TOPICS, **FAST)
    await agent.start()
    try:
        assert agent.current_server == fleet.urls[0]
        await asyncio.to_thread(fleet.stop_worker, 0)
        stopped_at = time.time() * 1000
        await async_wait_until(lambda: agent.current_server == fleet.urls[1], 5)
        beats = agent.stats.heartbeats
        await async_wait_until(lambda: agent.stats.heartbeats >= beats + 2, 5)
        assert agent.failovers >= 1
        row = _live(fleet, MASTER.broker_addr)
        assert row is not None and row["lastUpdateTimestamp"] > stopped_at
    finally:
        assert await agent.close() is True  # through the surviving workers
    assert _live(fleet, MASTER.broker_addr) is None


def _spawn_worker(fleet: Fleet) -> tuple[subprocess.Popen[bytes], str]:
    """An ``nsfleet serve`` process in the fleet's namespace, so that it can be SIGKILLed."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsfleet", "serve", "--redis-url", fleet.settings[0].redis_url,
         "--host", "127.0.0.1", "--http-port", str(port), "--remoting-port", str(free_port()),
         "--namespace", fleet.namespace, "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: Fleet._ready(url) or proc.poll() is not None, 20, 0.05)
        assert proc.poll() is None, "nsfleet serve exited"
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url


async def test_agent_and_route_client_fail_over_when_a_worker_is_killed(fleet: Fleet) -> None:
    proc, url = await asyncio.to_thread(_spawn_worker, fleet)
    agent = BrokerAgent([url, fleet.urls[0]], MASTER, TOPICS, **FAST)
    rc = RouteClient([url, fleet.urls[0]], poll_interval=30)
    try:
        await agent.start()
        await rc.get_route("TopicTest")
        assert agent.current_server == url and agent.failovers == 0
        proc.kill()  # SIGKILL: no drain, connections reset
        await asyncio.to_thread(proc.wait, 10)
        killed_at = time.time() * 1000
        beats = agent.stats.heartbeats
        await async_wait_until(lambda: agent.stats.heartbeats >= beats + 2, 5)
        assert agent.current_server == fleet.urls[0] and agent.failovers >= 1
        row = _live(fleet, MASTER.broker_addr)
        assert row is not None and row["lastUpdateTimestamp"] > killed_at
        route = await rc.get_route("TopicTest", refresh=True)
        assert route.queue_datas[0].write_queue_nums == 4 and rc.failovers == 1
        assert rc.stats.not_modified == 1  # revalidated by the surviving worker
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await rc.close()
        await agent.close()
    assert _live(fleet, MASTER.broker_addr) is None


async def _hanging_server() -> asyncio.Server:
    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)  # read the request, never answer
        await asyncio.sleep(30)
        writer.close()

    return await asyncio.start_server(hang, "127.0.0.1", 0)


@pytest.fixture
async def failing_servers() -> AsyncIterator[list[str]]:
    """[a worker that never answers, a worker that answers 503]."""
    hanging = await _hanging_server()

    async def unavailable(request: web.Request) -> web.Response:
        return web.json_response({"code": 503, "error": "draining"}, status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", unavailable)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield [f"http://127.0.0.1:{hanging.sockets[0].getsockname()[1]}",
           f"http://127.0.0.1:{port}"]
    hanging.close()
    await runner.cleanup()


async def test_fails_over_on_timeout_and_5xx(fleet: Fleet, failing_servers: list[str]) -> None:
    agent = BrokerAgent([*failing_servers, fleet.urls[0]], MASTER, TOPICS, request_timeout=0.3,
                        register_timeout=0.3, **FAST)
    started = time.monotonic()
    await agent.start()
    try:
        assert time.monotonic() - started < 5
        assert agent.current_server == fleet.urls[0] and agent.failovers == 2
        assert _live(fleet, MASTER.broker_addr) is not None
    finally:
        await agent.close()


async def test_start_raises_when_no_worker_answers(failing_servers: list[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    agent = BrokerAgent([dead, *failing_servers], MASTER, TOPICS, register_timeout=0.3, **FAST)
    with pytest.raises(FleetUnavailable) as info:
        await agent.start()
    assert len(info.value.errors) == 3
    assert "timed out" in str(info.value) and "503 draining" in str(info.value)


async def test_a_4xx_answer_is_raised_without_failover(fleet: Fleet) -> None:
    bad = BrokerIdentity("DefaultCluster", "broker-a", "not-an-address")
    agent = BrokerAgent(fleet.urls, bad, TOPICS, **FAST)
    with pytest.raises(ApiError) as info:
        await agent.start()
    assert info.value.status == 400 and "brokerAddr" in str(info.value)
    assert agent.failovers == 0


async def test_slave_learns_master_and_ha_address(fleet: Fleet) -> None:
    slave = BrokerAgent(fleet.urls, SLAVE, TOPICS, **FAST)
    await slave.start()  # before its master: nothing to learn yet
    master = BrokerAgent(fleet.urls[1:], MASTER, TOPICS, **FAST)
    try:
        assert slave.master_addr is None
        await master.start()
        # Until it knows its master, a slave registers fully every cycle.
        await async_wait_until(lambda: slave.master_addr is not None, 5)
        assert slave.master_addr == MASTER.broker_addr
        assert slave.ha_server_addr == MASTER.ha_server_addr
        registrations = slave.stats.registrations
        beats = slave.stats.heartbeats
        await async_wait_until(lambda: slave.stats.heartbeats >= beats + 2, 5)
        assert slave.stats.registrations == registrations  # then query-data-version only
    finally:
        await slave.close()
        await master.close()


async def test_force_register_sends_a_full_registration_every_cycle(fleet: Fleet) -> None:
    agent = BrokerAgent(fleet.urls, MASTER, TOPICS, force_register=True, **FAST)
    await agent.start()
    try:
        await async_wait_until(lambda: agent.stats.registrations >= 3, 5)
        assert agent.stats.heartbeats == 0
    finally:
        await agent.close()


def test_interval_is_clamped_like_rocketmq() -> None:
    assert clamp_interval(30) == 30
    assert clamp_interval(5) == 10 and clamp_interval(300) == 60
    assert clamp_interval(0.05, None) == 0.05
    assert clamp_interval(0.5, (0.1, 1)) == 0.5
    with pytest.raises(ValueError):
        clamp_interval(0)
    assert BrokerAgent("http://127.0.0.1:1", MASTER, heartbeat_interval=1).interval == 10


def test_sync_agent(fleet: Fleet) -> None:
    with SyncBrokerAgent(fleet.servers, MASTER, TOPICS, **FAST) as agent:
        assert agent.registered
        assert _live(fleet, MASTER.broker_addr) is not None
        agent.put_topic(TopicConfig("SyncTopic", 2, 2))
        assert agent.data_version.counter == 1
        wait_until(lambda: _route_status(fleet, "SyncTopic") == 200, 5)
        wait_until(lambda: agent.stats.heartbeats >= 2, 5)
    assert _live(fleet, MASTER.broker_addr) is None
