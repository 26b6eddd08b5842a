"""Chunks of concurrent first registrations written together (store/joint_chunks.py,
lua/register_topics_joint.lua): the store ends as the registrations one by one leave it, each
chunk is fenced on its own, a row found written meanwhile is listed and not counted as added,
and a registration's cancellation or superseded chunk leaves the others' chunks answered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData
from nsfleet.store import RouteStore, script_calls, scripts
from nsfleet.store.joint_chunks import JointChunks, joinable
from nsfleet.store.replies import Reply, Status
from tests.support.invariants import orphans
from tests.unit.store.test_chunks import CHUNK, TOPICS, Killed, die_after, record

GROUPS = 4
BROKERS = [BrokerRegistration(
    "c1", f"10.0.0.{i}:10911", f"g{i}", 0, data_version=DataVersion(1, 100),
    topic_configs=[structs.replace(t, read_queue_nums=i + 1) for t in TOPICS])
    for i in range(GROUPS)]


async def new_store(redis: aioredis.Redis, namespace: str) -> RouteStore:
    store = RouteStore(redis, namespace, chunk_rows=CHUNK)
    await store.load_scripts()
    return store


async def routes(store: RouteStore) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for t in TOPICS:
        read = await store.pickup_route(t.topic_name)
        assert read is not None
        out[t.topic_name] = sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm)
                                   for q in read.route.queue_datas)
    return out


async def until(done: Callable[[], bool]) -> None:
    """Until ``done()`` holds (the tasks started meanwhile run)."""
    async with asyncio.timeout(10):
        while not done():  # noqa: ASYNC110 (what it waits for sets no event)
            await asyncio.sleep(0.001)


async def all_offered(joint: JointChunks, chunks: int) -> None:
    """Until ``chunks`` chunks wait (each registration has offered all its own)."""
    await until(lambda: sum(map(len, joint._waiting.values())) >= chunks)


async def test_concurrent_first_registrations_are_written_together_as_one_by_one(
        any_redis: aioredis.Redis) -> None:
    alone = await new_store(any_redis, "alone")
    for reg in BROKERS:
        await alone.register_broker(reg)
    store = await new_store(any_redis, "joint")
    seen = record(store)
    slots = store.calls.chunk_slots
    for _ in range(script_calls.CHUNKS_IN_REDIS):  # every chunk offered before one is sent
        await slots.acquire()
    chunks_each = -(-len(TOPICS) // CHUNK)
    storm = [asyncio.create_task(store.register_broker(reg)) for reg in BROKERS]
    await all_offered(store.registration.joint_chunks, GROUPS * chunks_each)
    for _ in range(script_calls.CHUNKS_IN_REDIS):
        slots.release()
    results = await asyncio.gather(*storm)
    assert all(r.changed for r in results)
    # Every chunk is in a call of all four groups': a call per chunk of one table.
    assert seen.count("register_topics_joint") == chunks_each
    assert "register_topics" not in seen
    assert await routes(store) == await routes(alone)
    assert await store.all_topics() == await alone.all_topics()
    assert await orphans(any_redis, store.keys) == []
    # Each group's topicsEpoch was recorded as its chunks advanced it: the next unchanged
    # registration is the probe alone.
    seen.clear()
    for reg in BROKERS:
        assert not (await store.register_broker(reg)).changed
    assert seen == ["register_broker"] * GROUPS


async def heads(store: RouteStore, redis: aioredis.Redis, regs: list[BrokerRegistration]
                ) -> list[str]:
    """Each registration's head written, no chunk: the generations the heads answered."""
    generations = []
    for reg in regs:
        die_after(store, 0)
        with pytest.raises(Killed):
            await store.register_broker(reg)
        generations.append(await redis.hget(store.keys.reg(reg.cluster, reg.addr), "generation"))
    return generations


def joint_args(regs: list[BrokerRegistration], generations: list[str], text: str
               ) -> scripts.RegisterTopicsJointArgs:
    return scripts.RegisterTopicsJointArgs(
        [v for reg, gen in zip(regs, generations, strict=True)
         for v in (reg.cluster, reg.addr, reg.name, gen, "0", text)])


async def test_each_chunk_is_fenced_on_its_own(any_redis: aioredis.Redis) -> None:
    store = await new_store(any_redis, "fenced")
    a, b = BROKERS[:2]
    gen_a, _ = await heads(store, any_redis, [a, b])
    reply = await store.calls.call("register_topics_joint", joint_args(
        [a, b], [gen_a, "999"], "T0\t8\t8\t6\t0\nT1\t8\t8\t6\t0\n"))
    assert reply == Reply(Status.OK, ["ok", "1", "2", "2", "stale", "", "", ""])
    assert [q.broker_name for q in (await store.pickup_route("T0")).route.queue_datas] == ["g0"]


async def test_a_row_found_written_is_listed_and_not_counted_as_added(
        any_redis: aioredis.Redis) -> None:
    store = await new_store(any_redis, "meanwhile")
    a, b = BROKERS[:2]
    generations = await heads(store, any_redis, [a, b])
    await store.register_topic("T0", [QueueData("g0", 1, 1, 6, 0)])
    reply = await store.calls.call("register_topics_joint", joint_args(
        [a, b], generations, "T0\t8\t8\t6\t0\nT1\t8\t8\t6\t0\n"))
    # Each group's epoch advances by both rows; T0 is added for g1 only, but which of the two
    # rows HSET found is not known: neither counts.
    assert reply == Reply(Status.OK, ["ok", "1", "2", "1", "ok", "1", "2", "1"])
    assert sorted((q.broker_name, q.read_queue_nums)
                  for q in (await store.pickup_route("T0")).route.queue_datas) == [
        ("g0", 8), ("g1", 8)]
    assert await orphans(any_redis, store.keys) == []


def test_only_a_first_registrations_topic_chunks_are_joinable() -> None:
    fresh = scripts.RegisterTopicsArgs("c", "a", "g", "1", "1", "0", "T\t1\t1\t6\t0\n", "[]",
                                       "[]", "1", "")
    assert joinable(fresh)
    assert not joinable(fresh._replace(fresh="0"))
    assert not joinable(fresh._replace(force="0"))
    assert not joinable(fresh._replace(topics="", mappings='[["T","g","{}"]]'))
    assert not joinable(fresh._replace(absent='["T"]'))


class GatedCalls:
    """ScriptCalls as JointChunks uses it: calls recorded, each answered once ``gate`` opens."""

    def __init__(self, stale: frozenset[str] = frozenset(), slots: int = 1) -> None:
        self.chunk_slots = asyncio.Semaphore(slots)
        self.gate = asyncio.Event()
        self.gate.set()
        self.batches: list[list[tuple[str, str]]] = []
        self.stale = stale

    async def call(self, name: str, args: Any) -> Reply:
        if name == "register_topics":
            chunks = [(args.name, args.topics[:2])]
        else:
            flat = list(args.chunks)
            chunks = [(flat[i + 2], flat[i + 5][:2]) for i in range(0, len(flat), 6)]
        self.batches.append(chunks)
        await self.gate.wait()
        answers = [["stale", "", "", ""] if c[0] in self.stale else ["ok", "1", "2", "2"]
                   for c in chunks]
        if name == "register_topics":
            return Reply(Status(answers[0][0]), answers[0][1:] if answers[0][0] == "ok" else [])
        return Reply(Status.OK, [v for a in answers for v in a])


def chunk(name: str, first: str) -> scripts.RegisterTopicsArgs:
    return scripts.RegisterTopicsArgs("c", f"{name}:1", name, "1", "1", "0",
                                      f"{first}\t1\t1\t6\t0\n", "[]", "[]", "1", "")


async def test_a_call_carries_the_chunk_the_most_others_start_like() -> None:
    calls = GatedCalls()
    joint = JointChunks(calls)  # type: ignore[arg-type]
    await calls.chunk_slots.acquire()
    a = asyncio.create_task(joint.write([chunk("a", "T0"), chunk("a", "T3")]))
    b = asyncio.create_task(joint.write([chunk("b", "T3")]))
    await all_offered(joint, 3)
    calls.chunk_slots.release()
    assert [len(r) for r in await asyncio.gather(a, b)] == [2, 1]
    assert calls.batches == [[("a", "T3"), ("b", "T3")], [("a", "T0")]]


async def test_one_call_of_several_chunks_is_in_redis_at_a_time() -> None:
    """Two chunk slots, and two registrations' chunks to write together: their second call
    waits for the first (JOINT_CALLS_IN_REDIS), holding a slot, so Redis has one call of
    several groups' chunks of a worker before a route read."""
    calls = GatedCalls(slots=2)
    joint = JointChunks(calls)  # type: ignore[arg-type]
    for _ in range(2):
        await calls.chunk_slots.acquire()
    storm = [asyncio.create_task(joint.write([chunk(name, "T0"), chunk(name, "T3")]))
             for name in ("a", "b")]
    await all_offered(joint, 4)
    calls.gate.clear()
    for _ in range(2):
        calls.chunk_slots.release()
    await until(lambda: bool(calls.batches))
    await asyncio.sleep(0.01)
    assert calls.batches == [[("a", "T0"), ("b", "T0")]]
    calls.gate.set()
    assert [len(r) for r in await asyncio.gather(*storm)] == [2, 2]
    assert calls.batches == [[("a", "T0"), ("b", "T0")], [("a", "T3"), ("b", "T3")]]
    assert joint.joint_slots._value == 1 and calls.chunk_slots._value == 2


async def test_a_registration_alone_keeps_two_chunk_calls_in_redis() -> None:
    """Chunks written alone take no joint slot: a registration alone has a chunk call in each
    of the two chunk slots (CALLS_IN_FLIGHT), as before calls carried several."""
    calls = GatedCalls(slots=2)
    joint = JointChunks(calls)  # type: ignore[arg-type]
    await joint.joint_slots.acquire()  # a joint call of other registrations in Redis
    calls.gate.clear()
    alone = asyncio.create_task(joint.write([chunk("a", f"T{i}") for i in range(3)]))
    await until(lambda: len(calls.batches) == 2)
    calls.gate.set()
    assert len(await alone) == 3
    assert calls.batches == [[("a", "T0")], [("a", "T1")], [("a", "T2")]]


async def test_a_cancelled_registration_leaves_the_chunks_it_carried_answered() -> None:
    calls = GatedCalls()
    joint = JointChunks(calls)  # type: ignore[arg-type]
    await calls.chunk_slots.acquire()
    a = asyncio.create_task(joint.write([chunk("a", "T0")]))
    b = asyncio.create_task(joint.write([chunk("b", "T0")]))
    await all_offered(joint, 2)
    calls.gate.clear()
    calls.chunk_slots.release()
    await until(lambda: bool(calls.batches))
    assert calls.batches == [[("a", "T0"), ("b", "T0")]]
    a.cancel()
    await asyncio.sleep(0.01)
    calls.gate.set()
    assert await b == [Reply(Status.OK, ["1", "2", "2"])]
    with pytest.raises(asyncio.CancelledError):
        await a


async def test_a_stale_chunk_ends_its_registrations_calls() -> None:
    calls = GatedCalls(stale=frozenset({"a"}))
    joint = JointChunks(calls)  # type: ignore[arg-type]
    replies = await joint.write([chunk("a", f"T{i}") for i in range(5)])
    assert replies == [Reply(Status.STALE, [])]
    assert calls.batches == [[("a", "T0")]]
    assert joint._waiting == {}
