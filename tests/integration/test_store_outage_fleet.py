"""Redis away under real worker processes (issue: "Redis away, routes still answered").

Brokers keep registering with every worker and readers keep reading over HTTP and remoting while
Redis is SIGKILLed for longer than the brokers' heartbeat timeout: the cached routes are answered
throughout (HTTP marks them stale), nothing fails after the return, no broker that kept
registering is missing from a route after the return, and every acknowledged write survives.
A Redis restarted without its data: no worker serves its old view once Redis answers, and routes
come back from the brokers' registrations.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from nsfleet.redis_server import RedisServer
from tests.support.outage_load import OutageLoad, missing_brokers, served_fraction
from tests.support.tcp_proxy import TcpProxy
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis
NAMESPACE = "outage-fleet"
TIMEOUT_MS = 2000  # the brokers' heartbeat timeout; the outage lasts longer


def _kill(server: RedisServer) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[tuple[RedisServer, list[WorkerProcess]]]:
    server = RedisServer(tmp_path / "redis", appendonly=True,
                         extra_args=["--appendfsync", "always"]).start()
    env = {"NSFLEET_REDIS_URL": server.url, "NSFLEET_NAMESPACE": NAMESPACE,
           "NSFLEET_DRAIN_TIMEOUT": "2", "NSFLEET_SWEEP_INTERVAL": "1"}
    ws = [WorkerProcess(env, tmp_path / f"w{i}.log") for i in range(2)]
    try:
        for w in ws:
            w.start()
        yield server, ws
    finally:
        for w in ws:
            if w.process is not None:
                w.stop()
        server.stop()


async def _outage(server: RedisServer, ws: list[WorkerProcess], seconds: float,
                  restart: bool = True) -> OutageLoad:
    load = OutageLoad([w.url for w in ws], [w.remoting_port for w in ws], timeout_ms=TIMEOUT_MS)
    async with aiohttp.ClientSession() as session:
        assert set(await load.register_all(session)) == {200}
    running = asyncio.create_task(load.run())
    await asyncio.sleep(1.5)  # every route read (cached) through both workers
    load.phase = "outage"
    await asyncio.to_thread(_kill, server)
    await asyncio.sleep(seconds)
    if restart:
        await asyncio.to_thread(server.start)
    load.phase = "after"
    await asyncio.sleep(4.0)
    load.stop()
    await running
    return load


def test_reads_answered_through_an_outage_longer_than_the_broker_timeout(
        workers: tuple[RedisServer, list[WorkerProcess]]) -> None:
    server, ws = workers
    load = asyncio.run(_outage(server, ws, seconds=TIMEOUT_MS / 1000 * 2))

    outage = [r for r in load.reads if r.phase == "outage"]
    assert len(outage) > 200
    assert served_fraction(load.reads, "outage") >= 0.999, [r for r in outage if not r.answered]
    http_outage = [r for r in outage if r.protocol == "http"]
    assert sum(r.stale for r in http_outage) > len(http_outage) / 2  # marked once noticed
    after = [r for r in load.reads if r.phase == "after"]
    assert after and all(r.answered for r in after), [r for r in after if not r.answered][:5]
    assert missing_brokers(load.reads, "after") == []
    assert missing_brokers(load.reads, "outage") == []
    # Registrations during the outage were refused as unavailable (503), not acknowledged.
    statuses = load.registrations["outage"]
    assert 503 in statuses and set(statuses) <= {200, 503}
    # Every acknowledged write is there; every broker is registered and routed.
    table = http("GET", f"{ws[0].url}/v1/kv/outage")[1]["table"]
    assert {k: int(v) for k, v in table.items() if k in load.acked} == load.acked
    brokers = http("GET", f"{ws[1].url}/v1/cluster-info")[1]["brokerAddrTable"]
    assert set(brokers) == {f"b{i}" for i in range(load.brokers)}
    for w in ws:
        ready = http("GET", f"{w.url}/readyz")
        assert ready == (200, {"status": "ready"})


def test_a_restart_without_data_serves_no_old_view(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=False).start()
    w = WorkerProcess({"NSFLEET_REDIS_URL": server.url, "NSFLEET_NAMESPACE": NAMESPACE,
                       "NSFLEET_DRAIN_TIMEOUT": "2"}, tmp_path / "w.log").start()
    reg = {"clusterName": "c1", "brokerAddr": "10.0.8.1:10911", "brokerName": "b1",
           "brokerId": 0, "topicConfigTable": {"T1": {}, "Shared": {}}}
    try:
        assert http("POST", f"{w.url}/v1/brokers/register", reg)[0] == 200
        assert http("GET", f"{w.url}/v1/routes/T1")[0] == 200
        _kill(server)
        deadline = time.monotonic() + 10
        while http("GET", f"{w.url}/readyz")[1].get("stale") is not True:
            assert time.monotonic() < deadline, "never served stale"
            time.sleep(0.05)
        server.start()  # empty: no AOF, no RDB
        # Until the worker notices, the old view is answered marked stale; then never again:
        # nothing has registered yet.
        deadline = time.monotonic() + 10
        while True:
            status, stale = _route_status(f"{w.url}/v1/routes/T1")
            if status == 404:
                break
            assert status == 200 and stale, "an old route answered as current"
            assert time.monotonic() < deadline, "the old view outlived the restart"
            time.sleep(0.05)
        for _ in range(20):
            assert _route_status(f"{w.url}/v1/routes/T1") == (404, False)
        assert http("GET", f"{w.url}/readyz") == (200, {"status": "ready"})
        assert http("POST", f"{w.url}/v1/brokers/register", reg)[0] == 200
        status, route = http("GET", f"{w.url}/v1/routes/T1")
        assert status == 200 and route["brokerDatas"][0]["brokerName"] == "b1"
    finally:
        w.stop()
        server.stop()


def _route_status(url: str) -> tuple[int, bool]:
    """(status, marked stale)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, "X-Nsfleet-Stale" in resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, "X-Nsfleet-Stale" in exc.headers


def test_a_partitioned_worker_serves_nothing_older_than_redis(tmp_path: Path) -> None:
    """Worker A reaches Redis through a TCP proxy that the test cuts; worker B keeps writing.
    While cut off A answers its stale view (marked); once A reaches Redis again, no answer it
    gives is older than Redis."""
    server = RedisServer(tmp_path / "redis", appendonly=False).start()
    proxy = TcpProxy(server.port).start()
    env = {"NSFLEET_NAMESPACE": NAMESPACE, "NSFLEET_DRAIN_TIMEOUT": "2"}
    a = WorkerProcess(env | {"NSFLEET_REDIS_URL": proxy.url}, tmp_path / "a.log").start()
    b = WorkerProcess(env | {"NSFLEET_REDIS_URL": server.url}, tmp_path / "b.log").start()

    def reg(queues: int) -> dict[str, object]:
        return {"clusterName": "c1", "brokerAddr": "10.0.8.2:10911", "brokerName": "b2",
                "brokerId": 0, "dataVersion": {"counter": queues, "timestamp": queues},
                "topicConfigTable": {"T2": {"readQueueNums": queues, "writeQueueNums": queues},
                                     "Shared": {}}}

    def queues_at(w: WorkerProcess) -> tuple[int, bool]:
        with urllib.request.urlopen(f"{w.url}/v1/routes/T2", timeout=5) as resp:
            body = json.loads(resp.read())
            return body["queueDatas"][0]["readQueueNums"], "X-Nsfleet-Stale" in resp.headers

    try:
        assert http("POST", f"{b.url}/v1/brokers/register", reg(4))[0] == 200
        assert queues_at(a) == (4, False)
        proxy.cut()
        deadline = time.monotonic() + 10
        while http("GET", f"{a.url}/readyz")[1].get("stale") is not True:
            assert time.monotonic() < deadline, "A never noticed the partition"
            time.sleep(0.05)
        assert http("POST", f"{b.url}/v1/brokers/register", reg(8))[0] == 200
        assert queues_at(a) == (4, True)  # A's view, marked
        proxy.restore()
        deadline = time.monotonic() + 10
        while True:
            queues, stale = queues_at(a)
            if not stale:  # A knows it reaches Redis: from here on, nothing older than Redis
                assert queues == 8
                break
            assert time.monotonic() < deadline, "A never came back"
            time.sleep(0.02)
        for _ in range(50):
            assert queues_at(a) == (8, False)
        # A follows the feed again (a change reaches another worker's cache within moments).
        assert http("POST", f"{b.url}/v1/brokers/register", reg(16))[0] == 200
        deadline = time.monotonic() + 5
        while queues_at(a) != (16, False):
            assert time.monotonic() < deadline, "A no longer follows the change feed"
            time.sleep(0.02)
    finally:
        a.stop()
        b.stop()
        proxy.stop()
        server.stop()
