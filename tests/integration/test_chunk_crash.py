"""Bounded script time, with real `nsfleet serve` processes: a worker SIGKILLed in the middle of a
chunked registration, or of a chunked cascade, leaves a consistent state (tests/support/
invariants.py finds no orphan) that the next registration, or the sweep of another worker,
completes.

To stop the worker between two chunks for certain, the test pauses Redis's writes (CLIENT PAUSE
WRITE holds every script call) as soon as the operation is half-way, SIGKILLs the worker, then
resumes: the chunk calls the dead worker had sent are dropped with its connection. A throwaway
redis-server per test (a paused server would stall other tests); workers bind 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from tests.support.invariants import orphans
from tests.support.workers import WorkerProcess, request

NAMESPACE = "crash"
TOPICS = 20_000  # 80 chunks of 250 rows: the pause lands half-way
ADDR, NAME = "10.3.0.1:10911", "big"


def registration(counter: int, read_queue_nums: int) -> dict[str, object]:
    return {"clusterName": "c1", "brokerAddr": ADDR, "brokerName": NAME, "brokerId": 0,
            "dataVersion": {"counter": counter, "timestamp": counter},
            "topicConfigTable": {
                f"T{i}": {"topicName": f"T{i}", "readQueueNums": read_queue_nums,
                          "writeQueueNums": 8, "perm": 6} for i in range(TOPICS)}}


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[tuple[WorkerProcess, WorkerProcess, RouteStore]]:
    """Worker A (to be killed), worker B (sweeping every 0.5 s), a store to inspect."""
    with RedisServer(data_dir=tmp_path / "redis", appendonly=False) as server:
        env = {"NSFLEET_REDIS_URL": server.url, "NSFLEET_NAMESPACE": NAMESPACE,
               "NSFLEET_SWEEP_INTERVAL": "0.5"}
        workers = [WorkerProcess(env, tmp_path / f"worker-{i}.log") for i in range(2)]
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        try:
            await asyncio.gather(*(asyncio.to_thread(w.start) for w in workers))
            yield workers[0], workers[1], RouteStore(client, NAMESPACE)
        finally:
            await client.client_unpause()
            for w in workers:
                if w.process is not None and w.process.poll() is None:
                    await asyncio.to_thread(w.stop)
            await client.aclose()


async def kill_when(store: RouteStore, worker: WorkerProcess,
                    half_way: Callable[[], Awaitable[bool]], send: Callable[[], object], *,
                    answered_first: bool = False) -> None:
    """Run ``send`` (a blocking HTTP call to ``worker``) and SIGKILL the worker, Redis's writes
    paused, as soon as ``half_way`` holds. ``answered_first``: the call answers before the
    work is done (the worker goes on in the background)."""
    call = asyncio.create_task(asyncio.to_thread(send))
    deadline = time.monotonic() + 60
    while not await half_way():
        assert time.monotonic() < deadline, "the operation never got half-way"
        assert answered_first or not call.done(), f"the operation ended first: {call.result()!r}"
        await asyncio.sleep(0.001)
    await store.redis.execute_command("CLIENT", "PAUSE", 20_000, "WRITE")
    assert worker.process is not None
    worker.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(worker.process.wait, 20)
    await asyncio.sleep(0.2)  # Redis sees the dead worker's connections close
    await store.redis.client_unpause()
    if answered_first:
        assert (await call)[0] == 200  # type: ignore[index]
        return
    with pytest.raises(OSError):
        await call


async def read_queue_nums(store: RouteStore) -> list[int | None]:
    """readQueueNums of every topic's row of NAME (layout 2: the first of the row's numbers)."""
    pipe = store.redis.pipeline(transaction=False)
    for i in range(TOPICS):
        pipe.hget(store.keys.topic_routes(f"T{i}"), NAME)
    return [None if v is None else int(v.split("\t")[0]) for v in await pipe.execute()]


async def test_worker_killed_mid_registration(
        fleet: tuple[WorkerProcess, WorkerProcess, RouteStore]) -> None:
    a, b, store = fleet
    assert request("POST", f"{b.url}/v1/brokers/register", registration(1, 8), timeout=60)[0] == 200
    reg_key = store.keys.reg("c1", ADDR)

    async def half_way() -> bool:
        row = await store.redis.hget(store.keys.topic_routes(f"T{TOPICS // 4}"), NAME)
        return await store.redis.hexists(reg_key, "pending") and \
            row is not None and row.split("\t")[0] == "4"

    await kill_when(store, a, half_way, lambda: request(
        "POST", f"{a.url}/v1/brokers/register", registration(2, 4), timeout=60))
    # Half written: every topic whole, before or after; the registration is marked pending.
    nums = await read_queue_nums(store)
    assert set(nums) == {8, 4}, "the kill did not land between two chunks"
    assert await store.redis.hexists(reg_key, "pending")
    assert await orphans(store.redis, store.keys) == []
    # The broker registers again (the same DataVersion, now stored): every topic is written.
    assert request("POST", f"{b.url}/v1/brokers/register", registration(2, 4), timeout=60)[0] == 200
    assert set(await read_queue_nums(store)) == {4}
    assert not await store.redis.hexists(reg_key, "pending")
    assert await orphans(store.redis, store.keys) == []


async def test_worker_killed_mid_cascade(
        fleet: tuple[WorkerProcess, WorkerProcess, RouteStore]) -> None:
    a, b, store = fleet
    assert request("POST", f"{b.url}/v1/brokers/register", registration(1, 8), timeout=60)[0] == 200

    async def half_way() -> bool:
        lists = await store.redis.hvals(store.keys.cleanup_topics(NAME))
        left = sum(len(text.split("\n")) for text in lists)
        return 0 < left < TOPICS * 3 // 4

    body = {"clusterName": "c1", "brokerAddr": ADDR, "brokerName": NAME}
    # The answer does not wait for the drain (the group is already gone from routes): the
    # worker dies while draining after it.
    await kill_when(store, a, half_way, lambda: request(
        "POST", f"{a.url}/v1/brokers/unregister", body, timeout=60), answered_first=True)
    assert await store.redis.sismember(store.keys.cleanups, NAME)
    assert await orphans(store.redis, store.keys) == []
    # Routes already leave the removed group out.
    assert request("GET", f"{b.url}/v1/routes/T{TOPICS - 1}")[0] == 404
    # B's sweep drains what A left.
    deadline = time.monotonic() + 30
    while await store.redis.exists(store.keys.cleanups):
        assert time.monotonic() < deadline, "the sweep did not drain the cleanup"
        await asyncio.sleep(0.2)
    assert await store.redis.scard(store.keys.topics) == 0
    assert await orphans(store.redis, store.keys) == []
