"""Topics as the admin tools change them: REGISTER_TOPIC_IN_NAMESRV (register_topic.lua), a
topic's deletion (delete_topic.lua) and a group's write perm (write_perm.lua), each bounded to
``chunk_rows`` queue rows a call; and the two lookups their callers check first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nsfleet.domain import validation
from nsfleet.domain.model import QueueData
from nsfleet.store import scripts
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.script_calls import ScriptCalls


@translating_redis_errors
class TopicAdmin:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls
        self._keys = calls.keys

    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        validation.route_topic(topic)
        if cluster:
            validation.name(cluster, "clusterName")
        # A topic served by many groups goes in several calls, each group's queue row whole.
        removed = 0
        while True:
            _, (count, left) = await self._calls.call(
                "delete_topic",
                scripts.DeleteTopicArgs(topic, cluster or "", self._calls.chunk_rows))
            removed += int(count)
            if not int(left):
                return removed

    async def topic_exists(self, topic: str) -> bool:
        return bool(await self._calls.redis.sismember(self._keys.topics, topic))

    async def unknown_groups(self, names: Sequence[str]) -> list[str]:
        """The broker groups among ``names`` that no registration created (one round trip)."""
        pipe = self._calls.redis.pipeline(transaction=False)
        for name in names:
            pipe.exists(self._keys.group(name))
        return [n for n, found in zip(names, await pipe.execute(), strict=True) if not found]

    async def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> int:
        """REGISTER_TOPIC_IN_NAMESRV: only known broker groups; returns rows written."""
        validation.route_topic(topic)
        groups: list[Any] = []
        for i, q in enumerate(queue_datas):
            f = f"queueDatas[{i}]"
            validation.name(q.broker_name, f"{f}.brokerName")
            groups.append(q.broker_name)
            for value, what in ((q.read_queue_nums, "readQueueNums"),
                                (q.write_queue_nums, "writeQueueNums"), (q.perm, "perm"),
                                (q.topic_sys_flag, "topicSysFlag")):
                groups.append(validation.integer(value, f"{f}.{what}", validation.JAVA_INT_MIN,
                                               validation.JAVA_INT_MAX))
        _, (written,) = await self._calls.call(
            "register_topic", scripts.RegisterTopicArgs(topic, groups))
        return int(written)

    async def _write_perm(self, name: str, op: str) -> int:
        """A group's write perm, ``chunk_rows`` topics per call; Java's count (the first call's:
        the topics the group had when the operation began)."""
        validation.name(name, "brokerName")
        rows = self._calls.chunk_rows
        _, (count, cursor) = await self._calls.call(
            "write_perm", scripts.WritePermArgs(name, op, "0", rows))
        while cursor != "0":
            _, (_, cursor) = await self._calls.call(
                "write_perm", scripts.WritePermArgs(name, op, cursor, rows))
        return int(count)

    async def wipe_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "wipe")

    async def add_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "add")
