"""The worker's memo of unchanged registrations (nsfleet/store/unchanged_chunks.py): after the
first chunk of an unchanged 5.x split round has been proven unchanged in Redis, the round's other
chunks are answered without a Redis call and their DataVersion is written by
register_data_version.lua. Coherent with the change feed (a change injected while the probe is
in flight, or after the fill, sends the next chunk to Redis), the flush writes nothing once a
later registration or an unregistration took over, and what is pending is written on stop.
Against a real redis-server (the Lua, the change feed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, RegisterResult, TopicConfig
from nsfleet.service.nameserver import NameServer
from nsfleet.store import RouteStore
from nsfleet.store.unchanged_chunks import FLUSH_BATCH, Pending, UnchangedChunks
from tests.support.service import running_nameserver

SIZE = 80  # topics per chunk: every chunk is offered as a digest (probe_min_topics 64)
CHUNKS = 13
TOPICS = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(CHUNKS * SIZE)]
ADDR = "10.0.0.1:10911"
BASE = BrokerRegistration("c1", ADDR, "g", 0, topic_configs=())
WINDOW = 1.0  # the memo's window in these tests: rounds are WINDOW + a bit apart


def split_round(n: int) -> list[BrokerRegistration]:
    """Round ``n``: CHUNKS chunks of SIZE topics, each under the next DataVersion."""
    return [replace(BASE, topic_configs=tuple(TOPICS[i * SIZE:(i + 1) * SIZE]),
                    data_version=DataVersion(n * 100 + i, 10_000 + n * 100 + i, 0))
            for i in range(CHUNKS)]


def recorded(store: RouteStore) -> list[str]:
    """Every script call the store makes from now on, by name (register_broker: its mode)."""
    seen: list[str] = []
    original = store.calls.call

    async def recording(name: str, args: Any = (), keys: Any = ()) -> Any:
        seen.append(f"register_broker:{args.mode}" if name == "register_broker" else name)
        return await original(name, args, keys)

    store.calls.call = recording  # type: ignore[method-assign]
    return seen


async def until(check: Callable[[], Any], what: str) -> None:
    for _ in range(300):
        if await check() if asyncio.iscoroutinefunction(check) else check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within 3 s: {what}")


@pytest.fixture
async def served(real_redis: aioredis.Redis) -> AsyncIterator[tuple[RouteStore, NameServer]]:
    store = RouteStore(real_redis, "memo")
    await store.load_scripts()
    store.unchanged_chunks.window = WINDOW
    async with running_nameserver(store) as ns:
        await until(lambda: ns._cache.feed.subscribed, "the change feed subscribed")
        yield store, ns


@pytest.fixture
async def other(real_redis: aioredis.Redis) -> RouteStore:
    """Another worker's store over the same Redis (no memo: it follows no feed)."""
    s = RouteStore(real_redis, "memo")
    await s.load_scripts()
    return s


async def register(ns: NameServer, regs: list[BrokerRegistration]) -> None:
    for reg in regs:
        await ns.register_broker(reg)


async def two_rounds_then_past_the_window(ns: NameServer) -> None:
    """Round 1 writes the chunks, round 2 proves each unchanged (a probe each: the memo
    learns every digest), then the next round starts past the window, as every 30 s."""
    await register(ns, split_round(1))
    await register(ns, split_round(2))
    await asyncio.sleep(WINDOW + 0.1)


async def stored_dv(store: RouteStore) -> tuple[list[str | None], list[str | None]]:
    fields = ("dataVersionCounter", "dataVersionTimestamp")
    return (await store.redis.hmget(store.keys.broker("c1", ADDR), fields),
            await store.redis.hmget(store.keys.reg("c1", ADDR), fields))


async def routes_every_topic(store: RouteStore) -> bool:
    return await store.all_topics() == sorted(t.topic_name for t in TOPICS) and all(
        [await store.pickup_route(f"T{i}") is not None for i in range(0, len(TOPICS), 37)])


async def test_an_unchanged_split_round_costs_a_probe_and_a_flush(
        served: tuple[RouteStore, NameServer]) -> None:
    store, ns = served
    await two_rounds_then_past_the_window(ns)
    await store.unchanged_chunks.flush()
    row = store.keys.broker("c1", ADDR)
    before = (await store.redis.hget(row, "lastUpdateTimestamp"),
              await store.redis.zscore(store.keys.deadlines, f"c1\t{ADDR}"))
    await asyncio.sleep(0.01)
    seen = recorded(store)
    regs = split_round(3)
    await register(ns, regs)
    assert seen == ["register_broker:probe"]  # the first chunk; the others from the memo
    last = regs[-1].data_version
    await until(lambda: "register_data_version" in seen, "the flush")
    assert seen == ["register_broker:probe", "register_data_version"]
    assert await stored_dv(store) == ([str(last.counter), str(last.timestamp)],) * 2
    after = (await store.redis.hget(row, "lastUpdateTimestamp"),
             await store.redis.zscore(store.keys.deadlines, f"c1\t{ADDR}"))
    assert int(after[0]) > int(before[0]) and after[1] > before[1]
    assert await store.redis.pttl(row) > 100_000
    assert await routes_every_topic(store)
    assert await ns.query_data_version("c1", ADDR, last) == (False, last)
    # Every chunk the memo answered is counted (rounds 1 and 2 went to Redis).
    assert ns.metrics.registry.get_sample_value(
        "nsfleet_registrations_from_memo_total") == len(regs) - 1


async def test_a_chunk_after_the_window_goes_to_redis(
        served: tuple[RouteStore, NameServer]) -> None:
    store, ns = served
    await two_rounds_then_past_the_window(ns)
    seen = recorded(store)
    regs = split_round(3)
    await register(ns, regs[:2])
    assert seen == ["register_broker:probe"]
    await asyncio.sleep(WINDOW + 0.1)
    await register(ns, regs[2:3])
    assert seen[-1] == "register_broker:probe"


async def test_a_change_applied_while_the_probe_is_in_flight_is_not_remembered(
        served: tuple[RouteStore, NameServer], other: RouteStore) -> None:
    store, ns = served
    await two_rounds_then_past_the_window(ns)
    seen = recorded(store)
    probe = store.calls.call
    memo = store.unchanged_chunks

    async def change_in_flight(name: str, args: Any = (), keys: Any = ()) -> Any:
        reply = await probe(name, args, keys)
        if name == "register_broker":  # Redis answered "unchanged": now the topic goes
            ticket = memo.ticket()
            await other.delete_topic("T0")
            await until(lambda: memo.ticket() > ticket, "the deletion applied")
        return reply

    store.calls.call = change_in_flight  # type: ignore[method-assign]
    first = split_round(3)[0]
    assert not (await ns.register_broker(first)).remembered
    store.calls.call = probe  # type: ignore[method-assign]
    # The same chunk again under the next DataVersion: not from the memo, and Redis rewrites
    # the deleted topic as Java does (a new DataVersion rewrites the chunk's topics).
    again = replace(first, data_version=DataVersion(399, 10_399, 0))
    assert not (await ns.register_broker(again)).remembered
    assert seen[-1] in ("register_broker:full", "register_commit")
    assert await routes_every_topic(store)


async def test_a_change_after_the_fill_sends_the_next_chunk_to_redis(
        served: tuple[RouteStore, NameServer], other: RouteStore) -> None:
    store, ns = served
    await two_rounds_then_past_the_window(ns)
    regs = split_round(3)
    await register(ns, regs[:3])
    seen = recorded(store)
    ticket = store.unchanged_chunks.ticket()
    await other.delete_topic(f"T{5 * SIZE}")  # a topic of chunk 5
    await until(lambda: store.unchanged_chunks.ticket() > ticket, "the deletion applied")
    results = [await ns.register_broker(reg) for reg in regs[3:]]
    assert not any(r.remembered for r in results)
    assert "register_broker:full" in seen
    assert await routes_every_topic(store)


@pytest.mark.parametrize("takeover", ["registered elsewhere", "unregistered"])
async def test_the_flush_writes_nothing_once_another_registration_took_over(
        served: tuple[RouteStore, NameServer], other: RouteStore, takeover: str) -> None:
    store, ns = served
    store.unchanged_chunks.flush_interval = 60.0  # flushed by hand below
    await two_rounds_then_past_the_window(ns)
    regs = split_round(3)
    await register(ns, regs[:3])
    if takeover == "registered elsewhere":
        later = replace(regs[0], data_version=DataVersion(900, 10_900, 0))
        await other.register_broker(later)
    else:
        assert await other.unregister_broker("c1", ADDR, "g") == 1
    await store.unchanged_chunks.flush()
    if takeover == "registered elsewhere":
        assert await stored_dv(store) == (["900", "10900"],) * 2
    else:  # no live row, no registration record brought back
        assert not await store.redis.exists(store.keys.broker("c1", ADDR),
                                            store.keys.reg("c1", ADDR))
        assert await store.redis.zscore(store.keys.deadlines, f"c1\t{ADDR}") is None


async def test_what_is_pending_is_written_on_stop(real_redis: aioredis.Redis) -> None:
    store = RouteStore(real_redis, "memo")
    await store.load_scripts()
    store.unchanged_chunks.window = WINDOW
    store.unchanged_chunks.flush_interval = 60.0
    async with running_nameserver(store) as ns:
        await until(lambda: ns._cache.feed.subscribed, "the change feed subscribed")
        await two_rounds_then_past_the_window(ns)
        regs = split_round(3)
        await register(ns, regs)
        assert await stored_dv(store) != ([str(regs[-1].data_version.counter),
                                          str(regs[-1].data_version.timestamp)],) * 2
    last = regs[-1].data_version
    assert await stored_dv(store) == ([str(last.counter), str(last.timestamp)],) * 2


async def test_other_meta_or_a_closed_connection_goes_to_redis(
        served: tuple[RouteStore, NameServer]) -> None:
    store, ns = served
    await two_rounds_then_past_the_window(ns)
    regs = split_round(3)
    await register(ns, regs[:2])
    seen = recorded(store)
    # Another field of the registration (here the HA address) than the memo was proven for.
    assert not (await ns.register_broker(replace(regs[2], ha_server_addr="10.0.0.1:10912"))
                ).remembered
    assert seen == ["register_broker:probe"]
    await asyncio.sleep(WINDOW + 0.1)
    await register(ns, regs[:3])  # each proven again under the first meta
    assert (await ns.register_broker(
        replace(regs[2], data_version=DataVersion(399, 10_399, 0)))).remembered
    # A connection of the broker closing through this worker (kept: it registered over HTTP).
    assert not await ns.connection_closed("c1", ADDR, "g", "w:1")
    assert not (await ns.register_broker(regs[3])).remembered


async def test_a_slave_with_a_master_is_not_remembered(
        served: tuple[RouteStore, NameServer]) -> None:
    """Its answer carries the master's HA address, which may change unannounced."""
    store, ns = served
    await ns.register_broker(replace(split_round(1)[0], addr="10.0.0.9:10911",
                                     ha_server_addr="10.0.0.9:10912"))
    slave = [replace(r, broker_id=1) for r in split_round(1)[:3]]
    await register(ns, slave)
    await register(ns, slave)
    seen = recorded(store)
    results = [await ns.register_broker(r) for r in slave]
    assert [r.master_addr for r in results] == ["10.0.0.9:10911"] * 3
    assert not any(r.remembered for r in results)
    assert seen == ["register_broker:probe"] * 3


async def test_query_data_version_on_the_same_worker_sees_the_pending_data_version(
        served: tuple[RouteStore, NameServer]) -> None:
    store, ns = served
    store.unchanged_chunks.flush_interval = 60.0
    await two_rounds_then_past_the_window(ns)
    regs = split_round(3)
    await register(ns, regs)
    last = regs[-1].data_version
    assert await ns.query_data_version("c1", ADDR, last) == (False, last)


async def test_pending_data_versions_are_written_in_bounded_batches() -> None:
    batches: list[list[Pending]] = []

    async def write(batch: list[Pending]) -> int:
        batches.append(batch)
        return len(batch)

    memo = UnchangedChunks(write)
    memo.attach(live=lambda: True)
    for i in range(FLUSH_BATCH + 50):
        key = ("c1", f"10.0.{i // 250}.{i % 250}:10911")
        memo.remember(key, "meta", "digest", RegisterResult(generation=i), memo.ticket(), 120_000)
        assert memo.answer(key, "meta", "digest", DataVersion(i, 10_000 + i, 0)) is not None
    await memo.close()
    assert [len(b) for b in batches] == [FLUSH_BATCH, 50]
    assert batches[0][7] == ("c1", "10.0.0.7:10911", 7, 7, 10_007)
    assert memo.answer(("c1", "10.0.0.7:10911"), "meta", "digest", DataVersion()) is None


def answering_memo(writes: list[list[Pending]]) -> UnchangedChunks:
    async def write(batch: list[Pending]) -> int:
        writes.append(batch)
        return len(batch)

    memo = UnchangedChunks(write)
    memo.attach(live=lambda: True)
    memo.remember(("c1", ADDR), "meta", "digest", RegisterResult(generation=1), memo.ticket(),
                  120_000)
    return memo


async def test_a_round_s_data_version_is_written_once_when_its_chunks_stop() -> None:
    writes: list[list[Pending]] = []
    memo = answering_memo(writes)
    memo.flush_interval = 0.3
    for i in range(8):  # a round under load: a chunk every 0.1 s, longer than the interval
        assert memo.answer(("c1", ADDR), "meta", "digest", DataVersion(i, 100 + i, 0))
        await asyncio.sleep(0.1)
    assert writes == []
    await until(lambda: writes, "the write after the round")
    await asyncio.sleep(0.4)
    assert writes == [[("c1", ADDR, 1, 7, 107)]]
    await memo.close()


async def test_a_broker_that_never_pauses_is_written_within_the_max_lag() -> None:
    writes: list[list[Pending]] = []
    memo = answering_memo(writes)
    memo.flush_interval, memo.max_lag = 0.3, 0.5
    for i in range(12):
        assert memo.answer(("c1", ADDR), "meta", "digest", DataVersion(i, 100 + i, 0))
        await asyncio.sleep(0.1)
    assert writes and writes[0][0][3] < 11  # written while the answers went on
    await memo.close()
    assert writes[-1] == [("c1", ADDR, 1, 11, 111)]
