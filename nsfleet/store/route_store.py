"""RouteStore: the NameServer's tables in Redis, changed only through the Lua scripts of ``lua/``.

The NameServer service (``nsfleet.service``) is its only caller. A thin facade, as the service's
``NameServer`` is: every operation is a method here, answered by one of the parts that do the
work, each an object in its own module that holds the ``ScriptCalls`` they share (the scripts,
the Redis client, ``chunk_rows``, ``script_calls``): ``registration`` (REGISTER_BROKER and its
chunked protocol), ``departures`` (unregistering, the sweep, the drains they leave),
``reads`` (routes, cluster info, topic lists), ``liveness`` (heartbeats, QUERY_DATA_VERSION,
worker presence), ``topics`` (topic admin and write perm), ``kv`` (KV config, NamesrvConfig)
and ``controller`` (RocketMQ 5's controller: broker sets, replicas, elections).
Every input is validated by the part, before any script runs, so a rejected call writes nothing;
redis-py's errors leave each part as the domain's StoreUnavailable / StoreFailed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nsfleet.domain import model
from nsfleet.store import scripts
from nsfleet.store.change_feed import ChangeFeed
from nsfleet.store.controller_tables import ControllerTables
from nsfleet.store.departures import Departures, SweepResult
from nsfleet.store.history import ChangeHistory
from nsfleet.store.keys import Keys
from nsfleet.store.kv_tables import KvTables
from nsfleet.store.layout_move import MoveResult, maybe_move, old_workers_alive
from nsfleet.store.liveness import Liveness
from nsfleet.store.registration import PROBE_MIN_TOPICS, BrokerRegistrar
from nsfleet.store.script_calls import CHUNK_ROWS, RedisClient, ScriptCalls
from nsfleet.store.table_reads import RouteRead, TableReads, TopicListMode, ViewMarker
from nsfleet.store.topic_admin import TopicAdmin
from nsfleet.store.topic_summary_rows import TopicSummaryRows
from nsfleet.store.unchanged_chunks import UnchangedChunks


class RouteStore:
    """Async access to one namespace's route tables."""

    def __init__(self, redis: RedisClient, namespace: str = "default", *,
                 on_script: Callable[[str, float], None] | None = None,
                 probe_min_topics: int = PROBE_MIN_TOPICS, chunk_rows: int = CHUNK_ROWS,
                 replica_acks: int = 0, replica_ack_timeout_ms: int = 500) -> None:
        """``on_script(name, seconds)`` is told the duration of every script call (metrics);
        registrations of at least ``probe_min_topics`` topics are first offered as a digest;
        no script call writes or removes more than ``chunk_rows`` queue rows (bigger
        registrations, cascades and topic deletions run in several calls)."""
        self.calls = ScriptCalls(redis, namespace, on_script=on_script, chunk_rows=chunk_rows,
                                 replica_acks=replica_acks,
                                 replica_ack_timeout_ms=replica_ack_timeout_ms)
        self.changes = ChangeFeed(redis, self.keys.changes)
        self.history = ChangeHistory(redis, self.keys.history)
        self.departures = Departures(self.calls)
        self.registration = BrokerRegistrar(self.calls, self.departures,
                                            probe_min_topics=probe_min_topics)
        self.reads = TableReads(self.calls)
        self.liveness = Liveness(self.calls)
        self.topics = TopicAdmin(self.calls)
        self.kv = KvTables(self.calls, self.changes)
        self.topic_summary_rows = TopicSummaryRows(self.calls)
        self.controller = ControllerTables(self.calls)

    @property
    def redis(self) -> RedisClient:
        return self.calls.redis

    @property
    def keys(self) -> Keys:
        return self.calls.keys

    @property
    def namespace(self) -> str:
        return self.calls.namespace

    @property
    def chunk_rows(self) -> int:
        return self.calls.chunk_rows

    @property
    def unchanged_chunks(self) -> UnchangedChunks:
        return self.registration.unchanged_chunks

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script, so the first real call is a plain EVALSHA, and learn the
        queue data's layout (a store without one, empty, stays in layout 1 while a worker of an
        older build is alive: docs/table-shape.md)."""
        old = not await self.redis.exists(self.keys.layout) and bool(await self.old_workers())
        await self.calls.load(old_workers=old)

    # --- the queue data's layout (docs/table-shape.md) ------------------------------------------

    @property
    def layout(self) -> int:
        """The queue data's layout as this worker last saw it: 1 (also while moving) or 2."""
        return 2 if self.calls.layout == scripts.LAYOUT_TOPICS else 1

    async def move_layout(self, worker_id: str, *, hold: bool = False) -> MoveResult | None:
        """Move the store to layout 2 if it may move now, unless ``hold``; finish a move or its
        cleaning another worker left (store/layout_move.py). After a move the scripts go to
        layout 2 at once (else at their next "layout" answer)."""
        moved = await maybe_move(self.redis, self.keys, worker_id, hold=hold)
        if moved is not None:
            self.calls.layout = scripts.LAYOUT_TOPICS
        return moved

    async def old_workers(self) -> list[str]:
        """Live workers of a build that knows layout 1 only."""
        return await old_workers_alive(self.redis, self.keys)

    # --- brokers arriving and leaving (registration, departures, liveness) ------------------

    async def register_broker(self, reg: model.BrokerRegistration, *,
                              delete_absent_topics: bool = False, return_order_conf: bool = True,
                              connection: str | None = None) -> model.RegisterResult:
        return await self.registration.register_broker(
            reg, delete_absent_topics=delete_absent_topics,
            return_order_conf=return_order_conf, connection=connection)

    async def write_pending_data_version(self, cluster: str, addr: str) -> None:
        await self.registration.write_pending_data_version(cluster, addr)

    async def unregister_broker(self, cluster: str, addr: str, name: str, *,
                                closed_connection: str | None = None, drain: bool = True) -> int:
        return await self.departures.unregister_broker(
            cluster, addr, name, closed_connection=closed_connection, drain=drain)

    async def drain_cleanups(self, only: str | None = None) -> int:
        return await self.departures.drain_cleanups(only)

    async def sweep(self, *, now_ms: int | None = None, batch: int = 100,
                    guard_share: float = 0.0, guard_max_hold_ms: int = 120_000) -> SweepResult:
        return await self.departures.sweep(now_ms=now_ms, batch=batch, guard_share=guard_share,
                                           guard_max_hold_ms=guard_max_hold_ms)

    async def heartbeat(self, cluster: str, addr: str) -> bool:
        return await self.liveness.heartbeat(cluster, addr)

    async def query_data_version(self, cluster: str, addr: str,
                                 dv: model.DataVersion) -> tuple[bool, model.DataVersion | None]:
        return await self.liveness.query_data_version(cluster, addr, dv)

    async def mark_worker_alive(self, worker: str, ttl_ms: int) -> None:
        await self.liveness.mark_worker_alive(worker, ttl_ms)

    async def ping(self) -> None:
        await self.liveness.ping()

    # --- reading the tables (reads) -----------------------------------------------------------

    async def pickup_route(self, topic: str, *, order_conf: bool = False) -> RouteRead | None:
        return await self.reads.pickup_route(topic, order_conf=order_conf)

    async def rev(self) -> int:
        return await self.reads.rev()

    async def view_marker(self) -> ViewMarker:
        return await self.reads.view_marker()

    async def cluster_info(self) -> model.ClusterInfo:
        return await self.reads.cluster_info()

    async def broker_member_group(self, cluster: str, name: str) -> model.BrokerData:
        return await self.reads.broker_member_group(cluster, name)

    async def live_brokers(self) -> list[model.LiveBroker]:
        return await self.reads.live_brokers()

    async def live_count_by_cluster(self) -> dict[str, int]:
        return await self.reads.live_count_by_cluster()

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        return await self.reads.system_topic_list()

    async def all_topics(self) -> list[str]:
        return await self.reads.all_topics()

    async def topic_list(self, mode: TopicListMode, cluster: str = "") -> list[str]:
        return await self.reads.topic_list(mode, cluster)

    # --- topics and write perm (topics) -------------------------------------------------------

    async def register_topic(self, topic: str, queue_datas: Sequence[model.QueueData]) -> int:
        return await self.topics.register_topic(topic, queue_datas)

    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        return await self.topics.delete_topic(topic, cluster)

    async def topic_exists(self, topic: str) -> bool:
        return await self.topics.topic_exists(topic)

    async def unknown_groups(self, names: Sequence[str]) -> list[str]:
        return await self.topics.unknown_groups(names)

    async def wipe_write_perm(self, name: str) -> int:
        return await self.topics.wipe_write_perm(name)

    async def add_write_perm(self, name: str) -> int:
        return await self.topics.add_write_perm(name)

    # --- KV config and NamesrvConfig (kv) -----------------------------------------------------

    async def kv_put(self, namespace: str, key: str, value: str) -> bool:
        return await self.kv.kv_put(namespace, key, value)

    async def kv_get(self, namespace: str, key: str) -> str | None:
        return await self.kv.kv_get(namespace, key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        return await self.kv.kv_delete(namespace, key)

    async def kv_namespaces(self) -> list[str]:
        return await self.kv.kv_namespaces()

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        return await self.kv.kv_list(namespace)

    async def read_config(self) -> dict[str, str]:
        return await self.kv.read_config()

    async def write_config(self, values: dict[str, str]) -> None:
        await self.kv.write_config(values)
