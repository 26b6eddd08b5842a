"""The cost claims of the script headers, where they can be checked by counting what a script
touches (no timing): a heartbeat or QUERY_DATA_VERSION is O(1) whatever the broker's topic count,
and a sweep with nothing due reads the store's layout and the deadline set's counters and nothing
else. On the queue data's layout 2, a new store's (docs/queue-data-layouts.md).

The exact command lists come from MONITOR on the real redis-server, which reports every command a
Lua script runs; the "no queue key changes" check also runs on fakeredis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore
from nsfleet.store.keys import ROUTE_GROUPS_HASHTABLE
from tests.support.invariants import dump, orphans

TOPICS = 2000
BIG = BrokerRegistration("c1", "10.0.0.1:10911", "big", 0, "10.0.0.1:10912",
                         enable_acting_master=True, data_version=DataVersion(1, 100),
                         topic_configs=[TopicConfig(f"topic-{i}", 8, 8, 6) for i in range(TOPICS)])


def queue_key(s: RouteStore, key: str) -> bool:
    """A key of the queue data (layout 2): a topic's hash or a group's topic lists."""
    return key.startswith((f"{s.keys.prefix}:topic:", f"{s.keys.prefix}:idx:group-topics:"))


@pytest.fixture
async def real_store(real_redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(real_redis, "cost")
    await store.load_scripts()
    await store.register_broker(BIG)
    return store


async def script_commands(store: RouteStore, call: Callable[[], Awaitable[Any]]) -> list[list[str]]:
    """[command, first argument] of every command the scripts run by ``call`` sent (MONITOR)."""
    kw = store.redis.connection_pool.connection_kwargs
    monitor_client = aioredis.Redis(host=kw["host"], port=kw["port"], decode_responses=True)
    marker = "nsfleet-cost-test-marker"
    commands: list[list[str]] = []
    ours = False  # the script running is this store's (the session's Redis is shared)
    async with monitor_client.monitor() as monitor:
        await call()
        await store.redis.echo(marker)
        while True:
            cmd = await monitor.next_command()
            if marker in cmd["command"]:
                break
            if cmd["client_type"] != "lua":
                # A script's commands follow its EVALSHA; its KEYS[1] is the namespace prefix.
                words = cmd["command"].split(" ")
                ours = len(words) > 3 and words[3].startswith(store.keys.prefix)
            elif ours:
                parts = cmd["command"].split(" ")
                commands.append([parts[0].upper(), parts[1] if len(parts) > 1 else ""])
    await monitor_client.aclose()
    return commands


async def test_heartbeat_is_constant_work(real_store: RouteStore) -> None:
    s = real_store
    row = s.keys.broker("c1", BIG.addr)
    cmds = await script_commands(s, lambda: s.heartbeat("c1", BIG.addr))
    assert [c[0] for c in cmds] == ["HMGET", "TIME", "HSET", "PEXPIREAT", "ZADD"]
    assert {c[1] for c in cmds} <= {row, s.keys.deadlines, ""}


async def test_query_data_version_is_constant_work(real_store: RouteStore) -> None:
    s = real_store
    cmds = await script_commands(
        s, lambda: s.query_data_version("c1", BIG.addr, DataVersion(2, 200)))
    assert [c[0] for c in cmds] == ["HMGET", "TIME", "HSET", "PEXPIREAT", "ZADD"]
    # An unknown broker: two reads (its row, and its deadline for a late heartbeat).
    cmds = await script_commands(s, lambda: s.heartbeat("c1", "10.9.9.9:1"))
    assert [c[0] for c in cmds] == ["HMGET", "ZSCORE"]


async def test_sweep_with_nothing_due_reads_only_the_deadline_counters(
        real_store: RouteStore) -> None:
    s = real_store
    cmds = await script_commands(s, lambda: s.sweep())
    assert cmds == [["GET", s.keys.layout], ["TIME", ""], ["ZCARD", s.keys.deadlines],
                    ["ZCOUNT", s.keys.deadlines]]
    cmds = await script_commands(s, lambda: s.sweep(now_ms=1))
    assert cmds == [["GET", s.keys.layout], ["ZCARD", s.keys.deadlines],
                    ["ZCOUNT", s.keys.deadlines]]


async def test_same_registration_again_rewrites_no_queue_row(real_store: RouteStore) -> None:
    # The 30-second re-registration with an unchanged DataVersion: one EXISTS per topic (the
    # per-topic check), no queue write.
    s = real_store
    cmds = await script_commands(s, lambda: s.register_broker(BIG))
    writes = [c for c in cmds if c[0] in ("HSET", "HDEL", "DEL") and queue_key(s, c[1])]
    assert writes == []
    assert sum(1 for c in cmds if c[0] == "EXISTS") <= TOPICS + 2


async def test_heartbeat_changes_no_queue_key(store: RouteStore) -> None:
    await store.register_broker(BIG)

    async def queue_keys() -> dict[str, Any]:
        snapshot = await dump(store.redis, store.keys)
        return {k: v for k, v in snapshot.items() if queue_key(store, k) or (":idx:" in k
                and ":idx:deadlines" not in k)}

    before = await queue_keys()
    assert len([k for k in before if k.startswith(store.keys.topic_routes(""))]) == TOPICS
    for _ in range(3):
        assert await store.heartbeat("c1", BIG.addr)
        await store.query_data_version("c1", BIG.addr, DataVersion(1, 100))
    assert await queue_keys() == before


async def test_an_unchanged_reregistration_is_constant_work(real_store: RouteStore) -> None:
    """A broker's 30 s re-registration with the same DataVersion and table touches no per-topic
    key: a few reads and the live row, whatever its topic count."""
    s = real_store
    cmds = await script_commands(s, lambda: s.register_broker(BIG))
    assert len(cmds) < 40, [c[0] for c in cmds]
    assert not any(queue_key(s, c[1]) for c in cmds)


def split(n: int, topics: Sequence[TopicConfig] = BIG.topic_configs) -> list[BrokerRegistration]:
    """Round ``n`` of a 5.x split registration of BIG: 800 topics a chunk (splitRegistrationSize),
    every chunk under a new DataVersion."""
    return [replace(BIG, topic_configs=topics[i:i + 800],
                    data_version=DataVersion(n * 100 + i, 1000 + n * 100 + i))
            for i in range(0, len(topics), 800)]


def per_topic(s: RouteStore, cmd: list[str]) -> bool:
    return cmd[1].startswith(f"{s.keys.prefix}:topic:")


async def test_an_unchanged_split_chunk_is_constant_work(real_store: RouteStore) -> None:
    """Each chunk of an unchanged split round, under its new DataVersion, touches no per-topic
    key: the same constant work as a whole table re-registered (lua/includes/tables.lua)."""
    s = real_store
    for reg in split(1):
        await s.register_broker(reg)
    whole = await script_commands(s, lambda: s.register_broker(replace(
        BIG, data_version=DataVersion(9, 9))))
    written = {s.keys.broker("c1", BIG.addr), s.keys.reg("c1", BIG.addr), s.keys.deadlines,
               s.keys.seq}
    for reg in split(2):
        cmds = await script_commands(s, lambda reg=reg: s.register_broker(reg))
        assert not any(per_topic(s, c) for c in cmds)
        assert len(cmds) <= len(whole) + 2, [c[0] for c in cmds]
        # Only the live row, its deadline and the registration record move.
        assert {c[1] for c in cmds if c[0] in ("HSET", "PEXPIREAT", "ZADD", "INCR", "SADD",
                                               "DEL", "SREM", "HDEL")} == written
        assert len(cmds) <= 18, [c[0] for c in cmds]


async def test_a_changed_split_chunk_writes_only_its_own_rows(real_store: RouteStore) -> None:
    s = real_store
    for reg in split(1):
        await s.register_broker(reg)
    topics = [structs.replace(t, read_queue_nums=4) if t.topic_name == "topic-900" else t
              for t in BIG.topic_configs]
    first, second, *_ = split(2, topics)
    assert not any(per_topic(s, c) for c in await script_commands(
        s, lambda: s.register_broker(first)))
    cmds = await script_commands(s, lambda: s.register_broker(second))
    touched = {c[1] for c in cmds if per_topic(s, c)}
    assert touched <= {s.keys.topic_routes(t.topic_name) for t in second.topic_configs}
    writes = [c for c in cmds
              if c[0] in ("HSET", "HDEL", "DEL") and queue_key(s, c[1])]
    assert writes == [["HSET", s.keys.topic_routes("topic-900")]]


async def test_a_route_read_costs_the_same_few_commands_whatever_its_groups(
        real_redis: aioredis.Redis) -> None:
    """The topic's queue data is one HGETALL of its hash, what the route shows of each group
    comes from P:idx:route-groups in one HMGET for the whole route, and while no broker is past
    its deadline (the first of P:idx:deadlines) and none has filter servers, no member is looked
    up: a fixed number of commands however many groups and members (bench/route_cost.py times
    it). With a broker past its deadline, the members' deadlines are one ZMSCORE."""
    store = RouteStore(real_redis, "route-cost")
    await store.load_scripts()
    groups = 5
    for g in range(groups):
        for broker_id in (0, 1):
            await store.register_broker(BrokerRegistration(
                "c1", f"10.0.{broker_id}.{g}:10911", f"g{g}", broker_id,
                topic_configs=[TopicConfig("T", 8, 8, 6), TopicConfig("U", 8, 8, 6)]))
    fixed = [["GET", store.keys.layout], ["HGETALL", store.keys.topic_routes("T")],
             ["HMGET", store.keys.route_groups], ["TIME", ""],
             ["ZRANGE", store.keys.deadlines], ["SCARD", store.keys.filtered],
             ["HGETALL", store.keys.mappings("T")]]
    cmds = await script_commands(store, lambda: store.pickup_route("T"))
    assert cmds == fixed
    route = (await store.pickup_route("T")).route  # type: ignore[union-attr]
    assert [(b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        (f"g{g}", {0: f"10.0.0.{g}:10911", 1: f"10.0.1.{g}:10911"}) for g in range(groups)]
    # g3's slave past its deadline, not yet swept (its row expired with it).
    expired = "10.0.1.3:10911"
    await real_redis.zadd(store.keys.deadlines, {f"c1\t{expired}": 1})
    await real_redis.pexpire(store.keys.broker("c1", expired), 1)
    cmds = await script_commands(store, lambda: store.pickup_route("T"))
    assert cmds == [*fixed[:-1], ["ZMSCORE", store.keys.deadlines], fixed[-1]]
    route = (await store.pickup_route("T")).route  # type: ignore[union-attr]
    assert route.broker_datas[3].broker_addrs == {0: "10.0.0.3:10911"}


async def test_route_groups_stay_a_hash_table_and_go_with_the_last_group(
        real_redis: aioredis.Redis) -> None:
    """P:idx:route-groups is a hash table however few its groups (a listpack would cost
    route.lua's HMGET a scan per group), through its ROUTE_GROUPS_HASHTABLE field, which goes
    with the last group; a hash written before the field (an older build's) keeps every other
    group's entry when one of two groups leaves."""
    store = RouteStore(real_redis, "route-groups-encoding")
    await store.load_scripts()
    key = store.keys.route_groups
    regs = [BrokerRegistration("c1", f"10.0.0.{g}:10911", f"g{g}", 0,
                               topic_configs=[TopicConfig("T", 8, 8, 6), TopicConfig("U", 8, 8, 6)])
            for g in range(2)]
    for reg in regs:
        await store.register_broker(reg)
    assert await real_redis.object("encoding", key) == "hashtable"
    assert set(await real_redis.hkeys(key)) == {"g0", "g1", ROUTE_GROUPS_HASHTABLE}
    await store.unregister_broker("c1", regs[0].addr, "g0")
    assert set(await real_redis.hkeys(key)) == {"g1", ROUTE_GROUPS_HASHTABLE}
    await store.unregister_broker("c1", regs[1].addr, "g1")
    assert await real_redis.exists(key) == 0
    regs = [replace(reg, name=f"h{g}") for g, reg in enumerate(regs)]
    for reg in regs:
        await store.register_broker(reg)
    await real_redis.hdel(key, ROUTE_GROUPS_HASHTABLE)  # as an older build wrote it
    await store.unregister_broker("c1", regs[0].addr, "h0")
    assert set(await real_redis.hkeys(key)) == {"h1"}
    assert await orphans(real_redis, store.keys) == []


async def test_a_topic_deletion_call_reads_only_the_rows_it_removes(
        real_redis: aioredis.Redis) -> None:
    """A topic served by many groups is deleted in calls of ``chunk_rows`` rows: each call reads
    those rows and the hash's length, not every group's field (HKEYS of the whole hash made each
    call grow with the groups: bench/script_time.py)."""
    s = RouteStore(real_redis, "cost-delete-topic", chunk_rows=4)
    await s.load_scripts()
    for i in range(10):
        await s.register_broker(BrokerRegistration(
            "c1", f"10.0.1.{i}:1", f"g{i}", 0, data_version=DataVersion(1, 1),
            topic_configs=[TopicConfig("shared"), TopicConfig(f"own{i}")]))
    key = s.keys.topic_routes("shared")
    cmds = await script_commands(s, lambda: s.delete_topic("shared"))
    on_topic = [c[0] for c in cmds if c[1] == key]
    assert "HKEYS" not in on_topic and "HGETALL" not in on_topic
    assert on_topic.count("HRANDFIELD") == 3  # ceil(10 / 4) calls
    assert on_topic.count("HDEL") == 10
    assert await s.pickup_route("shared") is None
    assert await orphans(real_redis, s.keys) == []


async def test_a_chunk_of_delete_absent_rewrites_only_the_lists_naming_its_topics(
        real_redis: aioredis.Redis) -> None:
    """deleteTopicWithBrokerRegistration in chunks: the registration reads the group's lists
    once, and each chunk call reads and rewrites the lists that name its topics only (every
    list in every call made each call grow with the group: bench/script_time.py)."""
    s = RouteStore(real_redis, "cost-delete-absent", chunk_rows=4)
    await s.load_scripts()
    await s.register_broker(BIG_SMALL := replace(BIG, topic_configs=BIG.topic_configs[:40]))
    lists = s.keys.group_topics("big")
    assert await real_redis.hlen(lists) == 11  # 10 lists of 4 topics and the counter
    kept = replace(BIG_SMALL, topic_configs=BIG_SMALL.topic_configs[:4],
                   data_version=DataVersion(2, 200))
    cmds = await script_commands(s, lambda: s.register_broker(kept, delete_absent_topics=True))
    reads = [c[0] for c in cmds if c[1] == lists and c[0] in ("HGETALL", "HMGET")]
    # The first call counts the group's topics once (is the registration too big for one
    # call?), then one list read a chunk of 4 of the 36 topics gone, each in one list.
    assert reads == ["HGETALL"] + ["HMGET"] * 9
    assert await real_redis.hgetall(lists) == {"#": "10", "1": "\n".join(
        t.topic_name for t in kept.topic_configs)}
    assert await orphans(real_redis, s.keys) == []
