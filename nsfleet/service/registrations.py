"""Brokers registering, heartbeating and leaving: REGISTER_BROKER (with the fleet's defaults),
UNREGISTER_BROKER, a closed remoting connection, BROKER_HEARTBEAT and QUERY_DATA_VERSION. While
the store is away, what a broker sends is answered with an error and kept in the outage's backlog,
replayed on return (service/outage.py)."""

from __future__ import annotations

import asyncio

import structlog

from nsfleet.domain.audit import audit
from nsfleet.domain.errors import StoreUnavailable
from nsfleet.domain.model import (
    ORDER_TOPIC_CONFIG,
    BrokerRegistration,
    DataVersion,
    RegisterResult,
)
from nsfleet.service.context import ServiceContext, ServicePart
from nsfleet.service.outage import could_be_live

log = structlog.get_logger(__name__)
DROPPED_LOG_MEMORY = 10_000  # (broker, topic) pairs already logged as dropped


class Registrations(ServicePart):
    def __init__(self, ctx: ServiceContext, *, broker_timeout: float) -> None:
        super().__init__(ctx)
        # Seconds before a silent broker expires, for brokers that send no heartbeatTimeoutMillis.
        self.broker_timeout = broker_timeout
        self._dropped_logged: set[tuple[str, str, str]] = set()
        # Drains of removed groups' queue rows running after their answer (``_drain_later``).
        self._drains: set[asyncio.Task[int]] = set()
        # One drain at a time per worker: a mass departure's drains then hold other clients
        # up for a chunk or two, not for one chunk of every removed group.
        self._drain_turn = asyncio.Lock()
        self._outage = self._cache.outage
        # What brokers sent during an outage is registered again, as they sent it, on return.
        self._outage.replay_into(self._store, self._register_replayed)

    async def register_broker(self, reg: BrokerRegistration, *,
                              connection: str | None = None) -> RegisterResult:
        """REGISTER_BROKER with the fleet's defaults. ``connection`` (``connection_id``) is the
        remoting connection it came over: the broker then stays registered until the last such
        connection closes (``connection_closed``) or it expires. A fenced registration answers,
        as Java's empty RegisterBrokerResult does, with the ORDER_TOPIC_CONFIG table still
        attached. Topics that cannot be stored are dropped alone, logged once and counted."""
        if reg.heartbeat_timeout_millis is None:
            reg.heartbeat_timeout_millis = int(self.broker_timeout * 1000)
        return_kv = self.config.flag("returnOrderTopicConfigToBroker")
        try:
            result = await self._store.register_broker(
                reg,
                delete_absent_topics=(self.config.flag("deleteTopicWithBrokerRegistration")
                                      and not reg.topic_queue_mappings),
                return_order_conf=return_kv, connection=connection)
            if result.remembered:  # a memo's answer wrote nothing to read back
                self.metrics.registrations_from_memo.inc()
            else:
                await self._synced()
        except StoreUnavailable:  # answered as an error, replayed when the store is back
            if could_be_live(reg.cluster, reg.addr):
                self._outage.backlog.registration(reg, connection,
                                                  reg.heartbeat_timeout_millis / 1000)
            raise
        if result.fenced and return_kv:
            result.kv_table = await self._store.kv_list(ORDER_TOPIC_CONFIG)
        if result.fenced:
            audit("registration fenced", cluster=reg.cluster, broker_addr=reg.addr,
                  broker_name=reg.name, broker_id=reg.broker_id)
        elif result.changed:
            await self.history.record(
                "broker registered", cluster=reg.cluster, broker_addr=reg.addr,
                broker_name=reg.name, broker_id=reg.broker_id, topics=len(reg.topic_configs),
                data_version=reg.data_version.to_dict())
        self._note_dropped(reg)
        return result

    def _note_dropped(self, reg: BrokerRegistration) -> None:
        if not reg.dropped_topics:
            return
        self.metrics.topics_dropped.inc(len(reg.dropped_topics))
        for dropped in reg.dropped_topics:
            seen = (reg.cluster or "", reg.addr or "", dropped.topic)
            if seen in self._dropped_logged:
                continue
            if len(self._dropped_logged) >= DROPPED_LOG_MEMORY:
                self._dropped_logged.clear()
            self._dropped_logged.add(seen)
            log.warning("registered topic not stored", cluster=reg.cluster,
                        broker_addr=reg.addr, broker_name=reg.name,
                        topic=dropped.topic[:200], reason=dropped.reason)

    async def unregister_broker(self, cluster: str | None, addr: str | None,
                                name: str | None) -> int:
        """UNREGISTER_BROKER: 0 removed from a group that remains, 1 removed with its group."""
        self._forget(cluster, addr)
        outcome = await self._written(self._store.unregister_broker(cluster, addr, name,
                                                                     drain=False))
        self._drain_later(name)
        await self.history.record("broker unregistered", cluster=cluster, broker_addr=addr,
                                  broker_name=name, group_removed=outcome == 1)
        return outcome

    def _drain_later(self, name: str | None) -> None:
        """Delete the queue rows a removed group left to drain (``P:idx:cleanups``) after the
        answer: routes and cluster info already leave the group out, and a mass departure's
        drains would otherwise hold an UNREGISTER_BROKER past the broker's 3 s (a registration
        of the name drains first; the sweep finishes what a stopped worker left)."""
        if name is None:
            return
        task = asyncio.create_task(self._drain(name))
        self._drains.add(task)
        task.add_done_callback(self._drained)

    async def _drain(self, name: str) -> int:
        async with self._drain_turn:
            return await self._store.drain_cleanups(only=name)

    def _drained(self, task: asyncio.Task[int]) -> None:
        self._drains.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("drain of a removed group failed; the sweep finishes it",
                        error=str(task.exception()))

    async def connection_closed(self, cluster: str, addr: str, name: str,
                                connection: str) -> bool:
        """A remoting connection the broker registered over closed. The broker goes only when
        no other connection it registered over is open, on any worker (a fleet is not one Java
        process: the broker keeps a connection to every worker). True when it went."""
        self._forget(cluster, addr)
        try:
            outcome = await self._written(self._store.unregister_broker(
                cluster, addr, name, closed_connection=connection, drain=False))
        except StoreUnavailable:  # its replayed registration must not keep it open
            self._outage.backlog.connection_closed(cluster, addr, connection)
            raise
        if outcome != -1:
            self._drain_later(name)
            await self.history.record(
                "broker unregistered", reason="its last connection closed", cluster=cluster,
                broker_addr=addr, broker_name=name, group_removed=outcome == 1)
        return outcome != -1

    def _forget(self, cluster: str | None, addr: str | None) -> None:
        """The broker leaves through this worker: no memo answers for it, nothing of it is
        written later."""
        if cluster is not None and addr is not None:
            self._store.unchanged_chunks.forget((cluster, addr))

    async def _register_replayed(self, reg: BrokerRegistration, connection: str | None) -> None:
        await self.register_broker(reg, connection=connection)

    async def heartbeat(self, cluster: str | None, addr: str | None) -> bool:
        """Refresh a live broker's deadline; False when it is not live. Not a write in the
        read-your-writes sense: no route changes."""
        if not could_be_live(cluster, addr):
            return False
        assert cluster is not None and addr is not None
        try:
            alive = await self._store.heartbeat(cluster, addr)
        except StoreUnavailable:
            self._outage.backlog.heartbeat(cluster, addr, self.broker_timeout)
            raise
        self._cache.store_answered()
        return alive

    async def query_data_version(self, cluster: str | None, addr: str | None,
                                 dv: DataVersion | None) -> tuple[bool, DataVersion | None]:
        """(changed, stored DataVersion or None), refreshing the deadline like Java 5.x. An
        unknown broker, or no DataVersion to compare, is "changed" (stored.equals(null))."""
        if not could_be_live(cluster, addr):
            return True, None
        assert cluster is not None and addr is not None
        try:
            # A DataVersion this worker answered from its memo is compared as stored.
            await self._store.write_pending_data_version(cluster, addr)
            changed, stored = await self._store.query_data_version(cluster, addr,
                                                                   dv or DataVersion())
        except StoreUnavailable:
            self._outage.backlog.heartbeat(cluster, addr, self.broker_timeout)
            raise
        self._cache.store_answered()
        return changed or dv is None, stored
