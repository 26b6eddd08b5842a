"""A registration storm (every broker of a fleet registering at once, as after Redis came back
empty) through two stores, as two workers, while a third reads routes: every read answers, each
route it sees is whole (every queue row it lists belongs to a listed broker, with the values
registered), and afterwards every route lists every broker and nothing is left half written. A
small shape of bench/scale.py, on a real redis-server; the figures come from the bench."""

from __future__ import annotations

import asyncio
import random

import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore
from tests.support.invariants import orphans

BROKERS, TOPICS = 8, 600
TABLE = [TopicConfig(f"S{i}", 8, 8, 6) for i in range(TOPICS)]


def broker(i: int) -> BrokerRegistration:
    return BrokerRegistration("storm", f"10.0.1.{i}:10911", f"b{i}", 0,
                              data_version=DataVersion(1, 1), topic_configs=TABLE)


async def test_a_registration_storm_with_concurrent_readers(real_redis: aioredis.Redis) -> None:
    workers = [RouteStore(real_redis, "storm", chunk_rows=50) for _ in range(2)]
    reader = RouteStore(real_redis, "storm")
    for s in (*workers, reader):
        await s.load_scripts()
    done = asyncio.Event()
    reads = 0

    async def read_routes() -> None:
        nonlocal reads
        rng = random.Random(7)
        while not done.is_set():
            read = await reader.pickup_route(f"S{rng.randrange(TOPICS)}")
            reads += 1
            if read is not None:
                names = {b.broker_name for b in read.route.broker_datas}
                for q in read.route.queue_datas:
                    assert q.broker_name in names
                    assert (q.read_queue_nums, q.write_queue_nums, q.perm) == (8, 8, 6)
            await asyncio.sleep(0)

    readers = [asyncio.create_task(read_routes()) for _ in range(3)]
    await asyncio.gather(*(workers[i % 2].register_broker(broker(i), connection=f"w{i % 2}:{i}")
                           for i in range(BROKERS)))
    done.set()
    await asyncio.gather(*readers)
    assert reads > 0
    for t in TABLE[::97]:
        read = await reader.pickup_route(t.topic_name)
        assert read is not None
        assert sorted(q.broker_name for q in read.route.queue_datas) == sorted(
            f"b{i}" for i in range(BROKERS))
    assert len(await reader.all_topics()) == TOPICS
    assert await orphans(real_redis, reader.keys) == []
