"""5.x split registration (enableSplitRegistration): a broker sends its topic table in chunks,
each under a new DataVersion, each only part of the table. Every chunk is a registration of its
own (Java: RouteInfoManager.registerBroker sees a changed DataVersion and writes the chunk's
topics; with deleteTopicWithBrokerRegistration off a chunk never removes other chunks' topics).
An unchanged chunk costs one probe call whatever its DataVersion (lua/includes/tables.lua); a
changed chunk writes only its own rows. Each case runs with chunks that fit one script call and
with chunks that run as head, chunks and commit (chunk_rows below a chunk's size), on fakeredis
and on a real redis-server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore
from tests.support.invariants import orphans

SIZE = 80  # topics per chunk: past the probe threshold, as 5.x's 800 are
TOPICS = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(4 * SIZE + 17)]
ADDR = "10.0.0.1:10911"
BASE = BrokerRegistration("c1", ADDR, "g", 0, topic_configs=())


def split_round(n: int, topics: Sequence[TopicConfig] = TOPICS, *, state: int = 0,
                base: BrokerRegistration = BASE) -> list[BrokerRegistration]:
    """Round ``n`` of a split registration: SIZE topics a chunk, the rest last, every chunk
    under the next DataVersion (TopicConfigManager.buildSerializeWrapper's nextVersion)."""
    chunks = [topics[i:i + SIZE] for i in range(0, len(topics), SIZE)]
    return [replace(base, topic_configs=list(c),
                    data_version=DataVersion(n * 100 + i, 10_000 + n * 100 + i, state))
            for i, c in enumerate(chunks)]


@pytest.fixture(params=[1000, 30], ids=["one-call-chunks", "chunked-chunks"])
async def store(any_redis: aioredis.Redis, request: pytest.FixtureRequest) -> RouteStore:
    s = RouteStore(any_redis, "split", chunk_rows=request.param)
    await s.load_scripts()
    return s


def one_call(calls: list[list[str]]) -> bool:
    """Every chunk took one call: the probe, or for the remainder (under the probe threshold)
    the table itself, skipped inside the script all the same."""
    return all(len(c) == 1 for c in calls)


def record(store: RouteStore) -> list[str]:
    """The script calls the store makes from now on: register_broker by its mode."""
    seen: list[str] = []
    original = store.calls.call

    async def recording(name: str, args: Any = (), keys: Any = ()) -> Any:
        seen.append(args.mode if name == "register_broker" else name)
        return await original(name, args, keys)

    store.calls.call = recording  # type: ignore[method-assign]
    return seen


async def register_round(store: RouteStore, regs: list[BrokerRegistration],
                         seen: list[str] | None = None) -> list[list[str]]:
    """Register every chunk; the calls each made (when recording)."""
    per_chunk = []
    for reg in regs:
        start = len(seen) if seen is not None else 0
        await store.register_broker(reg)
        per_chunk.append(seen[start:] if seen is not None else [])
    return per_chunk


async def queue(store: RouteStore, topic: str, name: str = "g") -> tuple[int, int, int] | None:
    read = await store.pickup_route(topic)
    if read is None:
        return None
    for q in read.route.queue_datas:
        if q.broker_name == name:
            return q.read_queue_nums, q.write_queue_nums, q.perm
    return None


async def test_every_topic_of_every_chunk_routes(store: RouteStore) -> None:
    await register_round(store, split_round(1))
    assert await store.all_topics() == sorted(t.topic_name for t in TOPICS)
    for t in TOPICS:
        assert await queue(store, t.topic_name) == (8, 8, 6)
    # Chunks add: a second round leaves every topic, the last DataVersion recorded.
    await register_round(store, split_round(2))
    assert await store.all_topics() == sorted(t.topic_name for t in TOPICS)
    last = split_round(2)[-1].data_version
    assert (await store.query_data_version("c1", ADDR, last))[0] is False
    assert await orphans(store.redis, store.keys) == []


async def test_an_unchanged_round_is_one_probe_per_chunk(store: RouteStore) -> None:
    await register_round(store, split_round(1))
    seen = record(store)
    for n in (2, 3):
        calls = await register_round(store, split_round(n), seen)
        assert one_call(calls)
    results = [await store.register_broker(r) for r in split_round(4)]
    assert not any(r.changed for r in results)


async def test_a_changed_chunk_writes_only_that_chunk(store: RouteStore) -> None:
    await register_round(store, split_round(1))
    seen = record(store)
    changed = [structs.replace(t, read_queue_nums=4) if t.topic_name == "T85" else t
               for t in TOPICS]
    calls = await register_round(store, split_round(2, changed), seen)
    assert calls[0] == ["probe"]
    assert calls[1][:2] == ["probe", "head" if store.chunk_rows < SIZE else "full"]
    assert await queue(store, "T85") == (4, 8, 6)
    # A changed row may have belonged to another recorded chunk (chunk boundaries move), so the
    # chunks after it compare their rows once (reads, no writes); then every chunk is O(1).
    await register_round(store, split_round(3, changed))
    calls = await register_round(store, split_round(4, changed), seen)
    assert one_call(calls)
    assert {await queue(store, t.topic_name) for t in changed if t.topic_name != "T85"} == {
        (8, 8, 6)}


async def test_a_chunk_adding_topics_leaves_the_others_o1(store: RouteStore) -> None:
    await register_round(store, split_round(1))
    seen = record(store)
    grown = [*TOPICS, TopicConfig("NEW", 2, 2, 6)]
    calls = await register_round(store, split_round(2, grown), seen)
    assert one_call(calls[:-1])
    assert calls[-1] == ["full"]  # the remainder: under the probe threshold, in one call
    assert await queue(store, "NEW") == (2, 2, 6)
    calls = await register_round(store, split_round(3, grown), seen)
    assert one_call(calls)


async def test_a_topic_moving_between_chunks_is_rewritten_as_java_does(
        store: RouteStore) -> None:
    """Round 2 moves T0 into the second chunk with another perm; round 3 sends round 1's chunks
    again: Java rewrites every topic of every chunk (a new DataVersion), so T0 is back at 6,
    although round 1's first chunk was once written as it says."""
    await register_round(store, split_round(1))
    moved = [*TOPICS[1:SIZE + 1], structs.replace(TOPICS[0], perm=4), *TOPICS[SIZE + 1:]]
    await register_round(store, split_round(2, moved))
    assert await queue(store, "T0") == (8, 8, 4)
    await register_round(store, split_round(3))
    assert await queue(store, "T0") == (8, 8, 6)


async def test_a_row_changed_on_the_name_server_is_rewritten_by_its_chunk(
        store: RouteStore) -> None:
    await register_round(store, split_round(1))
    assert await store.delete_topic("T3") == 1
    await store.wipe_write_perm("g")
    await register_round(store, split_round(2))
    assert await queue(store, "T3") == (8, 8, 6)
    assert {await queue(store, t.topic_name) for t in TOPICS} == {(8, 8, 6)}
    assert await orphans(store.redis, store.keys) == []


async def test_delete_topic_with_broker_registration_keeps_only_the_chunk_sent(
        store: RouteStore) -> None:
    """Java decides from what the broker sends, and nothing in a chunk says it is one: with
    deleteTopicWithBrokerRegistration on (and no static-topic mappings), each chunk is the
    broker's whole table, so it removes the topics of the chunks before it. After a round only
    the last chunk's topics route (docs/architecture.md, "Split registration")."""
    regs = split_round(1)
    for reg in regs:
        await store.register_broker(reg, delete_absent_topics=True)
    last = {t.topic_name for t in regs[-1].topic_configs}
    assert set(await store.all_topics()) == last
    for reg in split_round(2):
        await store.register_broker(reg, delete_absent_topics=True)
    assert set(await store.all_topics()) == last
    assert await orphans(store.redis, store.keys) == []


async def test_a_fenced_chunk_writes_nothing_and_unregistered_brokers_start_over(
        store: RouteStore) -> None:
    await register_round(store, split_round(1, state=5))
    # A newcomer at the same id with an older stateVersion: fenced, as a whole table is.
    newcomer = replace(BASE, addr="10.0.0.9:10911")
    results = [await store.register_broker(r)
               for r in split_round(2, [TopicConfig("X", 1, 1, 6)], state=4, base=newcomer)]
    assert all(r.fenced for r in results)
    assert await store.pickup_route("X") is None
    # Unregistered: the broker's recorded tables go with its registration record, so its next
    # round is a first registration again and writes every chunk.
    assert await store.unregister_broker("c1", ADDR, "g") == 1
    assert await store.all_topics() == []
    assert not await store.redis.exists(store.keys.tables("c1", ADDR))
    seen = record(store)
    calls = await register_round(store, split_round(2, state=5), seen)
    assert ["probe"] not in calls  # no chunk skipped its queue data
    assert await store.all_topics() == sorted(t.topic_name for t in TOPICS)
    assert await orphans(store.redis, store.keys) == []


async def test_a_slave_chunk_is_o1(store: RouteStore) -> None:
    await register_round(store, split_round(1))
    slave = replace(BASE, addr="10.0.0.2:10911", broker_id=1)
    await register_round(store, split_round(1, base=slave))
    seen = record(store)
    calls = await register_round(store, split_round(2, base=slave), seen)
    assert one_call(calls)


async def test_a_chunk_changing_anything_but_its_data_version_takes_the_full_path(
        store: RouteStore) -> None:
    """The few-command path needs every other field as the last registration sent it: a new
    HA address or a new connection is written as usual."""
    await register_round(store, split_round(1))
    moved = replace(BASE, ha_server_addr="10.0.0.1:10912")
    await register_round(store, split_round(2, base=moved))
    live = await store.redis.hget(store.keys.broker("c1", ADDR), "haServerAddr")
    assert live == "10.0.0.1:10912"
    for r in split_round(3, base=moved):
        await store.register_broker(r, connection="w1:1")
    assert await store.redis.smembers(store.keys.conns("c1", ADDR)) == {"w1:1"}
    seen = record(store)
    calls = []
    for r in split_round(4, base=moved):
        start = len(seen)
        await store.register_broker(r, connection="w1:1")
        calls.append(seen[start:])
    assert one_call(calls)
