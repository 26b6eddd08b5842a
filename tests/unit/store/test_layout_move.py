"""The move of a store from the queue data's layout 1 to layout 2 (nsfleet/store/layout_move.py,
lua/layout_move.lua): every route the same before and after, for a new worker and for one that
met the store in layout 1; layout 1's keys gone; no move while an older build's worker lives or
layout 1's drains are pending; one mover among many; a dead mover's move taken over; an
interrupted cleaning finished; a write made while moving lands in layout 2."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis
from structlog.testing import capture_logs

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore, layout_move
from nsfleet.store.keys import Keys
from nsfleet.store.layout_move import MoveLost, _Move, maybe_move, old_workers_alive
from tests.support.invariants import orphans

NS = "test"


def registration(name: str, n: int, *, addr: str, shared: int = 5,
                 mapped: bool = False) -> BrokerRegistration:
    topics = [TopicConfig(f"S{i}", 4 + i % 3, 4, 6 - 2 * (i % 2), i % 2) for i in range(shared)]
    topics += [TopicConfig(f"{name}-T{i}", 8, 8, 6) for i in range(n)]
    mappings = {}
    if mapped:
        mappings = {"S0": {"topic": "S0", "bname": name, "epoch": 1, "totalQueues": 4,
                           "currIdMap": {"0": 0}}}
    return BrokerRegistration("c1", addr, name, 0, addr.replace("10911", "10912"),
                              enable_acting_master=True, data_version=DataVersion(1, 100, 1),
                              topic_configs=topics, topic_queue_mappings=mappings)


async def layout1_store(redis: aioredis.Redis) -> RouteStore:
    """A store written by workers of the build before layout 2: four groups, topics shared and
    their own (one with more than several copy pages), a static topic."""
    await redis.set(Keys(NS).layout, "1")
    store = RouteStore(redis, NS)
    await store.load_scripts()
    await store.register_broker(registration("g1", 40, addr="10.0.0.1:10911", mapped=True))
    await store.register_broker(registration("g2", 3, addr="10.0.0.2:10911"))
    await store.register_broker(registration("g3", 0, addr="10.0.0.3:10911", shared=2))
    await store.register_broker(registration("g4", 12, addr="10.0.0.4:10911", mapped=True))
    # A slave: no queue data of its own.
    await store.register_broker(replace(registration("g4", 12, addr="10.0.0.5:10911"),
                                        broker_id=1))
    assert await redis.exists(store.keys.queue("S0", "g1"))
    return store


async def routes(store: RouteStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for topic in await store.all_topics():
        read = await store.pickup_route(topic)
        assert read is not None, topic
        out[topic] = read.route
    return out


async def layout1_keys(redis: aioredis.Redis, keys: Keys) -> list[str]:
    found = []
    for pattern in layout_move.LAYOUT1_PATTERNS:
        found += [k async for k in redis.scan_iter(match=f"{keys.prefix}:{pattern}")]
    found += [k for k in layout_move.LAYOUT1_KEYS if await redis.exists(f"{keys.prefix}:{k}")]
    return found


async def check_moved(redis: aioredis.Redis, store: RouteStore, before: dict[str, Any]) -> None:
    keys = store.keys
    assert await redis.get(keys.layout) == "2"
    assert not await redis.exists(keys.layout_move)
    assert await layout1_keys(redis, keys) == []
    fresh = RouteStore(redis, NS)
    await fresh.load_scripts()
    assert fresh.calls.layout == "2"
    assert await routes(fresh) == before
    assert await routes(store) == before  # the old instance follows the "layout" answer
    assert store.calls.layout == "2"
    # Every row listed by its group.
    for topic in before:
        for name in await redis.hkeys(keys.topic_routes(topic)):
            lists = await redis.hgetall(keys.group_topics(name))
            listed = {t for f, text in lists.items() if f != "#" for t in text.split("\n")}
            assert topic in listed, (topic, name)
    assert await orphans(redis, keys) == []


async def test_a_layout1_store_moves_with_every_route_unchanged(
        real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    before = await routes(store)
    assert await orphans(real_redis, keys) == []
    pubsub = real_redis.pubsub()
    await pubsub.subscribe(keys.changes)
    await pubsub.get_message(timeout=1)  # the subscription's confirmation

    result = await maybe_move(real_redis, keys, "w1", page=7)

    assert result is not None
    assert (result.groups, result.rows) == (4, 45 + 8 + 2 + 17)
    assert result.deleted > 0 and result.seconds >= 0
    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
    assert message is not None and message["data"].endswith(" *")
    await pubsub.aclose()
    await check_moved(real_redis, store, before)
    # Nothing more to do: one round trip, no answer.
    assert await maybe_move(real_redis, keys, "w1") is None


async def test_no_move_while_a_worker_of_an_older_build_lives(
        real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    await real_redis.set(keys.worker("new"), layout_move.PRESENCE, px=60_000)
    await real_redis.set(keys.worker("old"), "1", px=60_000)
    assert await old_workers_alive(real_redis, keys) == ["old"]
    assert await maybe_move(real_redis, keys, "new") is None
    assert await real_redis.get(keys.layout) == "1"
    await real_redis.delete(keys.worker("old"))  # its presence lapsed
    assert await old_workers_alive(real_redis, keys) == []
    assert await maybe_move(real_redis, keys, "new") is not None
    assert await real_redis.get(keys.layout) == "2"


@pytest.mark.parametrize("drain", ["cleanups", "perm_clears"])
async def test_no_move_while_layout1_drains_are_pending(
        real_redis: aioredis.Redis, drain: str) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    if drain == "cleanups":
        await real_redis.sadd(keys.cleanups, "gone")
    else:
        await real_redis.hset(keys.perm_clears, "g1", "0")
    assert await maybe_move(real_redis, keys, "w1") is None
    assert await real_redis.get(keys.layout) == "1"
    assert not await real_redis.exists(keys.layout_move)
    # The script checks again on its own.
    move = _Move(real_redis, keys, "w1", 30_000)
    reply = await move.step("begin")
    assert (reply.status, reply.values) == ("held", ["drains"])


async def test_of_workers_trying_at_once_one_moves(real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    before = await routes(store)
    results = await asyncio.gather(*(maybe_move(real_redis, store.keys, f"w{i}", page=5)
                                      for i in range(4)))
    done = [r for r in results if r is not None]
    assert len(done) == 1 and done[0].rows == 72
    await check_moved(real_redis, store, before)


async def test_a_move_under_way_is_left_to_its_owner(real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    move = _Move(real_redis, keys, "w1", 30_000)
    assert (await move.step("begin")).values == ["1"]
    assert await real_redis.get(keys.layout) == "moving"
    assert await real_redis.hget(keys.layout_move, "state") == "copying"
    assert 0 < await real_redis.pttl(keys.layout_move) <= 30_000
    assert await maybe_move(real_redis, keys, "w2") is None
    assert await maybe_move(real_redis, keys, "w1") is None  # its own, in another task
    reply = await _Move(real_redis, keys, "w2", 30_000).step("begin")
    assert (reply.status, reply.values) == ("held", ["owner"])
    # Reads go on from layout 1 meanwhile.
    read = await store.pickup_route("S0")
    assert read is not None and len(read.route.queue_datas) == 4


async def test_a_dead_movers_move_is_taken_over(real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    before = await routes(store)
    dead = _Move(real_redis, keys, "dead", 30_000)
    await dead.step("begin")
    topics = sorted(await real_redis.smembers(keys.broker_topics("g1")))
    await dead.step("copy", "g1", 1, topics[:10])
    await dead.step("copy", "g1", 2, topics[10:20])
    await dead.step("copy", "g4", 1, ["S0", "S1", "nothing"])
    await real_redis.delete(keys.layout_move)  # its lease lapsed

    result = await maybe_move(real_redis, keys, "w2", page=100)

    assert result is not None and result.rows == 72
    await check_moved(real_redis, store, before)
    # The first copy's lists went with the second copy's first page of each group.
    assert set(await real_redis.hkeys(keys.group_topics("g1"))) == {"m1"}
    with pytest.raises(MoveLost):
        await dead.step("copy", "g1", 3, topics[20:])


async def test_a_mover_whose_lease_lapsed_stops(real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    slow = _Move(real_redis, keys, "slow", 30_000)
    await slow.step("begin")
    await real_redis.delete(keys.layout_move)
    await _Move(real_redis, keys, "quick", 30_000).step("begin")
    for op in ("renew", "copy", "finish"):
        with pytest.raises(MoveLost):
            await slow.step(op, "g1", 1, ["S0"])
    assert await real_redis.get(keys.layout) == "moving"
    assert not await real_redis.exists(keys.topic_routes("S0"))


async def test_an_interrupted_cleaning_is_finished_by_the_next_call(
        real_redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    before = await routes(store)

    async def crash(redis: Any, keys: Keys) -> int:
        # Part of the cleaning done, then the worker dies.
        queue_keys = [k async for k in redis.scan_iter(match=f"{keys.prefix}:queue:*")]
        await redis.unlink(*queue_keys[:5])
        raise ConnectionError("killed")

    monkeypatch.setattr(layout_move, "clean", crash)
    with pytest.raises(ConnectionError):
        await maybe_move(real_redis, keys, "w1")
    monkeypatch.undo()
    assert await real_redis.get(keys.layout) == "2"
    assert await real_redis.hget(keys.layout_move, "state") == "cleaning"
    assert await real_redis.pttl(keys.layout_move) == -1
    assert await layout1_keys(real_redis, keys)
    assert await routes(store) == before  # layout 2 is read already

    result = await maybe_move(real_redis, keys, "w2")
    assert result is not None and (result.groups, result.rows) == (0, 0) and result.deleted > 0
    await check_moved(real_redis, store, before)


async def test_a_registration_while_moving_waits_and_lands_in_layout2(
        real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    await _Move(real_redis, keys, "w0", 30_000).step("begin")
    newcomer = registration("g5", 4, addr="10.0.0.6:10911", shared=1)
    task = asyncio.create_task(store.register_broker(newcomer))
    await asyncio.sleep(0.3)
    assert not task.done()  # queue data is not written while moving
    before = await routes(store)
    assert "g5-T0" not in before

    await real_redis.delete(keys.layout_move)  # the mover died: another takes over
    result = await maybe_move(real_redis, keys, "w1")

    assert result is not None
    await asyncio.wait_for(task, 5)
    assert await real_redis.get(keys.layout) == "2"
    read = await store.pickup_route("g5-T0")
    assert read is not None and [q.broker_name for q in read.route.queue_datas] == ["g5"]
    read = await store.pickup_route("S0")
    assert read is not None and len(read.route.queue_datas) == 5
    assert "g5-T0" in (await real_redis.hget(keys.group_topics("g5"), "1") or "")
    assert await layout1_keys(real_redis, keys) == []
    assert await orphans(real_redis, keys) == []


async def test_an_empty_layout1_store_moves(real_redis: aioredis.Redis) -> None:
    keys = Keys(NS)
    await real_redis.set(keys.layout, "1")
    result = await maybe_move(real_redis, keys, "w1")
    assert result is not None and (result.groups, result.rows) == (0, 0)
    assert await real_redis.get(keys.layout) == "2"
    assert not await real_redis.exists(keys.layout_move)


async def test_hold_keeps_layout1_but_finishes_a_move_under_way(
        real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    before = await routes(store)
    assert await maybe_move(real_redis, keys, "w1", hold=True) is None
    assert await real_redis.get(keys.layout) == "1"
    # A move begun by a worker that was not held, which died: writes wait while "moving", so a
    # held worker takes it over all the same.
    await _Move(real_redis, keys, "dead", 30_000).step("begin")
    await real_redis.delete(keys.layout_move)
    result = await maybe_move(real_redis, keys, "w1", hold=True)
    assert result is not None and result.rows == 72
    await check_moved(real_redis, store, before)


async def test_an_older_worker_is_logged_once(real_redis: aioredis.Redis) -> None:
    store = await layout1_store(real_redis)
    keys = store.keys
    layout_move._old_logged.discard("old")
    await real_redis.set(keys.worker("old"), "1", px=60_000)
    with capture_logs() as logs:
        for _ in range(3):
            assert await maybe_move(real_redis, keys, "new") is None
    waiting = [e for e in logs if "older build" in e["event"]]
    assert len(waiting) == 1 and waiting[0]["log_level"] == "info"
    assert waiting[0]["workers"] == ["old"]
