"""Every topic's queue data in one read, for the console's topic table (``GET
/v1/topics/summary``): the topic list, which broker groups serve each (the groups'
``P:idx:broker-topics`` sets), each row's queue counts and perm, and the ORDER_TOPIC_CONFIG
table. Plain reads in pipelines of ``PIPELINE_COMMANDS`` (no script: a fleet of 10,000 topics
is tens of thousands of rows, far more than one script call may hold Redis for); the parts may
come from slightly different moments, which a console refreshing on every change tolerates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from nsfleet.store.keys import ORDER_TOPIC_CONFIG, Keys
from nsfleet.store.redis_errors import translating_redis_errors

PIPELINE_COMMANDS = 500  # per round trip: Redis serves no other client while it runs them
QUEUE_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")


@dataclass(slots=True)
class TopicRows:
    """One topic's queue data: (brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag)
    per group serving it, sorted by group."""

    topic: str
    queues: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    order_conf: str | None = None


@translating_redis_errors
class TopicOverview:
    def __init__(self, redis: Redis | RedisCluster, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def _pipelined(self, commands: Sequence[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        out: list[Any] = []
        for i in range(0, len(commands), PIPELINE_COMMANDS):
            pipe = self.redis.pipeline(transaction=False)
            for name, args in commands[i:i + PIPELINE_COMMANDS]:
                getattr(pipe, name)(*args)
            out.extend(await pipe.execute())
        return out

    async def read(self) -> list[TopicRows]:
        """Every topic with its queue data, sorted by topic."""
        k = self.keys
        first = self.redis.pipeline(transaction=False)
        first.smembers(k.topics)
        first.smembers(k.clusters)
        first.hgetall(k.kv_table(ORDER_TOPIC_CONFIG))
        topics, clusters, order_conf = await first.execute()
        cluster_groups = await self._pipelined([("smembers", (k.cluster(c),)) for c in clusters])
        groups = sorted(set().union(*cluster_groups)) if cluster_groups else []
        group_topics = await self._pipelined([("smembers", (k.broker_topics(g),))
                                              for g in groups])
        by_topic = {t: TopicRows(t, order_conf=order_conf.get(t)) for t in topics}
        pairs = [(t, g) for g, served in zip(groups, group_topics, strict=True)
                 for t in served if t in by_topic]
        rows = await self._pipelined([("hmget", (k.queue(t, g), QUEUE_FIELDS))
                                      for t, g in pairs])
        for (topic, group), row in zip(pairs, rows, strict=True):
            if row[0] is not None:  # removed between the reads
                by_topic[topic].queues.append((group, int(row[0]), int(row[1]), int(row[2]),
                                               int(row[3] or 0)))
        return [by_topic[t] for t in sorted(by_topic)]
