"""The sweep's look at the queue data's layout (docs/table-shape.md, "The move"): a store in
layout 1 is moved once no worker of an older build is alive, unless the worker holds it; in
layout 2 a live older worker is counted and logged (it reads no queue data there)."""

from __future__ import annotations

import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, TopicConfig
from nsfleet.metrics import Metrics
from nsfleet.service.sweeper import LAYOUT_CHECK_SWEEPS, Sweeper
from nsfleet.store import RouteStore, scripts

REG = BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, heartbeat_timeout_millis=600_000,
                         topic_configs=[TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 4, 4, 6)])


async def layout_1_store(redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(redis, "sweep-layout")
    await redis.set(store.keys.layout, scripts.LAYOUT_ROWS)
    await store.load_scripts()
    await store.register_broker(REG)
    return store


async def test_a_layout_1_store_is_moved_by_a_sweep_and_counted_after(
        real_redis: aioredis.Redis) -> None:
    store = await layout_1_store(real_redis)
    before = (await store.pickup_route("T1")).route  # type: ignore[union-attr]
    # A worker of the older build is alive: no move.
    await real_redis.set(store.keys.worker("old"), "1", px=60_000)
    metrics = Metrics()
    sweeper = Sweeper(store, metrics, interval=1, guard_share=0, worker_id="w1")
    await sweeper.sweep_once()
    assert await real_redis.get(store.keys.layout) == scripts.LAYOUT_ROWS
    # Gone: the next look (LAYOUT_CHECK_SWEEPS sweeps later) moves the store.
    await real_redis.delete(store.keys.worker("old"))
    for _ in range(LAYOUT_CHECK_SWEEPS):
        await sweeper.sweep_once()
    assert await real_redis.get(store.keys.layout) == scripts.LAYOUT_TOPICS
    assert metrics.layout._value.get() == 2
    assert (await store.pickup_route("T1")).route == before  # type: ignore[union-attr]
    # An older worker started after the move is counted.
    await real_redis.set(store.keys.worker("late"), "1", px=60_000)
    for _ in range(LAYOUT_CHECK_SWEEPS):
        await sweeper.sweep_once()
    assert metrics.old_workers._value.get() == 1


async def test_a_worker_holding_the_layout_does_not_move_it(real_redis: aioredis.Redis) -> None:
    store = await layout_1_store(real_redis)
    sweeper = Sweeper(store, Metrics(), interval=1, guard_share=0, worker_id="w1",
                      layout_move="hold")
    for _ in range(LAYOUT_CHECK_SWEEPS + 1):
        await sweeper.sweep_once()
    assert await real_redis.get(store.keys.layout) == scripts.LAYOUT_ROWS
