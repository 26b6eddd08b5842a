"""Concurrency on the real redis-server: 50 brokers registering, heartbeating and unregistering
from 8 asyncio tasks, each on its own Redis client (its own connections), while a reader task reads
routes, cluster info and runs the sweep. Each broker is driven by one task, so the final state
follows from each broker's last operation; what the tasks share are the indexes (the topic and
cluster sets, shared topics, the deadline set and the counters).

At the end the schema invariants hold and the state is exactly the one the last operation per
broker implies.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from tests.support.invariants import orphans

BROKERS = 50
TASKS = 8
OPS_PER_TASK = 300
NAMESPACE = "concurrency"


@dataclass
class Broker:
    i: int
    alive: bool = False
    connection: str = ""  # the connection of its latest registration
    stale_connection: str = ""  # the one before: the broker has reconnected since
    registrations: int = 0

    @property
    def cluster(self) -> str:
        return f"c{self.i % 3}"

    @property
    def name(self) -> str:
        return f"g{self.i}"

    @property
    def addr(self) -> str:
        return f"10.1.0.{self.i + 1}:10911"

    @property
    def topics(self) -> list[str]:
        # Its own topic, a topic shared with its neighbour (driven by another task), and one
        # topic every broker serves.
        return [f"own-{self.i}", f"pair-{self.i // 2}", "shared"]

    def registration(self, rng: random.Random) -> BrokerRegistration:
        return BrokerRegistration(
            self.cluster, self.addr, self.name, 0, enable_acting_master=self.i % 2 == 0,
            data_version=DataVersion(rng.randint(1, 3), 100),
            topic_configs=[TopicConfig(t, 8, 8, 6) for t in self.topics])


async def drive(url: str, brokers: list[Broker], seed: int) -> int:
    rng = random.Random(seed)
    client = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(client, NAMESPACE)
    ops = 0
    try:
        for _ in range(OPS_PER_TASK):
            b = rng.choice(brokers)
            op = rng.choice(["register", "register", "heartbeat", "query", "unregister",
                             "channel_close", "stale_close"])
            if op == "register":
                b.registrations += 1
                conn = f"w{b.i}:{b.registrations}"  # no worker presence: earlier ones are dead
                result = await store.register_broker(b.registration(rng), connection=conn)
                assert not result.fenced
                b.stale_connection, b.connection, b.alive = b.connection, conn, True
            elif op == "heartbeat":
                assert await store.heartbeat(b.cluster, b.addr) == b.alive
            elif op == "query":
                _, stored = await store.query_data_version(b.cluster, b.addr, DataVersion())
                assert (stored is not None) == b.alive
            elif op == "unregister":
                assert await store.unregister_broker(b.cluster, b.addr, b.name) == int(b.alive)
                b.alive = False
            elif op == "channel_close" and b.connection:  # a connection it registered over
                got = await store.unregister_broker(b.cluster, b.addr, b.name,
                                                    closed_connection=b.connection)
                assert got == (1 if b.alive else -1)
                b.alive = False
            else:  # a connection of an earlier registration closes late: no effect
                if b.stale_connection:
                    assert await store.unregister_broker(
                        b.cluster, b.addr, b.name, closed_connection=b.stale_connection) == -1
            ops += 1
    finally:
        await client.aclose()
    return ops


async def read_and_sweep(url: str, stop: asyncio.Event) -> int:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(client, NAMESPACE)
    reads = 0
    try:
        while not stop.is_set():
            read = await store.pickup_route("shared")
            if read is not None:
                names = [b.broker_name for b in read.route.broker_datas]
                assert names == [q.broker_name for q in read.route.queue_datas]
                assert all(b.broker_addrs for b in read.route.broker_datas)
            info = await store.cluster_info()
            for cluster, names in info.cluster_addr_table.items():
                assert names, cluster
            result = await store.sweep()  # nothing is due: every broker has 120 s
            assert result.removed == []
            reads += 1
            await asyncio.sleep(0)
    finally:
        await client.aclose()
    return reads


async def test_concurrent_brokers_leave_a_consistent_state(redis_server: RedisServer) -> None:
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    await admin.flushall()
    brokers = [Broker(i) for i in range(BROKERS)]
    stop = asyncio.Event()
    reader = asyncio.create_task(read_and_sweep(redis_server.url, stop))
    done = await asyncio.wait_for(asyncio.gather(*[
        drive(redis_server.url, brokers[k::TASKS], seed=k) for k in range(TASKS)]), timeout=30)
    stop.set()
    assert await asyncio.wait_for(reader, timeout=10) > 0
    assert sum(done) == TASKS * OPS_PER_TASK

    store = RouteStore(admin, NAMESPACE)
    assert await orphans(admin, store.keys) == []
    alive = [b for b in brokers if b.alive]
    assert 0 < len(alive) < BROKERS  # the seeds give a mix; both kinds get checked

    info = await store.cluster_info()
    assert sorted(info.broker_addr_table) == sorted(b.name for b in alive)
    assert info.cluster_addr_table == {
        c: sorted(b.name for b in alive if b.cluster == c)
        for c in sorted({b.cluster for b in alive})}
    for b in alive:
        assert info.broker_addr_table[b.name].broker_addrs == {0: b.addr}
    expected_topics = sorted({t for b in alive for t in b.topics})
    assert await store.all_topics() == expected_topics
    for b in brokers:
        read = await store.pickup_route(f"own-{b.i}")
        assert (read is not None) == b.alive
    shared = await store.pickup_route("shared")
    assert shared is not None
    assert [d.broker_name for d in shared.route.broker_datas] == sorted(b.name for b in alive)
    for cluster in ("c0", "c1", "c2"):
        assert await store.topic_list("cluster", cluster) == sorted(
            {t for b in alive if b.cluster == cluster for t in b.topics})
    assert sorted(lb.broker_name for lb in await store.live_brokers()) == sorted(
        b.name for b in alive)
    # Every registration drew a distinct generation from the one counter.
    assert int(await admin.get(store.keys.seq) or 0) >= len(alive)
    await admin.aclose()
