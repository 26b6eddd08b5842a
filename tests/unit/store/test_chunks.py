"""Bounded script time: registrations, cascades, deleteTopicWithBrokerRegistration and topic
deletion bigger than ``chunk_rows`` run in several script calls, with exactly the answers of one
call; a worker stopping between calls leaves a state the next registration or the sweep
completes. A chunk size of 3 makes small tables take many chunks. Every test runs on fakeredis
and on a real redis-server."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.store import RouteStore, script_calls, scripts
from tests.support.invariants import orphans

CHUNK = 3
TOPICS = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(20)]
MASTER = BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, data_version=DataVersion(1, 100),
                            topic_configs=TOPICS)
CHANGED = replace(MASTER, data_version=DataVersion(2, 200),
                  topic_configs=[structs.replace(t, read_queue_nums=4) for t in TOPICS])


class Killed(Exception):
    """The worker 'dies' here: no further script call is made."""


@pytest.fixture
async def store(any_redis: aioredis.Redis) -> RouteStore:
    s = RouteStore(any_redis, "chunks", chunk_rows=CHUNK)
    await s.load_scripts()
    return s


def record(store: RouteStore) -> list[str]:
    """Names of the script calls the store makes from now on."""
    seen: list[str] = []
    call = store.calls.call

    async def recording_call(name: str, args: Any = (), keys: Any = ()) -> Any:
        seen.append(name)
        return await call(name, args, keys)

    store.calls.call = recording_call  # type: ignore[method-assign]
    return seen


def die_after(store: RouteStore, chunks: int) -> None:
    """The next chunked operation runs ``chunks`` chunk calls, then the worker dies (a first
    registration's chunks go through ``joint_chunks``, the others through ``call_many``)."""
    many, joint = store.calls.call_many, store.registration.joint_chunks.write

    async def dying(name: str, calls: Any, **kwargs: Any) -> Any:
        await many(name, calls[:chunks], **kwargs)
        raise Killed

    async def dying_joint(calls: Any) -> Any:
        await joint(calls[:chunks])
        raise Killed

    store.calls.call_many = dying  # type: ignore[method-assign]
    store.registration.joint_chunks.write = dying_joint  # type: ignore[method-assign]


async def read_queue_nums(store: RouteStore, topic: str) -> int | None:
    read = await store.pickup_route(topic)
    return None if read is None else read.route.queue_datas[0].read_queue_nums


def test_a_table_is_sent_as_lines_of_tab_separated_decimals_n_rows_a_chunk() -> None:
    """The scripts' text of a table (lua/includes/<layout>/queue_data.lua, TABLE_ROW): a line per
    topic, every number in decimal, rows sharing their numbers written alike."""
    table = [TopicConfig("A", 8, 8, 6), TopicConfig("B", 1, 2, 7, 3), TopicConfig("C", 8, 8, 6),
             TopicConfig("D", -1, 2147483647, 0, -2147483648)]
    assert script_calls.table_chunks(table, 3) == [
        b"A\t8\t8\t6\t0\nB\t1\t2\t7\t3\nC\t8\t8\t6\t0\n", b"D\t-1\t2147483647\t0\t-2147483648\n"]
    assert script_calls.table_chunks([], 3) == []


async def test_a_big_first_registration_runs_in_chunks_with_one_call_answers(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    seen = record(store)
    result = await store.register_broker(MASTER)
    assert result.changed
    # probe, then head, ceil(20 / 3) = 7 chunks, then the commit.
    assert seen == ["register_broker"] * 2 + ["register_topics"] * 7 + ["register_commit"]
    assert await store.all_topics() == sorted(t.topic_name for t in TOPICS)
    assert {await read_queue_nums(store, t.topic_name) for t in TOPICS} == {8}
    assert await orphans(any_redis, store.keys) == []
    # The same table as one call writes it.
    one = RouteStore(any_redis, "one")
    await one.load_scripts()
    await one.register_broker(MASTER)
    for t in TOPICS:
        a, b = await store.pickup_route(t.topic_name), await one.pickup_route(t.topic_name)
        assert a is not None and b is not None and a.route == b.route


async def test_after_a_chunked_registration_the_unchanged_one_is_one_probe(
        store: RouteStore) -> None:
    await store.register_broker(MASTER)
    seen = record(store)
    assert not (await store.register_broker(MASTER)).changed
    assert seen == ["register_broker"]


async def test_a_changed_registration_in_chunks_rewrites_every_topic(store: RouteStore) -> None:
    await store.register_broker(MASTER)
    assert (await store.register_broker(CHANGED)).changed
    assert {await read_queue_nums(store, t.topic_name) for t in TOPICS} == {4}
    # The same DataVersion again with a topic deleted on the name server: Java writes that topic.
    assert await store.delete_topic("T7") == 1
    await store.register_broker(CHANGED)
    assert await read_queue_nums(store, "T7") == 4


async def test_after_a_chunked_registration_a_new_data_version_alone_is_one_probe(
        store: RouteStore) -> None:
    """The commit of a forced write in chunks records the rows as the table's ("synced"), so
    the same table under a new DataVersion writes nothing (Java's rewrite changes no row)."""
    await store.register_broker(MASTER)
    seen = record(store)
    next_dv = replace(MASTER, data_version=DataVersion(2, 101))
    assert not (await store.register_broker(next_dv)).changed
    assert seen == ["register_broker"]


@pytest.mark.parametrize("after", [0, 3])
async def test_a_row_changed_between_chunks_is_rewritten_by_the_next_data_version(
        store: RouteStore, after: int) -> None:
    """Another writer changes a row of the group while a registration's chunks run: the
    commit records no epoch, so the next registration, same table under a new DataVersion,
    rewrites every row instead of trusting the chunks."""
    many = store.calls.call_many

    async def interleaved(name: str, calls: Any, **kwargs: Any) -> Any:
        replies = await many(name, calls[:after], **kwargs)
        # T19 is in the last chunk: written by the chunks after the change, or before it.
        assert await store.register_topic("T0", [QueueData("g", 1, 1, 4)]) == 1
        return replies + await many(name, calls[after:], **kwargs)

    store.calls.call_many = interleaved  # type: ignore[method-assign]
    await store.register_broker(MASTER)
    store.calls.call_many = many  # type: ignore[method-assign]
    seen = record(store)
    await store.register_broker(replace(MASTER, data_version=DataVersion(2, 101)))
    assert "register_topics" in seen
    assert await read_queue_nums(store, "T0") == 8


async def test_chunks_publish_their_topics(store: RouteStore, any_redis: aioredis.Redis) -> None:
    pubsub = any_redis.pubsub()
    await pubsub.subscribe(store.keys.changes)
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    await store.register_broker(MASTER)
    await store.register_broker(replace(CHANGED, topic_configs=CHANGED.topic_configs[:4]
                                        + TOPICS[4:]))
    announced: set[str] = set()
    while (msg := await pubsub.get_message(timeout=0.5)) is not None:
        if msg["type"] == "message" and not msg["data"].startswith("0 "):
            announced |= set(msg["data"].split(" ", 1)[1].split(","))
    await pubsub.aclose()
    assert {t.topic_name for t in TOPICS} <= announced


@pytest.mark.parametrize("done", [0, 2, 5])
async def test_an_interrupted_registration_is_consistent_and_redone_in_full(
        store: RouteStore, any_redis: aioredis.Redis, done: int) -> None:
    """Killed after ``done`` chunks of a changed registration: every topic reads as before or
    after, the broker's DataVersion reads as changed (so a broker that only asks re-registers),
    and the same registration again rewrites every topic although its DataVersion is stored."""
    await store.register_broker(MASTER)
    die_after(store, done)
    with pytest.raises(Killed):
        await store.register_broker(CHANGED)
    nums = [await read_queue_nums(store, t.topic_name) for t in TOPICS]
    assert set(nums) <= {8, 4} and nums.count(4) <= done * CHUNK
    assert await orphans(any_redis, store.keys) == []
    changed, _ = await store.query_data_version("c1", MASTER.addr, CHANGED.data_version)
    assert changed

    redo = RouteStore(any_redis, "chunks", chunk_rows=CHUNK)  # another worker
    seen = record(redo)
    await redo.register_broker(CHANGED)
    assert seen[:2] == ["register_broker", "register_broker"]  # the probe answers "full"
    assert {await read_queue_nums(redo, t.topic_name) for t in TOPICS} == {4}
    changed, _ = await redo.query_data_version("c1", MASTER.addr, CHANGED.data_version)
    assert not changed
    seen.clear()
    await redo.register_broker(CHANGED)
    assert seen == ["register_broker"]  # O(1) again
    assert await orphans(any_redis, store.keys) == []


async def test_an_interrupted_first_registration_is_swept_with_its_broker(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    die_after(store, 2)
    with pytest.raises(Killed):
        await store.register_broker(replace(MASTER, heartbeat_timeout_millis=1000))
    assert len(await store.all_topics()) == 2 * CHUNK
    assert await orphans(any_redis, store.keys) == []
    sweeper = RouteStore(any_redis, "chunks", chunk_rows=CHUNK)
    assert [r[2] for r in (await sweeper.sweep(now_ms=10**15)).removed] == ["g"]
    assert await sweeper.all_topics() == []
    assert await orphans(any_redis, store.keys) == []


async def test_a_chunk_of_a_superseded_registration_writes_nothing(store: RouteStore) -> None:
    """Another registration of the broker (or its removal) between two chunks: later chunks of
    the first one write nothing."""
    await store.register_broker(MASTER)
    many = store.calls.call_many

    async def unregistered_meanwhile(name: str, calls: Any, **kwargs: Any) -> Any:
        first = await many(name, calls[:1], **kwargs)
        other = RouteStore(store.redis, "chunks", chunk_rows=CHUNK)
        await other.unregister_broker("c1", MASTER.addr, "g")
        return first + await many(name, calls[1:], **kwargs)

    store.calls.call_many = unregistered_meanwhile  # type: ignore[method-assign]
    seen = record(store)
    await store.register_broker(CHANGED)
    # After the first stale chunk no other is sent (but the one already in flight).
    assert seen.count("register_topics") <= 3
    assert await store.all_topics() == []
    assert await orphans(store.redis, store.keys) == []


async def test_delete_absent_in_chunks(store: RouteStore, any_redis: aioredis.Redis) -> None:
    await store.register_broker(MASTER)
    assert await store.register_topic("Extra", [QueueData("g", 2, 2, 6)]) == 1
    # Two topics sent (one call would do) but 19 to remove: the registration runs in chunks.
    seen = record(store)
    await store.register_broker(replace(MASTER, topic_configs=TOPICS[:2]),
                                delete_absent_topics=True)
    assert seen.count("register_topics") == 1 + 7  # one chunk written, ceil(19 / 3) removed
    assert await store.all_topics() == ["T0", "T1"]
    assert await orphans(any_redis, store.keys) == []


async def test_a_big_group_unregistered_drains_in_chunks(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    await store.register_broker(MASTER)
    seen = record(store)
    assert await store.unregister_broker("c1", MASTER.addr, "g") == 1
    assert seen == ["unregister_broker"] + ["drain_cleanup"] * 7  # ceil(20 / 3)
    assert await store.all_topics() == []
    assert await any_redis.exists(store.keys.cleanups, store.keys.cleanup_topics("g")) == 0
    assert await orphans(any_redis, store.keys) == []


async def test_an_interrupted_cascade_is_invisible_and_the_sweep_finishes_it(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    """The unregister call ran, the worker died before draining: routes already leave the group
    out, its name cannot register until drained, and the sweep's drain finishes it."""
    await store.register_broker(MASTER)
    await store.calls.call("unregister_broker",
                      scripts.UnregisterBrokerArgs("c1", MASTER.addr, "g", "", CHUNK))
    assert await any_redis.sismember(store.keys.cleanups, "g")
    assert await orphans(any_redis, store.keys) == []  # a consistent state
    # The worker died after one drain.
    await store.calls.call("drain_cleanup", scripts.DrainCleanupArgs("g", CHUNK))
    assert await orphans(any_redis, store.keys) == []
    assert all([await store.pickup_route(t.topic_name) is None for t in TOPICS])
    assert (await store.cluster_info()).broker_addr_table == {}
    assert await store.drain_cleanups() == len(TOPICS) - CHUNK
    assert await store.all_topics() == []
    assert await orphans(any_redis, store.keys) == []


async def test_a_registration_waits_for_its_groups_drain(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    await store.register_broker(MASTER)
    await store.calls.call("unregister_broker",
                      scripts.UnregisterBrokerArgs("c1", MASTER.addr, "g", "", CHUNK))
    small = replace(MASTER, topic_configs=TOPICS[:2])
    await store.register_broker(small)
    assert await store.all_topics() == ["T0", "T1"]
    assert await orphans(any_redis, store.keys) == []


async def test_an_expired_big_group_drains_in_chunks(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    await store.register_broker(MASTER)
    await store.register_broker(replace(MASTER, name="h", addr="10.0.0.2:10911"))
    result = await store.sweep(now_ms=10**15, batch=10)
    assert sorted(r[2] for r in result.removed) == ["g", "h"]
    assert await store.all_topics() == []
    assert await orphans(any_redis, store.keys) == []


async def test_a_slave_leaving_a_big_group_announces_every_route(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    """A group of more than 500 topics is announced as '*' rather than topic by topic."""
    big = [TopicConfig(f"B{i}", 8, 8, 6) for i in range(501)]
    await store.register_broker(replace(MASTER, topic_configs=big))
    slave = replace(MASTER, broker_id=1, addr="10.0.0.2:10911", topic_configs=big)
    await store.register_broker(slave)
    pubsub = any_redis.pubsub()
    await pubsub.subscribe(store.keys.changes)
    await pubsub.get_message(timeout=1)
    assert await store.unregister_broker("c1", slave.addr, "g") == 0
    msg = await pubsub.get_message(timeout=1)
    await pubsub.aclose()
    assert msg is not None and msg["data"].endswith(" *")
    read = await store.pickup_route("B7")
    assert read is not None and read.route.broker_datas[0].broker_addrs == {0: MASTER.addr}


@pytest.mark.parametrize("cluster", [None, "c1"])
async def test_delete_topic_over_many_groups_in_chunks(
        store: RouteStore, any_redis: aioredis.Redis, cluster: str | None) -> None:
    for i in range(10):
        await store.register_broker(BrokerRegistration(
            "c1", f"10.0.1.{i}:1", f"g{i}", 0, data_version=DataVersion(1, 1),
            topic_configs=[TopicConfig("shared"), TopicConfig(f"own{i}")]))
    await store.register_broker(BrokerRegistration(
        "c2", "10.0.2.1:1", "other", 0, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig("shared"), TopicConfig("x")]))
    seen = record(store)
    assert await store.delete_topic("shared", cluster) == (10 if cluster else 11)
    assert seen == ["delete_topic"] * 4  # ceil(10 / 3) or ceil(11 / 3) calls
    read = await store.pickup_route("shared")
    left = [] if read is None else [q.broker_name for q in read.route.queue_datas]
    assert left == ([] if cluster is None else ["other"])
    assert await orphans(any_redis, store.keys) == []


async def test_concurrent_chunked_registrations_of_two_groups(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    other = replace(MASTER, name="h", addr="10.0.0.2:10911")
    await asyncio.gather(store.register_broker(MASTER), store.register_broker(other))
    read = await store.pickup_route("T19")
    assert read is not None and sorted(q.broker_name for q in read.route.queue_datas) == ["g", "h"]
    assert await orphans(any_redis, store.keys) == []


ACTING = replace(MASTER, enable_acting_master=True)
ACTING_SLAVE = replace(ACTING, broker_id=1, addr="10.0.0.2:10911")
# SSCAN's COUNT is a hint: Redis 7.2+ and Valkey keep a set of up to 128 short strings as a
# listpack and return it whole in one page, so a chunked scan needs more members than that
# (Redis 6.2 keeps any set of strings as a hashtable).
MANY = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(130)]
ACTING_MANY = replace(ACTING, topic_configs=MANY)


async def stored_perms(store: RouteStore, topics: list[TopicConfig] = TOPICS) -> set[int]:
    """The perms stored for group g (layout 2: "rq\twq\tperm\tflag" in the topic's hash)."""
    return {int((await store.redis.hget(store.keys.topic_routes(t.topic_name), "g")).split(
        "\t")[2]) for t in topics}


async def test_an_acting_master_group_losing_its_master_loses_write_perm_in_chunks(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    await store.register_broker(ACTING_MANY)
    await store.register_broker(replace(ACTING_SLAVE, topic_configs=MANY))
    seen = record(store)
    assert await store.unregister_broker("c1", ACTING.addr, "g") == 0
    assert seen.count("clear_write_perm") >= 2
    assert await stored_perms(store, MANY) == {4}
    assert await any_redis.exists(store.keys.perm_clears) == 0
    assert await orphans(any_redis, store.keys) == []


async def test_an_interrupted_write_perm_clearing(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    """The worker died before clearing: routes already show no write perm, the sweep's drain
    clears the stored rows; a master back first rewrites them and the record is dropped."""
    await store.register_broker(ACTING)
    await store.register_broker(ACTING_SLAVE)
    await store.calls.call("unregister_broker",
                      scripts.UnregisterBrokerArgs("c1", ACTING.addr, "g", "", CHUNK))
    assert await any_redis.hexists(store.keys.perm_clears, "g")
    read = await store.pickup_route("T0")
    assert read is not None and read.route.queue_datas[0].perm == 4
    assert await orphans(any_redis, store.keys) == []
    assert await store.drain_cleanups() == len(TOPICS)
    assert await stored_perms(store) == {4}

    await store.register_broker(ACTING)
    assert await stored_perms(store) == {6}
    await store.calls.call("unregister_broker",
                      scripts.UnregisterBrokerArgs("c1", ACTING.addr, "g", "", CHUNK))
    await store.register_broker(ACTING)  # the master is back before any drain
    assert await store.drain_cleanups() == 0
    assert await stored_perms(store) == {6}
    assert await any_redis.exists(store.keys.perm_clears) == 0


async def test_wipe_and_add_write_perm_in_chunks(store: RouteStore) -> None:
    await store.register_broker(replace(MASTER, topic_configs=MANY))
    seen = record(store)
    assert await store.wipe_write_perm("g") == len(MANY)
    assert len(seen) > 1
    assert await stored_perms(store, MANY) == {4}
    assert await store.add_write_perm("g") == len(MANY)
    assert await stored_perms(store, MANY) == {6}


async def test_many_groups_touched_in_one_call_are_announced_as_any_route(
        store: RouteStore, any_redis: aioredis.Redis) -> None:
    """A sweep expiring slaves of several groups touches at most 500 topics by name."""
    for g in range(3):
        topics = [TopicConfig(f"G{g}-{i}", 8, 8, 6) for i in range(200)]
        master = BrokerRegistration("c1", f"10.0.{g}.1:1", f"grp{g}", 0,
                                    data_version=DataVersion(1, 1), topic_configs=topics)
        await store.register_broker(master)
        await store.register_broker(replace(master, broker_id=1, addr=f"10.0.{g}.2:1",
                                            heartbeat_timeout_millis=1))
        await store.heartbeat("c1", master.addr)
    pubsub = any_redis.pubsub()
    await pubsub.subscribe(store.keys.changes)
    await pubsub.get_message(timeout=1)
    seconds, _ = await any_redis.time()
    result = await store.sweep(now_ms=seconds * 1000 + 10_000)
    assert sorted(r[2] for r in result.removed) == ["grp0", "grp1", "grp2"]
    msg = await pubsub.get_message(timeout=1)
    await pubsub.aclose()
    assert msg is not None and msg["data"].endswith(" *")
    assert await orphans(any_redis, store.keys) == []


async def test_a_storm_keeps_few_registration_calls_in_redis_and_reads_go_past(
        store: RouteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty brokers registering at once: at most REGISTRATIONS_IN_REDIS of their calls (head,
    probe, commit) and CHUNKS_IN_REDIS chunks are in Redis at a time, the rest wait in the
    worker; a route read meanwhile waits for none of them."""
    calls = store.calls
    in_redis: Counter[str] = Counter()
    most: Counter[str] = Counter()
    once = calls._call_once

    def kind(name: str) -> str:
        return "registration" if name in script_calls.BOUNDED_REGISTRATION_CALLS else name

    async def counted(script: tuple[str, str], keys: list[str], argv: list[Any]) -> Any:
        in_redis[kind(script[0])] += 1
        most[kind(script[0])] = max(most[kind(script[0])], in_redis[kind(script[0])])
        try:
            await asyncio.sleep(0.002)
            return await once(script, keys, argv)
        finally:
            in_redis[kind(script[0])] -= 1

    monkeypatch.setattr(calls, "_call_once", counted)
    await store.register_broker(BrokerRegistration(
        "c1", "10.0.9.1:10911", "reader-group", 0, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig("R", 8, 8, 6), TopicConfig("R2", 8, 8, 6)]))
    storm = [asyncio.create_task(store.register_broker(BrokerRegistration(
        "c1", f"10.0.0.{i}:10911", f"b{i}", 0, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig(f"T{t}", 8, 8, 6) for t in range(30)])))
        for i in range(40)]
    await asyncio.sleep(0.01)
    read = asyncio.create_task(store.pickup_route("R"))
    done, _ = await asyncio.wait({read}, timeout=0.5)
    assert done and not all(t.done() for t in storm)  # read while the storm still queues
    await asyncio.gather(*storm)
    assert most["registration"] == script_calls.REGISTRATIONS_IN_REDIS
    assert 0 < most["register_topics"] <= script_calls.CHUNKS_IN_REDIS
    assert not +in_redis
