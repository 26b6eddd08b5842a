"""Liveness (Java RouteInfoManager.scanNotActiveBroker / onChannelDestroy): the live row's TTL
hides an expired broker from routes at once, the sweep then runs the unregister cascade; the
mass-expiry guard, batches, heartbeats and re-registration after expiry."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.service.acting_master import apply_acting_master
from nsfleet.store import RouteStore
from tests.support.invariants import orphans

TOPICS = [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)]


def broker(i: int, timeout: int | None = None, *, name: str | None = None, broker_id: int = 0,
           acting: bool = False) -> BrokerRegistration:
    return BrokerRegistration("c1", f"10.0.0.{i}:10911", name or f"broker-{i}", broker_id,
                              heartbeat_timeout_millis=timeout, enable_acting_master=acting,
                              data_version=DataVersion(1, 100), topic_configs=TOPICS)


async def redis_now(store: RouteStore) -> int:
    sec, usec = await store.redis.time()
    return sec * 1000 + usec // 1000


@pytest.fixture
async def real_store(real_redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(real_redis, "expiry")
    await store.load_scripts()
    return store


async def test_ttl_hides_an_expired_broker_before_the_sweep(real_store: RouteStore) -> None:
    s = real_store
    await s.register_broker(broker(1, 300))
    assert await s.pickup_route("T1") is not None
    await asyncio.sleep(0.45)
    for _ in range(40):  # the row's PEXPIREAT fires on access or in Redis's expiry cycle
        if await s.pickup_route("T1") is None:
            break
        await asyncio.sleep(0.05)
    assert await s.pickup_route("T1") is None
    # Cluster info agrees with routes on who is alive; the tables wait for the sweep.
    assert (await s.cluster_info()).broker_addr_table == {}
    assert await s.all_topics() == ["T1", "T2"]
    result = await s.sweep()
    assert result.removed == [("c1", "10.0.0.1:10911", "broker-1")]
    assert (await s.cluster_info()).broker_addr_table == {}
    assert await s.all_topics() == []
    assert await s.heartbeat("c1", "10.0.0.1:10911") is False  # swept: must register again
    assert await orphans(s.redis, s.keys) == []


async def test_late_heartbeat_keeps_the_broker(real_store: RouteStore) -> None:
    """RouteInfoManager.updateBrokerInfoUpdateTimestamp: a heartbeat that comes after the
    deadline but before scanNotActiveBroker keeps the broker, routes and all."""
    s = real_store
    await s.register_broker(broker(1, 300))
    for _ in range(60):
        if await s.pickup_route("T1") is None:
            break
        await asyncio.sleep(0.05)
    assert await s.pickup_route("T1") is None
    assert await s.heartbeat("c1", "10.0.0.1:10911") is True
    read = await s.pickup_route("T1")
    assert read is not None and read.route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert "broker-1" in (await s.cluster_info()).broker_addr_table
    assert (await s.query_data_version("c1", "10.0.0.1:10911", DataVersion(1, 100, 0)))[1] \
        is not None
    assert (await s.sweep()).removed == []
    assert await orphans(s.redis, s.keys) == []


async def test_expired_master_leaves_an_acting_master(real_store: RouteStore) -> None:
    s = real_store
    await s.register_broker(broker(1, 300, name="g", acting=True))
    await s.register_broker(broker(2, 60_000, name="g", broker_id=1, acting=True))
    read = await s.pickup_route("T1")
    assert read is not None and read.route.queue_datas[0].perm == 6
    assert read.ttl_ms <= 300  # the route may change when the first member's row expires
    await asyncio.sleep(0.45)
    for _ in range(40):
        read = await s.pickup_route("T1")
        if read is not None and 0 not in read.route.broker_datas[0].broker_addrs:
            break
        await asyncio.sleep(0.05)
    assert read is not None
    # The route is shaped as it will be after the sweep: only the slave, no write perm.
    assert read.route.broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}
    assert read.route.queue_datas[0].perm == 4
    acting = apply_acting_master(read.route, "T1")
    assert acting.broker_datas[0].broker_addrs == {0: "10.0.0.2:10911"}
    await s.sweep()
    after = await s.pickup_route("T1")
    assert after is not None and after.route.to_dict() == read.route.to_dict()


async def test_mass_expiry_guard(store: RouteStore) -> None:
    for i in range(1, 7):
        await store.register_broker(broker(i, 60_000 if i <= 4 else 3_600_000))
    now = await redis_now(store)
    held = await store.sweep(now_ms=now + 600_000, guard_share=0.5, guard_max_hold_ms=600_000)
    assert (held.held, held.due, held.live, held.removed) == (True, 4, 6, [])
    assert await store.redis.zcard(store.keys.deadlines) == 6
    # Never past the bound: a broker overdue by more than it goes even while the guard holds.
    bounded = await store.sweep(now_ms=now + 600_000, guard_share=0.5,
                                guard_max_hold_ms=500_000)
    assert bounded.held and len(bounded.removed) == 4
    assert await store.redis.zcard(store.keys.deadlines) == 2
    for i in range(1, 5):
        await store.register_broker(broker(i, 60_000))

    result = await store.sweep(now_ms=now + 600_000, guard_share=0)
    assert (result.held, result.due, result.live) == (False, 4, 6)
    assert sorted(result.removed) == [("c1", f"10.0.0.{i}:10911", f"broker-{i}")
                                      for i in range(1, 5)]
    assert sorted((await store.cluster_info()).broker_addr_table) == ["broker-5", "broker-6"]
    assert await orphans(store.redis, store.keys) == []


async def test_guard_lets_a_minority_through(store: RouteStore) -> None:
    for i in range(1, 7):
        await store.register_broker(broker(i, 60_000 if i <= 3 else 3_600_000))
    result = await store.sweep(now_ms=await redis_now(store) + 600_000, guard_share=0.5)
    assert (result.held, result.due, len(result.removed)) == (False, 3, 3)


async def test_small_fleets_are_never_held(store: RouteStore) -> None:
    for i in range(1, 5):
        await store.register_broker(broker(i, 60_000))
    result = await store.sweep(now_ms=await redis_now(store) + 600_000, guard_share=0.5)
    assert (result.held, len(result.removed)) == (False, 4)


async def test_sweep_in_batches(store: RouteStore) -> None:
    for i in range(1, 6):
        await store.register_broker(broker(i, 60_000))
    now = await redis_now(store) + 600_000
    first = await store.sweep(now_ms=now, batch=2, guard_share=0)
    assert (first.due, len(first.removed)) == (5, 2)
    second = await store.sweep(now_ms=now, batch=2, guard_share=0)
    third = await store.sweep(now_ms=now, batch=2, guard_share=0)
    assert (second.due, len(second.removed), third.due, len(third.removed)) == (3, 2, 1, 1)
    removed = {r[1] for r in first.removed + second.removed + third.removed}
    assert removed == {f"10.0.0.{i}:10911" for i in range(1, 6)}
    assert await store.sweep(now_ms=now, guard_share=0) == type(first)(False, 0, 0, [])


async def test_heartbeat_moves_the_deadline(store: RouteStore) -> None:
    await store.register_broker(broker(1, 60_000))
    key, member = store.keys.deadlines, "c1\t10.0.0.1:10911"
    first = await store.redis.zscore(key, member)
    await asyncio.sleep(0.01)
    assert await store.heartbeat("c1", "10.0.0.1:10911")
    second = await store.redis.zscore(key, member)
    assert first is not None and second is not None and second > first
    # Due as of first + 1 ms, not any more after the heartbeat.
    result = await store.sweep(now_ms=int(first) + 1)
    assert result.due == 0
    live = await store.live_brokers()
    assert [(b.broker_addr, b.deadline) for b in live] == [("10.0.0.1:10911", int(second))]


async def test_reregistration_after_expiry_survives_the_late_sweep(real_store: RouteStore) -> None:
    s = real_store
    reg = broker(1, 200)
    await s.register_broker(reg)
    await asyncio.sleep(0.3)
    assert await s.pickup_route("T1") is None
    # The broker registers again before any sweep ran: the old deadline is replaced, so the
    # sweep finds nothing due and the broker stays.
    await s.register_broker(replace(reg, heartbeat_timeout_millis=60_000))
    assert (await s.sweep()).removed == []
    assert await s.pickup_route("T1") is not None
    assert await orphans(s.redis, s.keys) == []


async def test_concurrent_sweeps_remove_each_broker_once(real_redis: aioredis.Redis,
                                                         redis_server: object) -> None:
    stores = []
    for _ in range(4):
        client = aioredis.Redis(**{k: real_redis.connection_pool.connection_kwargs[k]
                                   for k in ("host", "port")}, decode_responses=True)
        stores.append(RouteStore(client, "sweep"))
    for i in range(1, 21):
        await stores[0].register_broker(broker(i, 60_000))
    now = await redis_now(stores[0]) + 600_000
    results = await asyncio.gather(*[s.sweep(now_ms=now, batch=3, guard_share=0)
                                     for s in stores for _ in range(3)])
    removed = [r for res in results for r in res.removed]
    assert len(removed) == len(set(removed)) == 20
    assert await stores[0].all_topics() == []
    assert await orphans(stores[0].redis, stores[0].keys) == []
    for s in stores:
        await s.redis.aclose()
