"""One view across the fleet: after every burst of writes on one worker, every worker serves the
route Redis holds, under concurrent readers (the stale-route race of the old route cache: a read
in flight while the change was applied stored the route from before it, for up to 60 s)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from nsfleet.service.route_reads import standard_route_json
from nsfleet.store import RouteStore
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

NAMESPACE = "coherence"
TOPICS = [f"C{i}" for i in range(4)]
BURSTS = 40
READERS = 16
BOUND = 2.0  # seconds a worker may take to converge here; bench/propagation.py measures it


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": NAMESPACE,
           "NSFLEET_DRAIN_TIMEOUT": "2", "NSFLEET_ROUTE_CACHE": "true"}
    workers = [WorkerProcess(env, tmp_path / f"worker{i}.log").start() for i in range(3)]
    yield workers
    for w in workers:
        w.stop()


def registration(i: int) -> dict[str, object]:
    return {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
            "brokerId": 0, "dataVersion": {"counter": i, "timestamp": i},
            "topicConfigTable": {t: {"readQueueNums": 1 + i % 16, "writeQueueNums": 1 + i % 16}
                                 for t in TOPICS}}


async def read_loop(session: aiohttp.ClientSession, urls: list[str], stop: asyncio.Event,
                    k: int) -> int:
    reads = 0
    while not stop.is_set():
        url = urls[k % len(urls)]
        async with session.get(f"{url}/v1/routes/{TOPICS[reads % len(TOPICS)]}") as resp:
            await resp.read()
        reads += 1
    return reads


async def converged(session: aiohttp.ClientSession, urls: list[str],
                    store: RouteStore) -> float:
    """Seconds until every worker answers every topic exactly as Redis holds it."""
    started = time.monotonic()
    expected = {}
    for topic in TOPICS:
        read = await store.pickup_route(topic)
        assert read is not None
        expected[topic] = json.loads(standard_route_json(read.route))
    pending = {(url, topic) for url in urls for topic in TOPICS}
    while pending:
        for url, topic in sorted(pending):
            async with session.get(f"{url}/v1/routes/{topic}") as resp:
                if resp.status == 200 and await resp.json() == expected[topic]:
                    pending.discard((url, topic))
        waited = time.monotonic() - started
        assert waited < BOUND, f"stale after {waited:.2f} s: {sorted(pending)[:4]}"
    return time.monotonic() - started


async def test_every_worker_serves_what_redis_holds_after_each_burst(
        fleet: list[WorkerProcess], redis_server: RedisServer) -> None:
    writer, *readers = fleet
    urls = [w.url for w in fleet]
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    store = RouteStore(client, NAMESPACE)
    await store.load_scripts()
    counter = 0
    try:
        async with aiohttp.ClientSession() as session:
            for burst in range(BURSTS):
                stop = asyncio.Event()
                tasks = [asyncio.create_task(read_loop(session, [r.url for r in readers], stop, k))
                         for k in range(READERS)]
                for _ in range(1 + burst % 5):
                    counter += 1
                    async with session.post(f"{writer.url}/v1/brokers/register",
                                            json=registration(counter)) as resp:
                        assert resp.status == 200, await resp.text()
                stop.set()
                assert sum(await asyncio.gather(*tasks)) > 0
                await converged(session, urls, store)
    finally:
        await client.aclose()
