"""Every topic's queue data, for the console's topic table (``GET /v1/topics/summary``), read in
two steps so that a worker re-reads only what changed: ``index`` (the topic list, the cluster and
group names, the ORDER_TOPIC_CONFIG table), then ``rows`` of the topics the worker has not read
since a change message named them (``topic_summary.lua``, ``TOPICS_PER_CALL`` topics a call:
one HMGET round trip per row would cost ~25 µs of redis-py each, half a second at 20,000 rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsfleet.store import scripts
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.script_calls import ScriptCalls

TOPICS_PER_CALL = 100  # ~200 rows: 1-3 ms of Redis time a call (measured, 2 groups a topic)
QueueRow = tuple[str, int, int, int, int]  # brokerName, read, write, perm, topicSysFlag


@dataclass(frozen=True, slots=True)
class TopicRows:
    """A topic's queue data, sorted by group."""

    topic: str
    queues: tuple[QueueRow, ...]


@dataclass(frozen=True, slots=True)
class SummaryIndex:
    topics: list[str]  # every topic, sorted
    names: frozenset[str]  # the cluster and broker group names
    order_conf: dict[str, str]  # the ORDER_TOPIC_CONFIG table


@translating_redis_errors
class TopicSummaryRows:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls

    async def index(self) -> SummaryIndex:
        k, redis = self._calls.keys, self._calls.redis
        pipe = redis.pipeline(transaction=False)
        pipe.smembers(k.topics)
        pipe.smembers(k.clusters)
        pipe.hgetall(k.kv_table(ORDER_TOPIC_CONFIG))
        topic_set, clusters, order_conf = await pipe.execute()
        topics = sorted(topic_set)
        member_sets: list[set[str]] = []
        if clusters:
            pipe = redis.pipeline(transaction=False)
            for cluster in clusters:
                pipe.smembers(k.cluster(cluster))
            member_sets = await pipe.execute()
        groups: set[str] = set().union(*member_sets)
        return SummaryIndex(topics, frozenset(groups | set(clusters)), order_conf)

    async def rows(self, topics: Sequence[str]) -> list[TopicRows]:
        calls = [scripts.TopicSummaryArgs(topics[i:i + TOPICS_PER_CALL])
                 for i in range(0, len(topics), TOPICS_PER_CALL)]
        out: list[TopicRows] = []
        for _, entries in await self._calls.call_many("topic_summary", calls):
            for topic, flat in entries:
                queues = [(flat[i], int(flat[i + 1]), int(flat[i + 2]), int(flat[i + 3]),
                           int(flat[i + 4])) for i in range(0, len(flat), 5)]
                if len(queues) > 1:
                    queues.sort()
                out.append(TopicRows(topic, tuple(queues)))
        return out
