"""The NameServer: the one service API both front ends (HTTP and RocketMQ remoting) call.

Every operation a request can perform is a method here. It adds what depends on the worker to the
route store: the fleet-wide NamesrvConfig flags, the default broker timeout, the route cache (and
read-your-writes after every write), long-poll waits and the acting-master route rewrite. Front
ends only decode a request, call one method and encode its answer; refusals are the domain errors
of ``nsfleet.domain.errors``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import structlog

from nsfleet.config import Settings
from nsfleet.domain import validation
from nsfleet.domain.errors import (
    ConfigUnparsable,
    FeatureDisabled,
    KvKeyMissing,
    KvNotFound,
    NameServerError,
    NotReady,
    StoreUnavailable,
    TopicRouteNotFound,
    UnknownBrokerGroup,
    UnknownConfigKeys,
    ValidationError,
)
from nsfleet.domain.model import (
    ORDER_TOPIC_CONFIG,
    BrokerRegistration,
    ClusterInfo,
    DataVersion,
    LiveBroker,
    QueueData,
    RegisterResult,
    TopicRouteData,
)
from nsfleet.metrics import Metrics
from nsfleet.service.acting_master import apply_acting_master
from nsfleet.service.audit import audit
from nsfleet.service.history import ChangeRecorder
from nsfleet.service.namesrv_config import DEFAULTS as DEFAULT_CONFIG
from nsfleet.service.namesrv_config import WORKER_KEYS, NamesrvConfig
from nsfleet.service.outage import BrokerBacklog, Remembered
from nsfleet.service.route_cache import Entry, RouteCache
from nsfleet.service.topic_summary import TopicSummary
from nsfleet.store import RouteStore
from nsfleet.store.history import RecordedChange

log = structlog.get_logger(__name__)
T = TypeVar("T")
DROPPED_LOG_MEMORY = 10_000  # (broker, topic) pairs already logged as dropped


ABSENT_ETAG = "0"  # the ETag of "no route"


def standard_route_json(route: TopicRouteData) -> bytes:
    """The route as the HTTP API answers it: standard, compact JSON with sorted keys."""
    return json.dumps(route.to_dict(), separators=(",", ":"), sort_keys=True).encode()


@dataclass(slots=True)
class RouteAnswer:
    """A topic's route as served, with its encodings memoised per cache entry."""

    route: TopicRouteData
    rev: int
    expires: float  # time.monotonic() when it may change with no announcement (a deadline)
    _memo: dict[str, bytes]

    @property
    def etag(self) -> str:
        """Changes whenever the answered bytes change: the topic's change counter plus a digest
        of the body (a route changes shape at a member's deadline with no counter moving)."""
        tag = self._memo.get("etag")  # memoised with the body: hashing 10 KB per read shows
        if tag is None:
            body = self.encoded("standard-json", standard_route_json)
            tag = self._memo["etag"] = (
                f"{self.rev}-{hashlib.blake2b(body, digest_size=8).hexdigest()}".encode())
        return tag.decode()

    def encoded(self, encoding: str, encode: Callable[[TopicRouteData], bytes]) -> bytes:
        data = self._memo.get(encoding)
        if data is None:
            data = self._memo[encoding] = encode(self.route)
        return data


class NameServer:
    def __init__(self, settings: Settings, store: RouteStore, cache: RouteCache,
                 config: NamesrvConfig, metrics: Metrics, *, worker_id: str | None = None) -> None:
        self.settings = settings
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
        self._topic_summary = TopicSummary(store)
        self._dropped_logged: set[tuple[str, str, str]] = set()
        self._backlog = BrokerBacklog()
        # Drains of removed groups' queue rows running after their answer (``_drain_later``).
        self._drains: set[asyncio.Task[int]] = set()
        # One drain at a time per worker: a mass departure's drains then hold other clients
        # up for a chunk or two, not for one chunk of every removed group.
        self._drain_turn = asyncio.Lock()
        cache.on_store_back.append(self.replay_backlog)
        # orderMessageEnable or supportActingMaster change what routes answer: watchers look
        # again once the new config is read (the cache is keyed by what the config selects).
        config.on_change.append(cache.wake_watchers)

    async def _written(self, write: Awaitable[T]) -> T:
        """Run a write, then wait until this worker's cache has applied every change it
        published, so the next read here sees the write (read your writes)."""
        result = await write
        self._cache.store_answered()
        await self._cache.sync()
        return result

    # --- brokers -------------------------------------------------------------------------------

    def connection_id(self, number: int) -> str:
        """The fleet-wide name of this worker's remoting connection ``number``."""
        return f"{self.worker_id}:{number}"

    async def register_broker(self, reg: BrokerRegistration, *,
                              connection: str | None = None) -> RegisterResult:
        """REGISTER_BROKER with the fleet's defaults. ``connection`` (``connection_id``) is the
        remoting connection it came over: the broker then stays registered until the last such
        connection closes (``connection_closed``) or it expires. A fenced registration answers,
        as Java's empty RegisterBrokerResult does, with the ORDER_TOPIC_CONFIG table still
        attached. Topics that cannot be stored are dropped alone, logged once and counted."""
        if reg.heartbeat_timeout_millis is None:
            reg.heartbeat_timeout_millis = int(self.settings.broker_timeout * 1000)
        return_kv = self.config.flag("returnOrderTopicConfigToBroker")
        try:
            result = await self._written(self._store.register_broker(
                reg,
                delete_absent_topics=(self.config.flag("deleteTopicWithBrokerRegistration")
                                      and not reg.topic_queue_mappings),
                return_order_conf=return_kv, connection=connection))
        except StoreUnavailable:  # answered as an error, replayed when the store is back
            if _could_be_live(reg.cluster, reg.addr):
                self._backlog.registration(reg, connection, reg.heartbeat_timeout_millis / 1000)
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
        try:
            outcome = await self._written(self._store.unregister_broker(
                cluster, addr, name, closed_connection=connection, drain=False))
        except StoreUnavailable:  # its replayed registration must not keep it open
            self._backlog.connection_closed(cluster, addr, connection)
            raise
        if outcome != -1:
            self._drain_later(name)
            await self.history.record(
                "broker unregistered", reason="its last connection closed", cluster=cluster,
                broker_addr=addr, broker_name=name, group_removed=outcome == 1)
        return outcome != -1

    async def replay_backlog(self) -> None:
        """Apply what brokers sent this worker while the store was away (called once it is
        back, before reads go on). A registration is written only when the store holds an
        older DataVersion for the broker (or none): a newer one that reached the store another
        way is never overwritten; either way the broker's deadline is refreshed, since it was
        alive within its timeout. A heartbeat refreshes the deadline (and revives a broker
        past it that the sweep has not removed, as Java keeps it)."""
        items = self._backlog.take()
        for item in items:
            try:
                await self._replay(item)
            except StoreUnavailable:  # away again: keep the rest for its return
                self.metrics.replayed.labels("failed").inc()
                for rest in items[items.index(item):]:
                    self._backlog.restore(rest)
                raise
            except NameServerError as exc:
                self.metrics.replayed.labels("failed").inc()
                log.warning("replay after the outage failed", cluster=item.cluster,
                            broker_addr=item.addr, error=exc.remark)
        if items:
            log.info("replayed what brokers sent during the store outage", brokers=len(items))

    async def _replay(self, item: Remembered) -> None:
        reg = item.registration
        if reg is None:
            alive = await self._store.heartbeat(item.cluster, item.addr)
            self.metrics.replayed.labels("applied" if alive else "superseded").inc()
            return
        changed, stored = await self._store.query_data_version(item.cluster, item.addr,
                                                               reg.data_version)
        if stored is not None and (not changed or _newer_or_same(stored, reg.data_version)):
            self.metrics.replayed.labels("superseded" if changed else "applied").inc()
            return
        await self.register_broker(reg, connection=item.connection)
        self.metrics.replayed.labels("applied").inc()

    def on_broker_expired(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(cluster, addr)`` for every broker the sweep expires, on any worker."""
        self._cache.on_expired.append(callback)

    async def heartbeat(self, cluster: str | None, addr: str | None) -> bool:
        """Refresh a live broker's deadline; False when it is not live. Not a write in the
        read-your-writes sense: no route changes."""
        if not _could_be_live(cluster, addr):
            return False
        assert cluster is not None and addr is not None
        try:
            alive = await self._store.heartbeat(cluster, addr)
        except StoreUnavailable:
            self._backlog.heartbeat(cluster, addr, self.settings.broker_timeout)
            raise
        self._cache.store_answered()
        return alive

    async def query_data_version(self, cluster: str | None, addr: str | None,
                                 dv: DataVersion | None) -> tuple[bool, DataVersion | None]:
        """(changed, stored DataVersion or None), refreshing the deadline like Java 5.x. An
        unknown broker, or no DataVersion to compare, is "changed" (stored.equals(null))."""
        if not _could_be_live(cluster, addr):
            return True, None
        assert cluster is not None and addr is not None
        try:
            changed, stored = await self._store.query_data_version(cluster, addr,
                                                                   dv or DataVersion())
        except StoreUnavailable:
            self._backlog.heartbeat(cluster, addr, self.settings.broker_timeout)
            raise
        self._cache.store_answered()
        return changed or dv is None, stored

    async def live_brokers(self) -> list[LiveBroker]:
        brokers = await self._store.live_brokers()
        return sorted(brokers, key=lambda b: (b.cluster, b.broker_name, b.broker_id))

    async def wipe_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        """Topics whose write perm was removed; a name no registration accepts has none.
        ``known_only`` (the HTTP API) refuses a group no registration created: Java answers
        it with a count of 0, which the remoting answer keeps."""
        return await self._write_perm(name, True, known_only)

    async def add_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        return await self._write_perm(name, False, known_only)

    async def _write_perm(self, name: str | None, wipe: bool, known_only: bool) -> int:
        if not validation.is_valid(validation.name, name):
            if known_only:
                raise UnknownBrokerGroup(name)
            return 0
        assert name is not None
        store = self._store
        count = await self._written(store.wipe_write_perm(name) if wipe
                                    else store.add_write_perm(name))
        # A group with queue data is known; only a count of 0 needs the second look.
        if known_only and count == 0 and await store.unknown_groups([name]):
            raise UnknownBrokerGroup(name)
        await self.history.record("write perm wiped" if wipe else "write perm added",
                                  broker_name=name, topics=count)
        return count

    async def broker_member_group(self, name: str | None) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP: the group's brokerId -> address map (empty if unknown)."""
        if not validation.is_valid(validation.name, name):
            return {}
        assert name is not None
        return (await self._store.broker_member_group("", name)).broker_addrs

    async def cluster_info(self) -> ClusterInfo:
        return await self._cache.answer("cluster_info", self._store.cluster_info, "cluster_info")

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        return await self._cache.answer("topics:system", self._store.system_topic_list,
                                        "topic_list")

    def stale_age(self) -> float | None:
        """Seconds this worker has been answering from a stale view (the store is away), or
        None while its view is coherent."""
        return self._cache.stale_age()

    @property
    def stale_routes(self) -> int:
        return self._cache.stale_routes

    # --- routes --------------------------------------------------------------------------------

    def _check_ready(self) -> None:
        """needWaitForService: routes are refused for waitSecondsForService after start."""
        if (self.config.flag("needWaitForService")
                and time.monotonic() - self.started < self.config.number("waitSecondsForService")):
            raise NotReady

    async def route(self, topic: str | None) -> RouteAnswer:
        """The route clients get (cached, with orderTopicConf and the acting-master rewrite as
        the fleet config says); TopicRouteNotFound for an unknown or impossible topic name."""
        self._check_ready()
        if not validation.routable(topic):
            raise TopicRouteNotFound(topic)
        assert topic is not None
        entry = await self._cache.get(topic, order_conf=self.config.flag("orderMessageEnable"))
        return self._answer(topic, entry)

    def cached_route(self, topic: str | None) -> RouteAnswer | None:
        """The answer ``route`` would give when it needs no Redis call (raising the same
        errors), else None."""
        self._check_ready()
        # Only ``route`` fills the cache, after the same name check: a hit needs no check.
        entry = self._cache.peek(topic, order_conf=self.config.flag("orderMessageEnable"))
        if entry is None:
            if not validation.routable(topic):
                raise TopicRouteNotFound(topic)
            return None
        assert topic is not None
        return self._answer(topic, entry)

    async def route_change(self, topic: str, etag: str | None, wait: float,
                           stopping: Callable[[], bool]) -> RouteAnswer | None:
        """Long-poll one topic: its answer (None: no route) once its ETag differs from
        ``etag``, or the unchanged answer after ``wait`` seconds or when ``stopping()``."""
        validation.route_topic(topic)
        changed = await self.watch_routes({topic: etag}, wait, stopping)
        if topic in changed:
            return changed[topic]
        try:
            return await self.route(topic)
        except TopicRouteNotFound:
            return None

    async def watch_routes(self, known: dict[str, str | None], wait: float,
                           stopping: Callable[[], bool]) -> dict[str, RouteAnswer | None]:
        """Long-poll many topics at once: the topics whose ETag differs from the one given
        (ABSENT_ETAG, "0", for "no route"), with their answers (None: no route now), as soon
        as there is one; {} when none changed within ``wait`` seconds or ``stopping()`` turned
        true. Woken by the change feed, and at the deadline of a listed broker (a route changes
        shape then without any announcement)."""
        for topic in known:
            validation.route_topic(topic)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            with self._cache.watch(known) as woken:
                changed: dict[str, RouteAnswer | None] = {}
                wake_at = deadline
                for topic, etag in known.items():
                    try:
                        answer: RouteAnswer | None = await self.route(topic)
                    except TopicRouteNotFound:
                        answer = None
                    if (answer.etag if answer else ABSENT_ETAG) != etag:
                        changed[topic] = answer
                    elif answer is not None:
                        wake_at = min(wake_at, loop.time() + answer.expires - time.monotonic())
                remaining = deadline - loop.time()
                if changed or remaining <= 0 or stopping():
                    return changed
                # Wake at the earliest deadline, and at least every second to notice a drain.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, min(wake_at - loop.time(), 1.0))):
                        await woken

    def _answer(self, topic: str, entry: Entry) -> RouteAnswer:
        if entry.read is None:
            raise TopicRouteNotFound(topic)
        route = entry.read.route
        memo_key = "acting" if self.config.flag("supportActingMaster") else "plain"
        if memo_key == "acting":
            route = apply_acting_master(route, topic)
        return RouteAnswer(route, entry.read.rev, entry.expires,
                           entry.encoded.setdefault(memo_key, {}))

    # --- topics --------------------------------------------------------------------------------

    def _check_list(self, flag: str) -> None:
        if not self.config.flag(flag):
            raise FeatureDisabled

    async def all_topics(self) -> list[str]:
        self._check_list("enableAllTopicList")
        return await self._topics("all_topics", self._store.all_topics)

    async def unit_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("unit_topics", self._store.unit_topics)

    async def has_unit_sub_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("has_unit_sub_topics", self._store.has_unit_sub_topics)

    async def has_unit_sub_ununit_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("has_unit_sub_ununit_topics",
                                  self._store.has_unit_sub_ununit_topics)

    async def topics_by_cluster(self, cluster: str | None) -> list[str]:
        self._check_list("enableTopicList")
        if not validation.is_valid(validation.name, cluster):
            return []  # a cluster name no registration accepts has no topics
        assert cluster is not None
        return await self._topics(f"cluster:{cluster}",
                                  lambda: self._store.topics_by_cluster(cluster))

    async def _topics(self, name: str, read: Callable[[], Awaitable[list[str]]]) -> list[str]:
        """A topic list, answered from the last coherent view while the store is away."""
        return await self._cache.answer(f"topics:{name}", read, "topic_list")

    async def delete_topic(self, topic: str | None, cluster: str | None = None) -> int:
        """Queue data rows removed (of ``cluster``'s groups only, when named); a topic or
        cluster name no write accepts has none."""
        if not validation.is_valid(validation.route_topic, topic) or (
                cluster and not validation.is_valid(validation.name, cluster)):
            return 0
        assert topic is not None
        removed = await self._written(self._store.delete_topic(topic, cluster or None))
        if removed:
            await self.history.record("topic deleted", topic=topic, cluster=cluster,
                                      queue_datas=removed)
        return removed

    async def create_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        """A topic created through nsfleet's own API: its name follows TopicValidator and its
        queue data the limits of a topic a user creates; then it is registered as
        REGISTER_TOPIC_IN_NAMESRV registers one."""
        for i, q in enumerate(queue_datas):
            validation.queue_nums(q.read_queue_nums, f"queueDatas[{i}].readQueueNums")
            validation.queue_nums(q.write_queue_nums, f"queueDatas[{i}].writeQueueNums")
            validation.perm(q.perm, f"queueDatas[{i}].perm")
            validation.integer(q.topic_sys_flag, f"queueDatas[{i}].topicSysFlag", 0)
            validation.name(q.broker_name, f"queueDatas[{i}].brokerName")
        topic = validation.topic(topic)
        # Java skips a group it does not know (and stops there); a person is told, and
        # nothing is written.
        unknown = set(await self._store.unknown_groups([q.broker_name for q in queue_datas]))
        for i, q in enumerate(queue_datas):
            if q.broker_name in unknown:
                raise ValidationError(f"queueDatas[{i}].brokerName",
                                      f"no broker group {q.broker_name} is registered (a topic "
                                      "is written to registered broker groups only); nothing "
                                      "written")
        return await self.register_topic(topic, queue_datas)

    async def register_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        """REGISTER_TOPIC_IN_NAMESRV (RouteInfoManager.registerTopic): only known broker groups
        are written. An empty list is ignored whatever the topic. A brokerName no registration
        accepts is an unknown group, and Java stops at an unknown group: a new topic is then not
        created at all, an existing one keeps what was written before it. Returns the rows
        written."""
        if not queue_datas:
            return 0
        topic = validation.route_topic(topic)
        known: list[QueueData] = []
        for qd in queue_datas:
            if not validation.is_valid(validation.name, qd.broker_name):
                if not await self._store.topic_exists(topic):
                    return 0
                break
            known.append(qd)
        if not known:
            return 0
        written = await self._written(self._store.register_topic(topic, known))
        if written:
            await self.history.record("topic registered", topic=topic,
                                      broker_names=[q.broker_name for q in known],
                                      queue_datas=written)
        return written

    # --- KV config -----------------------------------------------------------------------------

    async def kv_put(self, namespace: str | None, key: str | None, value: str | None) -> bool:
        """``None`` is Java's null value: the namespace exists, the key is absent."""
        if namespace is None or key is None:
            raise KvKeyMissing
        changed = await self._written(self._store.kv_put(namespace, key, value))
        if changed:
            await self.history.record("kv put", namespace=namespace, key=key, value=value)
        return changed

    async def kv_get(self, namespace: str | None, key: str | None) -> str:
        value = None
        if (validation.is_valid(validation.kv_part, namespace)
                and validation.is_valid(validation.kv_part, key)):
            assert namespace is not None and key is not None
            value = await self._store.kv_get(namespace, key)
        if value is None:
            raise KvNotFound(namespace, key)
        return value

    async def kv_delete(self, namespace: str | None, key: str | None) -> bool:
        """True when a value was removed; a namespace or key no write accepts has none."""
        if not (validation.is_valid(validation.kv_part, namespace)
                and validation.is_valid(validation.kv_part, key)):
            return False
        assert namespace is not None and key is not None
        deleted = await self._written(self._store.kv_delete(namespace, key))
        if deleted:
            await self.history.record("kv deleted", namespace=namespace, key=key)
        return deleted

    async def kv_list(self, namespace: str | None) -> dict[str, str]:
        table = None
        if validation.is_valid(validation.kv_part, namespace):
            assert namespace is not None
            table = await self._store.kv_list(namespace)
        if table is None:
            raise KvNotFound(namespace, whole_namespace=True)
        return table

    # --- NamesrvConfig -------------------------------------------------------------------------

    async def update_config(self, properties_text: str | None) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG: Java Properties text; what was applied fleet-wide."""
        if not properties_text:
            return {}
        try:
            props = self.config.parse(properties_text)
        except ValueError:
            raise ConfigUnparsable from None
        return await self.update_config_values(props)

    def config_text(self) -> str:
        """GET_NAMESRV_CONFIG's body."""
        return self.config.properties_text()

    def config_values(self) -> dict[str, str]:
        """Every NamesrvConfig (and NettyServerConfig) key with its value, as 319 lists them."""
        return self.config.all_values()

    async def update_config_values(self, values: dict[str, str], *,
                                   known_only: bool = False) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG with the properties already split: the same blacklist and the
        same parsing; what was applied fleet-wide. Java ignores unknown keys; ``known_only``
        (the HTTP API) refuses the whole request instead, naming them."""
        if known_only:
            strays = sorted(set(values) - set(DEFAULT_CONFIG))
            if strays:
                raise UnknownConfigKeys([k for k in strays if k not in WORKER_KEYS],
                                        {k: WORKER_KEYS[k] for k in strays if k in WORKER_KEYS})
        applied = await self.config.update(values)
        if applied:
            await self.history.record("namesrv config updated", applied=applied)
        return applied

    # --- the fleet at a glance (the console) ----------------------------------------------------

    async def fleet_changes(self, since: int, wait: float) -> int:
        """Long-poll the fleet's change counter: its value once it differs from ``since``, or
        after ``wait`` seconds (a deadline passing moves no counter: pollers also refresh on a
        timer)."""
        current = await self._store.rev()
        if current != since or wait <= 0:
            return current
        await self._cache.wait_for_any_change(wait)
        return await self._store.rev()

    async def kv_namespaces(self) -> list[str]:
        return await self._store.kv_namespaces()

    async def topic_summary(self) -> bytes:
        """Every topic with its kind and queue data, as JSON (``TopicSummary``); refused like
        the topic list when enableAllTopicList is off."""
        self._check_list("enableAllTopicList")
        return await self._topic_summary.encoded()

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

    # --- health --------------------------------------------------------------------------------

    async def check_store(self) -> None:
        """Raise StoreUnavailable unless Redis answers."""
        await self._store.ping()


def _newer_or_same(stored: DataVersion, sent: DataVersion) -> bool:
    """Java's DataVersion.nextVersion moves the timestamp and the counter together."""
    return (stored.timestamp, stored.counter) >= (sent.timestamp, sent.counter)


def _could_be_live(cluster: str | None, addr: str | None) -> bool:
    """Registration validates both, so any other value names no live broker (Java's lookup
    would simply find nothing)."""
    return (validation.is_valid(validation.name, cluster)
            and validation.is_valid(validation.addr, addr))
