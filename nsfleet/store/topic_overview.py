"""Every topic's queue data, for the console's topic table (``GET /v1/topics/summary``), read in
two steps so that a worker re-reads only what changed: ``index`` (the topic list with each
topic's change counter ``P:rev:topic:<topic>``, the cluster and group names, the
ORDER_TOPIC_CONFIG table), then ``rows`` of the topics whose counter moved
(``topic_overview.lua``, ``TOPICS_PER_CALL`` topics a call: one HMGET round trip per row would
cost ~25 µs of redis-py each, half a second at 20,000 rows). Each topic's rows come with the
counter they were read at, in the same script call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from nsfleet.store.keys import ORDER_TOPIC_CONFIG, Keys
from nsfleet.store.redis_errors import translating_redis_errors

TOPICS_PER_CALL = 100  # ~200 rows: 1-3 ms of Redis time a call (measured, 2 groups a topic)
MGET_KEYS = 1000  # topic counters per MGET
CallMany = Callable[[str, Sequence[Sequence[Any]]], Awaitable[list[tuple[str, list[Any]]]]]
QueueRow = tuple[str, int, int, int, int]  # brokerName, read, write, perm, topicSysFlag


@dataclass(frozen=True, slots=True)
class TopicRows:
    """A topic's queue data as of its change counter ``rev``, sorted by group."""

    topic: str
    rev: int
    queues: tuple[QueueRow, ...]


@dataclass(frozen=True, slots=True)
class OverviewIndex:
    revs: dict[str, int]  # every topic -> its change counter (0: never set)
    names: frozenset[str]  # the cluster and broker group names
    order_conf: dict[str, str]  # the ORDER_TOPIC_CONFIG table


async def _nothing() -> list[Any]:
    return []


@translating_redis_errors
class TopicOverview:
    def __init__(self, redis: Redis | RedisCluster, keys: Keys, call_many: CallMany) -> None:
        """``call_many(script, argument lists)``: RouteStore's bounded script calls."""
        self.redis = redis
        self.keys = keys
        self._call_many = call_many

    async def index(self) -> OverviewIndex:
        k = self.keys
        pipe = self.redis.pipeline(transaction=False)
        pipe.smembers(k.topics)
        pipe.smembers(k.clusters)
        pipe.hgetall(k.kv_table(ORDER_TOPIC_CONFIG))
        topic_set, clusters, order_conf = await pipe.execute()
        topics = sorted(topic_set)
        pipe = self.redis.pipeline(transaction=False)
        for cluster in clusters:
            pipe.smembers(k.cluster(cluster))
        # MGETs apart: a RedisCluster pipeline refuses multi-key commands.
        member_sets, *chunks = await asyncio.gather(
            pipe.execute() if clusters else _nothing(),
            *(self.redis.mget([k.topic_rev(t) for t in topics[i:i + MGET_KEYS]])
              for i in range(0, len(topics), MGET_KEYS)))
        groups: set[str] = set().union(*member_sets)
        revs = [int(r or 0) for chunk in chunks for r in chunk]
        return OverviewIndex(dict(zip(topics, revs, strict=True)),
                             frozenset(groups | set(clusters)), order_conf)

    async def rows(self, topics: Sequence[str]) -> list[TopicRows]:
        calls = [topics[i:i + TOPICS_PER_CALL] for i in range(0, len(topics), TOPICS_PER_CALL)]
        out: list[TopicRows] = []
        for _, entries in await self._call_many("topic_overview", calls):
            for topic, rev, flat in entries:
                queues = [(flat[i], int(flat[i + 1]), int(flat[i + 2]), int(flat[i + 3]),
                           int(flat[i + 4])) for i in range(0, len(flat), 5)]
                if len(queues) > 1:
                    queues.sort()
                out.append(TopicRows(topic, int(rev), tuple(queues)))
        return out
