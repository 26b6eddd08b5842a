"""Mass departures through the NameServer: many big groups' connections closing at once while
another broker sends UNREGISTER_BROKER. Each answer comes once its group is removed (routes
already leave it out) and the rows drain after it, so nothing waits for the other groups' drains;
every row is gone in the end and nothing is left half written. On fakeredis and on a real
redis-server (the timing figures come from bench/scale.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.service.nameserver import NameServer
from nsfleet.store import RouteStore
from tests.support.invariants import orphans
from tests.support.service import running_nameserver

GROUPS, TOPICS = 6, 120
TABLE = [TopicConfig(f"D{i}", 8, 8, 6) for i in range(TOPICS)]


@pytest.fixture
async def ns(any_redis: aioredis.Redis) -> AsyncIterator[NameServer]:
    store = RouteStore(any_redis, "depart", chunk_rows=25)  # every group drains in chunks
    await store.load_scripts()
    async with running_nameserver(store) as ns:
        yield ns


def broker(i: int) -> BrokerRegistration:
    return BrokerRegistration("c1", f"10.0.2.{i}:10911", f"g{i}", 0,
                              data_version=DataVersion(1, 1), topic_configs=TABLE)


async def test_departing_groups_answer_before_their_rows_drain(ns: NameServer) -> None:
    store = ns._store
    for i in range(GROUPS + 1):
        await ns.register_broker(broker(i), connection=ns.connection_id(i))
    closes = [ns.connection_closed("c1", broker(i).addr, f"g{i}", ns.connection_id(i))
              for i in range(GROUPS)]
    results = await asyncio.gather(*closes, ns.unregister_broker("c1", broker(GROUPS).addr,
                                                                 f"g{GROUPS}"))
    assert results == [True] * GROUPS + [1]
    # Answered: routes already leave every removed group out, drained or not.
    assert await store.pickup_route("D0") is None
    deadline = time.monotonic() + 30
    while await store.redis.exists(store.keys.cleanups):
        assert time.monotonic() < deadline, "the drains did not finish"
        await asyncio.sleep(0.02)
    assert await store.all_topics() == []
    assert await orphans(store.redis, store.keys) == []
