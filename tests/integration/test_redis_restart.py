"""A Redis restart under a real worker: once Redis answers again, no request fails.

Every pooled connection that sat idle through the restart is dead; without the retry of
nsfleet/redis_conn.py each one failed its first command (a burst of 30 reads right after a 3 s
restart gave 28 x 503). AOF keeps every registration acknowledged before the restart.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from nsfleet.store.keys import Keys
from tests.support import invariants
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

NAMESPACE = "restart"
BROKERS = 20
BURST = 80  # concurrent requests, more than the connections the warm-up opened


def broker(i: int) -> dict[str, Any]:
    return {"clusterName": "c1", "brokerAddr": f"10.0.0.{i}:10911", "brokerName": f"b{i}",
            "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
            "heartbeatTimeoutMillis": 600_000,
            "topicConfigTable": {f"T{i}": {}, "Shared": {}}}


def ident(i: int) -> dict[str, Any]:
    return {k: broker(i)[k] for k in ("clusterName", "brokerAddr", "brokerName", "brokerId")}


@pytest.fixture
def redis_aof(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.stop()


@pytest.fixture
def worker(redis_aof: RedisServer, tmp_path: Path) -> Iterator[WorkerProcess]:
    # No route cache: every read is a Redis read, so every request meets the pool.
    env = {"NSFLEET_REDIS_URL": redis_aof.url, "NSFLEET_NAMESPACE": NAMESPACE,
           "NSFLEET_ROUTE_CACHE": "false", "NSFLEET_DRAIN_TIMEOUT": "2"}
    w = WorkerProcess(env, tmp_path / "worker.log").start()
    yield w
    w.stop()


def mixed_requests(url: str, n: int) -> list[Callable[[], tuple[int, Any]]]:
    """Reads and writes, every one a Redis call: routes, cluster info, KV, heartbeats,
    registrations."""
    calls: list[Callable[[], tuple[int, Any]]] = []
    for k in range(n):
        i = k % BROKERS
        calls += [
            lambda i=i: http("GET", f"{url}/v1/routes/T{i}"),
            lambda: http("GET", f"{url}/v1/cluster-info"),
            lambda i=i: http("POST", f"{url}/v1/brokers/heartbeat", ident(i)),
            lambda k=k: http("PUT", f"{url}/v1/kv/ns/k{k}", {"value": str(k)}),
            lambda i=i: http("POST", f"{url}/v1/brokers/register", broker(i)),
        ][k % 5:k % 5 + 1]
    return calls


def run_all(calls: list[Callable[[], tuple[int, Any]]]) -> list[tuple[int, Any]]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_no_request_fails_once_redis_is_back(redis_aof: RedisServer,
                                              worker: WorkerProcess) -> None:
    for i in range(BROKERS):
        assert http("POST", f"{worker.url}/v1/brokers/register", broker(i))[0] == 200
    # Warm the pool: many connections, each then idle through the restart.
    warm = run_all(mixed_requests(worker.url, BURST))
    assert [s for s, _ in warm] == [200] * BURST

    redis_aof.stop()
    time.sleep(3.0)
    redis_aof.start()  # returns once Redis answers PING (after it has loaded the AOF)

    burst = run_all(mixed_requests(worker.url, BURST))
    assert [(s, b) for s, b in burst if s != 200] == []
    # A slow trickle too: the pool hands out idle connections one by one.
    for call in mixed_requests(worker.url, 20):
        assert call()[0] == 200
        time.sleep(0.05)

    # AOF kept every registration, and the tables are consistent.
    clusters = http("GET", f"{worker.url}/v1/cluster-info")[1]
    assert len(clusters["brokerAddrTable"]) == BROKERS
    assert asyncio.run(_orphans(redis_aof.url)) == []


async def _orphans(url: str) -> list[str]:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        return await invariants.orphans(client, Keys(NAMESPACE))
    finally:
        await client.aclose()


def test_sigkill_of_redis_keeps_every_acknowledged_write(redis_aof: RedisServer,
                                                         worker: WorkerProcess) -> None:
    """Redis write(2)s the AOF before it replies, so a process crash keeps every acknowledged
    write even with appendfsync everysec (only a machine crash can lose the last second)."""
    acked = []
    for k in range(BURST):
        status, _ = http("PUT", f"{worker.url}/v1/kv/ns/k{k}", {"value": str(k)})
        assert status == 200
        acked.append(k)
    for i in range(BROKERS):
        assert http("POST", f"{worker.url}/v1/brokers/register", broker(i))[0] == 200
    assert redis_aof.process is not None
    redis_aof.process.send_signal(signal.SIGKILL)  # at once after the last acknowledgement
    redis_aof.process.wait(10)
    redis_aof.start()

    table = http("GET", f"{worker.url}/v1/kv/ns")[1]["table"]
    assert table == {f"k{k}": str(k) for k in acked}
    clusters = http("GET", f"{worker.url}/v1/cluster-info")[1]
    assert len(clusters["brokerAddrTable"]) == BROKERS
    assert asyncio.run(_orphans(redis_aof.url)) == []
