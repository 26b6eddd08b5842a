"""The NameServer: the one service API both front ends (HTTP and RocketMQ remoting) call.

A thin facade: every operation a request can perform is a method here, answered by one of the
parts that do the work, each in its own module: ``Registrations`` (brokers registering,
heartbeating, leaving), ``RouteReads`` (routes, cluster info, topic lists), ``LongPolls`` (waits
for changes) and ``Administration`` (topics, write perm, KV, NamesrvConfig). They share a
``ServiceContext`` (store, route cache, NamesrvConfig, metrics, history). Front ends only decode a
request, call one method and encode its answer; refusals are the domain errors of
``nsfleet.domain.errors``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

from nsfleet.domain.model import (
    BrokerRegistration,
    ClusterInfo,
    DataVersion,
    LiveBroker,
    QueueData,
    RegisterResult,
)
from nsfleet.metrics import Metrics
from nsfleet.service.administration import Administration
from nsfleet.service.context import ServiceContext
from nsfleet.service.controller import Controller
from nsfleet.service.history import ChangeRecorder
from nsfleet.service.long_polls import LongPolls
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.service.registrations import Registrations
from nsfleet.service.route_cache import RouteCache
from nsfleet.service.route_reads import RouteAnswer, RouteReads
from nsfleet.store import RouteStore
from nsfleet.store.history import RecordedChange


class NameServer:
    def __init__(self, store: RouteStore, cache: RouteCache, config: NamesrvConfig,
                 metrics: Metrics, *, broker_timeout: float = 120.0,
                 worker_id: str | None = None) -> None:
        self._store = store
        self._cache = cache
        self.config = config
        self.metrics = metrics
        self.started = time.monotonic()
        # Names this worker's connections ("<worker_id>:<n>"); WorkerPresence keeps it alive.
        self.worker_id = worker_id or uuid.uuid4().hex[:16]
        # Every change this worker makes is also recorded in the fleet's history, under its id.
        store.history.worker = self.worker_id
        self.history = ChangeRecorder(store.history, metrics)
        ctx = ServiceContext(store, cache, config, metrics, self.history)
        self._registrations = Registrations(ctx, broker_timeout=broker_timeout)
        self._reads = RouteReads(ctx, started=self.started)
        self._long_polls = LongPolls(ctx, self._reads)
        self._admin = Administration(ctx)
        # RocketMQ 5's controller (docs/controller.md): the remoting front end calls it
        # directly, as a part of its own.
        self.controller = Controller(store, metrics, self.history)
        # orderMessageEnable or supportActingMaster change what routes answer: watchers look
        # again once the new config is read (the cache is keyed by what the config selects).
        config.on_change.append(cache.watchers.wake_all)

    def connection_id(self, number: int) -> str:
        """The fleet-wide name of this worker's remoting connection ``number``."""
        return f"{self.worker_id}:{number}"

    def on_broker_expired(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(cluster, addr)`` for every broker the sweep expires, on any worker."""
        self._cache.on_expired.append(callback)

    async def live_brokers(self) -> list[LiveBroker]:
        brokers = await self._store.live_brokers()
        return sorted(brokers, key=lambda b: (b.cluster, b.broker_name, b.broker_id))

    def stale_age(self) -> float | None:
        """Seconds this worker has been answering from a stale view (the store is away), or
        None while its view is coherent."""
        return self._cache.outage.stale_age()

    @property
    def stale_serve_max(self) -> float:
        """How long, in seconds, a stale view may be served (--stale-serve-max)."""
        return self._cache.outage.stale_serve_max

    @property
    def stale_routes(self) -> int:
        return self._cache.stale_routes

    async def recent_changes(self, count: int, before: str | None = None) -> list[RecordedChange]:
        """The fleet's newest recorded changes, newest first (older than ``before``, an entry
        id, when given)."""
        return await self.history.recent(count, before)

    def status(self) -> dict[str, object]:
        """This worker's view: its id and what its sweeps did (guard holds included)."""
        sample = self.metrics.registry.get_sample_value
        return {"workerId": self.worker_id,
                "sweepHeld": int(sample("nsfleet_sweep_held_total") or 0),
                "sweepRemovals": int(sample("nsfleet_sweep_removals_total") or 0),
                "uptimeSeconds": round(time.monotonic() - self.started, 1)}

    async def check_store(self) -> None:
        """Raise StoreUnavailable unless Redis answers."""
        await self._store.ping()

    # --- brokers (Registrations) ---------------------------------------------------------------

    async def register_broker(self, reg: BrokerRegistration, *,
                              connection: str | None = None) -> RegisterResult:
        return await self._registrations.register_broker(reg, connection=connection)

    async def unregister_broker(self, cluster: str | None, addr: str | None,
                                name: str | None) -> int:
        return await self._registrations.unregister_broker(cluster, addr, name)

    async def connection_closed(self, cluster: str, addr: str, name: str,
                                connection: str) -> bool:
        return await self._registrations.connection_closed(cluster, addr, name, connection)

    async def heartbeat(self, cluster: str | None, addr: str | None) -> bool:
        return await self._registrations.heartbeat(cluster, addr)

    async def query_data_version(self, cluster: str | None, addr: str | None,
                                 dv: DataVersion | None) -> tuple[bool, DataVersion | None]:
        return await self._registrations.query_data_version(cluster, addr, dv)

    # --- reads (RouteReads) --------------------------------------------------------------------

    async def route(self, topic: str | None) -> RouteAnswer:
        return await self._reads.route(topic)

    def cached_route(self, topic: str | None) -> RouteAnswer | None:
        return self._reads.cached_route(topic)

    async def cluster_info(self) -> ClusterInfo:
        return await self._reads.cluster_info()

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        return await self._reads.system_topic_list()

    async def all_topics(self) -> list[str]:
        return await self._reads.all_topics()

    async def unit_topics(self) -> list[str]:
        return await self._reads.unit_topics()

    async def has_unit_sub_topics(self) -> list[str]:
        return await self._reads.has_unit_sub_topics()

    async def has_unit_sub_ununit_topics(self) -> list[str]:
        return await self._reads.has_unit_sub_ununit_topics()

    async def topics_by_cluster(self, cluster: str | None) -> list[str]:
        return await self._reads.topics_by_cluster(cluster)

    async def topic_summary(self) -> bytes:
        return await self._reads.topic_summary()

    # --- long-polls (LongPolls) ----------------------------------------------------------------

    async def route_change(self, topic: str, etag: str | None, wait: float,
                           stopping: Callable[[], bool]) -> RouteAnswer | None:
        return await self._long_polls.route_change(topic, etag, wait, stopping)

    async def watch_routes(self, known: dict[str, str | None], wait: float,
                           stopping: Callable[[], bool]) -> dict[str, RouteAnswer | None]:
        return await self._long_polls.watch_routes(known, wait, stopping)

    async def fleet_changes(self, since: int, wait: float) -> int:
        return await self._long_polls.fleet_changes(since, wait)

    # --- administration (Administration) -------------------------------------------------------

    async def wipe_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        return await self._admin.wipe_write_perm(name, known_only=known_only)

    async def add_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        return await self._admin.add_write_perm(name, known_only=known_only)

    async def broker_member_group(self, name: str | None) -> dict[int, str]:
        return await self._admin.broker_member_group(name)

    async def delete_topic(self, topic: str | None, cluster: str | None = None) -> int:
        return await self._admin.delete_topic(topic, cluster)

    async def create_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        return await self._admin.create_topic(topic, queue_datas)

    async def register_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        return await self._admin.register_topic(topic, queue_datas)

    async def kv_put(self, namespace: str | None, key: str | None, value: str | None) -> bool:
        return await self._admin.kv_put(namespace, key, value)

    async def kv_get(self, namespace: str | None, key: str | None) -> str:
        return await self._admin.kv_get(namespace, key)

    async def kv_delete(self, namespace: str | None, key: str | None) -> bool:
        return await self._admin.kv_delete(namespace, key)

    async def kv_list(self, namespace: str | None) -> dict[str, str]:
        return await self._admin.kv_list(namespace)

    async def kv_namespaces(self) -> list[str]:
        return await self._admin.kv_namespaces()

    async def update_config(self, properties_text: str | None) -> dict[str, str]:
        return await self._admin.update_config(properties_text)

    def config_text(self) -> str:
        return self._admin.config_text()

    def config_values(self) -> dict[str, str]:
        return self._admin.config_values()

    async def update_config_values(self, values: dict[str, str], *,
                                   known_only: bool = False) -> dict[str, str]:
        return await self._admin.update_config_values(values, known_only=known_only)
