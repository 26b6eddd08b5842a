"""A deterministic test fleet written through RouteStore, and the ground truth read back from Redis.

The fleet: 200 live brokers in 4 clusters and 3 zones (plus brokers without a zone) - groups of
master+slave, master+2 slaves, masters alone and slave-only groups (half with acting master) -
2,000 topics over 1-4 groups each with uneven write queues, ~5% read-only topics, some mixed,
KV entries in three namespaces (one key with ':' to exercise escaping); 12 more brokers in 6 groups
registered with a 1 ms heartbeat timeout, whose rows expire at once while their groups, members and
queue data stay (no sweep runs) - groups with no live member; and 3 queue rows written raw for a
group that does not exist (queue data pointing at a missing group).
"""

from __future__ import annotations

import asyncio
import random
import zlib
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aioredis

from nsfleet.analytics import tables
from nsfleet.analytics.tables import Kind
from nsfleet.domain.controller import ControllerHeartbeat
from nsfleet.domain.model import PERM_READ, PERM_WRITE, BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore
from nsfleet.store.keys import Keys

CLUSTERS = ("c-east", "c-west", "c-north", "c-south")
ZONES = ("zone-a", "zone-b", "zone-c", None)
LONG_TIMEOUTS = (600_000, 900_000, 1_200_000, 1_800_000)  # outlive the whole test session


@dataclass(slots=True)
class Group:
    name: str
    cluster: str
    zone: str | None
    ids: tuple[int, ...]
    acting: bool
    short_lived: bool = False
    topics: list[TopicConfig] = field(default_factory=list)


@dataclass(slots=True)
class FleetSpec:
    namespace: str
    groups: list[Group]
    live_brokers: int
    expired_brokers: int
    orphan_queue_keys: list[str]


def plan_groups(rng: random.Random) -> list[Group]:
    shapes = ([(0, 1)] * 50 + [(0, 1, 2)] * 10 + [(0,)] * 40 + [(1, 2)] * 15)
    groups: list[Group] = []
    for i, ids in enumerate(shapes):
        groups.append(Group(f"broker-{i:03d}", CLUSTERS[i % 4], ZONES[rng.randrange(4)], ids,
                            acting=(ids == (1, 2) and i % 2 == 0)))
    for j in range(6):
        groups.append(Group(f"stale-{j}", CLUSTERS[j % 4], ZONES[j % 3], (0, 1), acting=False,
                            short_lived=True))
    return groups


def plan_topics(rng: random.Random, groups: list[Group], n_topics: int = 2000) -> None:
    for t in range(n_topics):
        name = f"topic-{t:04d}"
        chosen = rng.sample(groups, rng.choice((1, 1, 2, 2, 2, 3, 4)))
        read_only = t % 20 == 7
        mixed = t % 50 == 13
        skewed = t % 10 == 3
        for k, g in enumerate(chosen):
            wq = rng.choice((1, 64)) if skewed else rng.choice((4, 8, 16))
            perm = PERM_READ if read_only or (mixed and k == 0) else PERM_READ | PERM_WRITE
            g.topics.append(TopicConfig(name, wq, wq, perm, 0))


async def populate(url: str, namespace: str = "fleet", seed: int = 6) -> FleetSpec:
    rng = random.Random(seed)
    groups = plan_groups(rng)
    plan_topics(rng, groups)
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        store = RouteStore(client, namespace)
        await store.load_scripts()
        live = expired = 0
        for gi, g in enumerate(groups):
            for broker_id in g.ids:
                host = f"10.{gi // 200}.{gi % 200}.{broker_id + 1}"
                timeout = 1 if g.short_lived else LONG_TIMEOUTS[(gi + broker_id) % 4]
                await store.register_broker(BrokerRegistration(
                    g.cluster, f"{host}:10911", g.name, broker_id, f"{host}:10912",
                    zone_name=g.zone, heartbeat_timeout_millis=timeout,
                    enable_acting_master=g.acting, data_version=DataVersion(1, 1000 + gi, 0),
                    topic_configs=g.topics))
                if g.short_lived:
                    expired += 1
                else:
                    live += 1
        for i in range(30):
            await store.kv_put(("ORDER_TOPIC_CONFIG", "app", "ns:with:colons")[i % 3],
                               f"key-{i}" if i != 29 else "a:key%with:specials", f"value-{i}")
        # Controller broker sets (docs/controller.md): one with a master and an in-sync slave,
        # one never elected.
        ct = store.controller
        for name, elect in (("ctl-a", True), ("ctl-b", False)):
            for broker_id in (1, 2):
                addr = f"10.9.{len(name)}.{broker_id}:10911"
                await ct.apply_broker_id("c0", name, broker_id, f"{addr};1")
                await ct.heartbeat(ControllerHeartbeat("c0", name, addr, broker_id, 0, 0, 0,
                                                       60_000, 0), "w:1")
            if elect:
                await ct.elect(name, 1, designate=False, unclean=False)
                await ct.alter_sync_state_set(name, 1, 1, 1, [1, 2])
        keys = Keys(namespace)
        orphans = []
        topics_layout = await client.get(keys.layout) == "2"
        if topics_layout:
            # Layout 2 reads the queue data of the groups and of removed groups still draining.
            await client.sadd(keys.cleanups, "ghost-broker")
        for i in range(3):
            if topics_layout:
                key = keys.topic_routes(f"ghost-topic-{i}")
                await client.hset(key, "ghost-broker", "8\t8\t6\t0")
            else:
                key = keys.queue(f"ghost-topic-{i}", "ghost-broker")
                await client.hset(key, mapping={
                    "topic": f"ghost-topic-{i}", "brokerName": "ghost-broker",
                    "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0})
            orphans.append(key)
        # Make sure the 1 ms rows are gone before anyone reads (expiry is checked on access).
        await asyncio.sleep(0.01)
        return FleetSpec(namespace, groups, live, expired, orphans)
    finally:
        await client.aclose()


async def populate_other(url: str, namespace: str = "other") -> None:
    """A second namespace in the same database: readers of ``fleet`` must not see it."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        store = RouteStore(client, namespace)
        await store.load_scripts()
        await store.register_broker(BrokerRegistration(
            "c-east", "10.99.0.1:10911", "broker-000", 0, heartbeat_timeout_millis=600_000,
            topic_configs=[TopicConfig("topic-0000"), TopicConfig("other-topic")]))
        await store.kv_put("app", "key-0", "other")
    finally:
        await client.aclose()


def dump(url: str, namespace: str, table: str) -> dict[str, dict[str, str]]:
    """Ground truth: SCAN + HGETALL of a table, keyed by the full Redis key (live rows only)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        out = {}
        for key in client.scan_iter(match=tables.pattern(namespace, table), count=1000):
            row = client.hgetall(key)
            if row:
                out[key] = row
        return out
    finally:
        client.close()


def queue_rows(url: str, namespace: str) -> list[dict[str, str]]:
    """Ground truth of ``queues`` in either layout: every row as layout 1's row hash holds it
    (layout 2: every field of every topic hash)."""
    keys = Keys(namespace)
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        if client.get(keys.layout) != "2":
            return list(dump(url, namespace, "queues").values())
        cut = len(keys.topic_routes(""))
        return [dict(zip(("topic", "brokerName", *tables.QUEUE_VALUE),
                         (key[cut:], name, *value.split("\t")), strict=True))
                for key in client.scan_iter(match=keys.topic_routes("*"), count=1000)
                for name, value in client.hgetall(key).items()]
    finally:
        client.close()


# Independent of the reader's own parser: plain Python conversions of what HGETALL returned.
CONVERT: dict[Kind, Any] = {Kind.STRING: str, Kind.INT: int, Kind.LONG: int,
                            Kind.BOOLEAN: {"true": True, "false": False}.__getitem__}


def typed_rows(url: str, namespace: str, table: str) -> list[tuple[Any, ...]]:
    """Ground truth as the data source's default schema orders and types it, sorted."""
    cut = len(tables.prefix(namespace, table))
    out = []
    for key, row in dump(url, namespace, table).items():
        out.append((*(CONVERT[c.kind](row[c.name]) for c in tables.columns(table)), key[cut:]))
    return sorted(out, key=repr)


class VanishingRedis(redis.Redis):
    """Deletes some of the keys each SCAN page returns before the caller can HMGET them: the
    window in which a broker row's TTL can fire, made deterministic."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.vanished: set[str] = set()

    def scan(self, cursor: int = 0, match: Any = None, count: int | None = None,
             _type: str | None = None, **kwargs: Any) -> Any:
        cursor, keys = super().scan(cursor, match=match, count=count, _type=_type, **kwargs)
        # Every third key or so, chosen by a stable hash so runs are repeatable.
        doomed = [k for k in keys if zlib.crc32(k.encode()) % 3 == 0]
        if doomed:
            self.delete(*doomed)
            self.vanished.update(doomed)
        return cursor, keys


# --- the same fleet written key by key, in either queue-data layout -----------------------------

ORPHAN_GROUP = "ghost-broker"
"""A removed group whose queue rows are still draining (in ``P:idx:cleanups``): queue data
without a group row, read in both layouts."""

ODD_GROUP = "odd.name `x"
"""A legal brokerName (anything but ':') that only a quoted Spark identifier names."""


def queue_value(g: Group, tc: TopicConfig) -> tuple[int, int, int, int]:
    """The row of ``tc`` on group ``g``: readQueueNums, writeQueueNums, perm, topicSysFlag (the
    read queues and the flag differ from the plan's so that every position of a layout-2 value is
    checked)."""
    return (tc.read_queue_nums + len(g.name) % 3, tc.write_queue_nums, tc.perm,
            int(tc.topic_name.endswith("5")))


def raw_queue_rows(spec: FleetSpec) -> list[tuple[Any, ...]]:
    """What the ``queues`` table holds for ``write_raw``'s fleet, as the data source types it."""
    rows = [(tc.topic_name, g.name, *queue_value(g, tc), f"{tc.topic_name}:{g.name}")
            for g in spec.groups for tc in g.topics]
    return sorted(rows, key=repr)


def write_raw(url: str, namespace: str, layout: str, now_ms: int, seed: int = 6) -> FleetSpec:
    """populate()'s groups and topics (plus ``ODD_GROUP`` and the draining ``ORPHAN_GROUP``),
    written key by key with no RouteStore: group rows, a live broker row per member (heartbeat
    ``now_ms`` less a few seconds; none for the short-lived groups), KV rows, and the queue data
    as layout ``layout`` stores it: "1" row hashes (no ``P:layout``), "moving" the same rows
    under ``P:layout`` "moving", "2" topic hashes under ``P:layout`` "2"."""
    rng = random.Random(seed)
    groups = plan_groups(rng)
    plan_topics(rng, groups)
    groups.append(Group(ODD_GROUP, "c-east", None, (0,), acting=False, topics=[
        TopicConfig("topic-0001", 8, 8, PERM_READ | PERM_WRITE), TopicConfig("odd-topic", 2, 2)]))
    orphan = Group(ORPHAN_GROUP, "", None, (), acting=False, topics=[
        TopicConfig(f"ghost-topic-{i}", 8, 8, 6) for i in range(3)])
    keys = Keys(namespace)
    client = redis.Redis.from_url(url, decode_responses=True)
    live = 0
    try:
        pipe = client.pipeline(transaction=False)
        for gi, g in enumerate(groups):
            pipe.hset(keys.group(g.name), mapping={
                "cluster": g.cluster, "brokerName": g.name,
                "enableActingMaster": "true" if g.acting else "false", "zoneName": g.zone or ""})
            for broker_id in () if g.short_lived else g.ids:
                addr = f"10.{gi // 200}.{gi % 200}.{broker_id + 1}:10911"
                timeout = LONG_TIMEOUTS[(gi + broker_id) % 4]
                key = keys.broker(g.cluster, addr)
                pipe.hset(key, mapping={
                    "cluster": g.cluster, "brokerAddr": addr, "brokerName": g.name,
                    "brokerId": broker_id, "haServerAddr": "", "heartbeatTimeoutMillis": timeout,
                    "lastUpdateTimestamp": now_ms - 1000 * (gi % 20),
                    "dataVersionCounter": 1, "dataVersionTimestamp": 1000 + gi,
                    "stateVersion": 0, "zoneName": g.zone or ""})
                pipe.pexpire(key, timeout)
                live += 1
        for i in range(30):
            ns, key = (("ORDER_TOPIC_CONFIG", "app", "ns:with:colons")[i % 3],
                       f"key-{i}" if i != 29 else "a:key%with:specials")
            pipe.hset(keys.kv(ns, key), mapping={"namespace": ns, "key": key,
                                                 "value": f"value-{i}"})
        pipe.sadd(keys.cleanups, ORPHAN_GROUP)
        for g in [*groups, orphan]:
            for tc in g.topics:
                value = queue_value(g, tc)
                if layout == "2":
                    pipe.hset(keys.topic_routes(tc.topic_name), g.name,
                              "\t".join(map(str, value)))
                else:
                    pipe.hset(keys.queue(tc.topic_name, g.name), mapping=dict(zip(
                        ("topic", "brokerName", *tables.QUEUE_VALUE),
                        (tc.topic_name, g.name, *value), strict=True)))
        if layout != "1":
            pipe.set(keys.layout, layout)
        pipe.execute()
    finally:
        client.close()
    short = sum(len(g.ids) for g in groups if g.short_lived)
    orphan_keys = [keys.topic_routes(tc.topic_name) if layout == "2"
                   else keys.queue(tc.topic_name, ORPHAN_GROUP) for tc in orphan.topics]
    return FleetSpec(namespace, [*groups, orphan], live, short, orphan_keys)
