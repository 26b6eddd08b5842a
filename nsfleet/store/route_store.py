"""RouteStore: the NameServer's tables in Redis, changed only through the Lua scripts of ``lua/``.

The NameServer service (``nsfleet.service``) is its only caller. Every input is validated here
(``nsfleet.domain``), before any script runs, so a rejected call writes nothing; redis-py's errors
leave it as the domain's StoreUnavailable / StoreFailed. Its parts, one job each: calling the
scripts (``script_calls``, replies decoded by ``replies``), registration with its chunked
protocol (``registration``), departures, the sweep and the drains they leave
(``departures``), reading routes and lists (``table_reads``); here, what is left: liveness
(heartbeats, QUERY_DATA_VERSION), topics, write perm, KV and the config hash.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nsfleet.domain import validation
from nsfleet.domain.model import DataVersion, QueueData
from nsfleet.runtime.memo import BoundedMemo
from nsfleet.store import scripts
from nsfleet.store.change_feed import ChangeFeed
from nsfleet.store.history import ChangeHistory
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.registration import PROBE_MIN_TOPICS, Registering
from nsfleet.store.replies import Status
from nsfleet.store.script_calls import CHUNK_ROWS, RedisClient, flag
from nsfleet.store.table_reads import TableReads
from nsfleet.store.topic_summary_rows import TopicSummaryRows
from nsfleet.store.unchanged_chunks import UnchangedChunks


@translating_redis_errors
class RouteStore(Registering, TableReads):
    """Async access to one namespace's route tables."""

    def __init__(self, redis: RedisClient, namespace: str = "default", *,
                 on_script: Callable[[str, float], None] | None = None,
                 probe_min_topics: int = PROBE_MIN_TOPICS, chunk_rows: int = CHUNK_ROWS,
                 replica_acks: int = 0, replica_ack_timeout_ms: int = 500) -> None:
        """``on_script(name, seconds)`` is told the duration of every script call (metrics);
        registrations of at least ``probe_min_topics`` topics are first offered as a digest;
        no script call writes or removes more than ``chunk_rows`` queue rows (bigger
        registrations, cascades and topic deletions run in several calls)."""
        super().__init__(redis, namespace, on_script=on_script, chunk_rows=chunk_rows,
                         replica_acks=replica_acks,
                         replica_ack_timeout_ms=replica_ack_timeout_ms)
        self.probe_min_topics = probe_min_topics
        self._tables = BoundedMemo()
        self.unchanged_chunks = UnchangedChunks(self._write_data_versions)
        self.changes = ChangeFeed(redis, self.keys.changes)
        self.history = ChangeHistory(redis, self.keys.history)
        self.topic_summary_rows = TopicSummaryRows(redis, self.keys, self._call_many)

    async def mark_worker_alive(self, worker: str, ttl_ms: int) -> None:
        """This worker is alive for ``ttl_ms`` more: its connections count as open."""
        await self.redis.set(self.keys.worker(worker), "1", px=ttl_ms)

    async def heartbeat(self, cluster: str, addr: str) -> bool:
        """Refresh a live broker's deadline; False when the broker is not live."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, _ = await self._call("heartbeat", scripts.HeartbeatArgs(cluster, addr, "0"))
        return status is Status.OK

    async def query_data_version(self, cluster: str, addr: str,
                                 dv: DataVersion) -> tuple[bool, DataVersion | None]:
        """(changed, stored DataVersion or None); also refreshes the deadline like Java 5.x."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, (changed, counter, ts, state) = await self._call(
            "heartbeat",
            scripts.HeartbeatArgs(cluster, addr, "1", dv.counter, dv.timestamp, dv.state_version))
        stored = DataVersion(int(counter), int(ts), int(state)) if status is Status.OK else None
        return changed == "1", stored

    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        validation.route_topic(topic)
        if cluster:
            validation.name(cluster, "clusterName")
        # A topic served by many groups goes in several calls, each group's queue row whole.
        removed = 0
        while True:
            _, (count, left) = await self._call(
                "delete_topic", scripts.DeleteTopicArgs(topic, cluster or "", self.chunk_rows))
            removed += int(count)
            if not int(left):
                return removed

    async def topic_exists(self, topic: str) -> bool:
        return bool(await self.redis.sismember(self.keys.topics, topic))

    async def unknown_groups(self, names: Sequence[str]) -> list[str]:
        """The broker groups among ``names`` that no registration created (one round trip)."""
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.exists(self.keys.group(name))
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
        _, (written,) = await self._call("register_topic", scripts.RegisterTopicArgs(topic, groups))
        return int(written)

    async def _write_perm(self, name: str, op: str) -> int:
        """A group's write perm, ``chunk_rows`` topics per call; Java's count (the first call's:
        the topics the group had when the operation began)."""
        validation.name(name, "brokerName")
        _, (count, cursor) = await self._call(
            "write_perm", scripts.WritePermArgs(name, op, "0", self.chunk_rows))
        while cursor != "0":
            _, (_, cursor) = await self._call(
                "write_perm", scripts.WritePermArgs(name, op, cursor, self.chunk_rows))
        return int(count)

    async def wipe_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "wipe")

    async def add_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "add")

    async def kv_put(self, namespace: str, key: str, value: str) -> bool:
        """Store a value. True when something changed."""
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        k = self.keys
        _, (changed,) = await self._call(
            "kv_put",
            scripts.KvPutArgs(namespace, key, value, flag(namespace == ORDER_TOPIC_CONFIG)),
            [k.kv(namespace, key), k.kv_table(namespace), k.kv_namespaces])
        return changed == "1"

    async def kv_get(self, namespace: str, key: str) -> str | None:
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        return await self.redis.hget(self.keys.kv_table(namespace), key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        k = self.keys
        _, (removed,) = await self._call(
            "kv_delete", scripts.KvDeleteArgs(key, flag(namespace == ORDER_TOPIC_CONFIG)),
            [k.kv(namespace, key), k.kv_table(namespace)])
        return removed == "1"

    async def kv_namespaces(self) -> list[str]:
        return sorted(await self.redis.smembers(self.keys.kv_namespaces))

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """The namespace's table, or None when the namespace never existed."""
        validation.kv_part(namespace, "namespace")
        # No MULTI: RedisCluster clients before redis-py 6 refuse transactional pipelines. The
        # order makes the two reads safe anyway: a namespace never disappears and kv_put adds
        # it before its key, so "exists" read first and the table read second always describe
        # a state that existed.
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.kv_namespaces, namespace)
        pipe.hgetall(self.keys.kv_table(namespace))
        exists, table = await pipe.execute()
        return dict(table) if exists else None

    async def ping(self) -> None:
        """Raise StoreUnavailable unless Redis answers: a read of a key of the namespace, so on a
        Redis Cluster the master holding its slot answers (PING would ask any one node)."""
        await self.redis.exists(self.keys.rev)

    async def read_config(self) -> dict[str, str]:
        """The fleet-wide NamesrvConfig values changed at run time (P:config)."""
        return dict(await self.redis.hgetall(self.keys.config))

    async def write_config(self, values: dict[str, str]) -> None:
        """Store NamesrvConfig values fleet-wide and tell every worker."""
        await self.redis.hset(self.keys.config, mapping=values)
        await self.changes.publish_config_changed()
