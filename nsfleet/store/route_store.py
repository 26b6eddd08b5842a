"""RouteStore: the NameServer's tables in Redis, changed only through the Lua scripts of ``lua/``.

The NameServer service (``nsfleet.service.nameserver``) is its only caller. Every input is
validated here (``nsfleet.domain``), before any script runs, so a rejected call writes nothing;
redis-py's errors leave it as the domain's StoreUnavailable / StoreFailed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from nsfleet.domain import validation
from nsfleet.domain.errors import RegistrationRejected, ReplicaAcksMissing
from nsfleet.domain.memo import BoundedMemo
from nsfleet.domain.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    BrokerData,
    BrokerRegistration,
    CheckedTopics,
    ClusterInfo,
    DataVersion,
    LiveBroker,
    QueueData,
    RegisterResult,
    TopicRouteData,
    topic_queue_mapping_info,
)
from nsfleet.store import scripts
from nsfleet.store.change_feed import ChangeFeed
from nsfleet.store.history import ChangeHistory
from nsfleet.store.keys import ORDER_TOPIC_CONFIG, Keys
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.topic_overview import TopicOverview

RedisClient = Redis | RedisCluster
Row = tuple[str, int, int, int, int]  # a queue row for the scripts: topic, rq, wq, perm, flag
PROBE_MIN_TOPICS = 64  # below this, sending the table costs less than a second round trip
# The most queue rows one script call writes or removes: Redis runs one script at a time, and
# 250 rows keep every call of a big registration or cascade under ~5 ms of Redis time (more
# on a loaded machine; bench/script_time.py), so no other client waits longer than that.
CHUNK_ROWS = 250
# A table of more topics is validated and encoded in a thread: that is milliseconds per thousand
# topics, which would otherwise hold every read the worker serves meanwhile.
OFF_LOOP_TOPICS = 500
CALLS_IN_FLIGHT = 2  # chunk calls of one operation sent before the first answers
# Chunk calls of all operations of one store (one worker) in Redis at once: a registration storm's
# chunks then queue in the worker, not in Redis, where every other client (a route read) would
# wait behind all of them.
CHUNKS_IN_REDIS = 4


class ScriptReplyError(RuntimeError):
    """A script answered with something other than a table led by a status it may return."""


# Every script returns a table whose first element is a status string: "ok" for the normal
# answer, these words otherwise (see each script's header for what follows the status).
SCRIPT_STATUSES: dict[str, frozenset[str]] = {
    "register_broker": frozenset({"ok", "fenced", "rejected", "full", "chunk", "head", "drain"}),
    "register_topics": frozenset({"ok", "stale"}),
    "register_commit": frozenset({"ok"}),
    "drain_cleanup": frozenset({"ok"}),
    "clear_write_perm": frozenset({"ok"}),
    "unregister_broker": frozenset({"ok", "kept"}),
    "heartbeat": frozenset({"ok", "unknown"}),
    "sweep": frozenset({"ok", "held"}),
    "route": frozenset({"ok", "none"}),
    "cluster_info": frozenset({"ok"}),
    "topic_list": frozenset({"ok"}),
    "delete_topic": frozenset({"ok"}),
    "register_topic": frozenset({"ok"}),
    "write_perm": frozenset({"ok"}),
    "kv_put": frozenset({"ok"}),
    "kv_delete": frozenset({"ok"}),
    "topic_overview": frozenset({"ok"}),
}


def _reply(name: str, raw: Any) -> tuple[str, list[Any]]:
    """Split a script's raw reply into (status, the values after it), checking the status
    against those the script may return."""
    allowed = SCRIPT_STATUSES.get(name)
    if allowed is None:
        raise ScriptReplyError(f"{name}: no reply statuses declared for this script")
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise ScriptReplyError(f"{name}: expected a table led by a status string, got {raw!r:.200}")
    status = raw[0]
    if status not in allowed:
        raise ScriptReplyError(
            f"{name}: unexpected status {status!r} (expected one of {', '.join(sorted(allowed))})")
    return status, raw[1:]


class RouteRead(msgspec.Struct, gc=False):
    """A route as read from Redis, with what a cache needs to know about it (untracked by the
    garbage collector, as the route is: see nsfleet.domain.model)."""

    route: TopicRouteData
    rev: int  # the topic's change counter (ETag)
    ttl_ms: int  # until the first listed member's deadline; the route may change then


@dataclass(frozen=True, slots=True)
class ViewMarker:
    """What a worker's cached view is coherent with: the Redis process that held the tables
    (its ``run_id``: a restart or a promoted replica changes it) and the change counter
    ``P:rev`` of the last change the worker applied."""

    server: str
    rev: int


@dataclass(slots=True)
class SweepResult:
    held: bool
    due: int
    live: int
    removed: list[tuple[str, str, str]]  # (cluster, addr, brokerName)


_encode = msgspec.json.Encoder().encode


def _json(value: Any) -> bytes:
    """Compact JSON for the scripts' cjson (msgspec: a 60,000-topic table in ~10 ms)."""
    return _encode(value)


def _run_id(info: Any) -> str:
    """INFO server's run_id; "" when the server refused INFO."""
    return "" if isinstance(info, Exception) else str(info.get("run_id", ""))


def _flag(b: bool) -> str:
    return "1" if b else "0"


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def _members(flat: Sequence[str]) -> dict[int, str]:
    return {int(k): v for k, v in _pairs(flat).items()}


@translating_redis_errors
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
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be at least 1")
        # Writes a client is told succeeded wait for this many replicas (WAIT), so a Sentinel
        # failover cannot lose them (docs/reliability.md).
        self.replica_acks = replica_acks
        self.replica_ack_timeout_ms = replica_ack_timeout_ms
        self.on_script = on_script
        self.probe_min_topics = probe_min_topics
        self.chunk_rows = chunk_rows
        self.redis = redis
        self.namespace = validation.namespace(namespace)
        self.keys = Keys(namespace)
        self.changes = ChangeFeed(redis, self.keys.changes)
        self.history = ChangeHistory(redis, self.keys.history)
        self.topic_overview = TopicOverview(redis, self.keys, self._call_many)
        # Validated and encoded tables by the identity of the (immutable) table sent.
        self._tables: BoundedMemo[tuple[Any, ...]] = BoundedMemo()
        self._chunk_slots = asyncio.Semaphore(CHUNKS_IN_REDIS)
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(scripts.source(name)) for name in scripts.SCRIPT_NAMES
        }

    async def load_scripts(self) -> None:
        """SCRIPT LOAD every script, so the first real call is a plain EVALSHA."""
        for script in self._scripts.values():
            script.sha = await self.redis.script_load(script.script)

    async def _call(self, name: str, args: Iterable[Any] = (),
                    keys: Sequence[str] = ()) -> tuple[str, list[Any]]:
        """Run a script; its reply as (status, the values after it), see ``_reply``."""
        started = time.perf_counter()
        try:
            if self.replica_acks and name in scripts.ACKED_WRITES:
                result = await self._call_acked(name, [self.keys.prefix, *keys], list(args))
            else:
                result = await self._scripts[name](keys=[self.keys.prefix, *keys],
                                                   args=list(args))
        finally:
            if self.on_script is not None:
                self.on_script(name, time.perf_counter() - started)
        return _reply(name, result)

    async def _call_acked(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """The script, then WAIT on the same connection (WAIT counts the replicas that have
        every write of its own connection)."""
        pipe = self.redis.pipeline(transaction=False)
        await self._scripts[name](keys=keys, args=args, client=pipe)
        pipe.wait(self.replica_acks, self.replica_ack_timeout_ms)
        result, acks = await pipe.execute()
        if int(acks) < self.replica_acks:
            raise ReplicaAcksMissing(int(acks), self.replica_acks, self.replica_ack_timeout_ms)
        return result

    async def _call_many(self, name: str, calls: Sequence[Sequence[Any]], *,
                         stop_on: str | None = None) -> list[tuple[str, list[Any]]]:
        """Run a script once per argument list (calls independent of each other), at most
        CALLS_IN_FLIGHT at a time, each on its own connection, until a call answers
        ``stop_on``; the replies of the calls made, in order. Not one pipeline: Redis runs every
        complete command a client has sent before it serves the next client, so a pipeline of
        chunks would block other clients for all of it (measured: ~0.5 s for a 60,000-topic
        registration); two in flight hide the round trips and hold others up for two chunks at
        most. Across operations too: at most CHUNKS_IN_REDIS chunk calls of this store are in
        Redis at once (a registration storm: 60 registrations in one worker would otherwise
        queue 120 chunks ahead of every route read)."""
        replies: dict[int, tuple[str, list[Any]]] = {}
        pending = iter(enumerate(calls))
        stopped = False

        async def worker() -> None:
            nonlocal stopped
            for i, args in pending:
                if stopped:
                    return
                async with self._chunk_slots:
                    replies[i] = await self._call(name, args)
                stopped = stopped or replies[i][0] == stop_on

        await asyncio.gather(*(worker() for _ in range(min(CALLS_IN_FLIGHT, len(calls)))))
        return [replies[i] for i in sorted(replies)]

    # --- brokers -------------------------------------------------------------------------------

    def _encoded_table(self, reg: BrokerRegistration, delete_absent_topics: bool
                       ) -> tuple[list[Row], list[list[Any]], list[bytes], list[bytes], str]:
        """Validate ``reg`` and encode its topic table as the scripts take it: the rows, the
        static-topic mappings, both in chunks, and the digest taken over those chunks."""
        source = reg.topic_configs
        # The same table object again (a broker re-sending the bytes a front end remembers):
        # its checks and encoding are a pure function of it. Static topics depend on more.
        key = (id(source), delete_absent_topics)
        known = None if reg.topic_queue_mappings else self._tables.get(key)
        if known is not None and known[0] is source:
            reg.validated(known[1])
            return known[2], [], known[3], [], known[4]
        reg.validated()
        # Java files a mapping under its own bname; only storable topic names are kept.
        mappings = []
        for topic, raw in sorted(reg.topic_queue_mappings.items()):
            if validation.routable(topic):
                info = topic_queue_mapping_info(raw, reg.name or "")
                mappings.append([topic, info["bname"],
                                 json.dumps(info, separators=(",", ":"), sort_keys=True)])
        # Tuples of atoms, which the garbage collector stops tracking: the memo below holds a
        # row per topic of every table a worker sees.
        rows = [(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                 tc.topic_sys_flag) for tc in reg.topic_configs]
        n = self.chunk_rows
        topic_chunks = [_json(rows[i:i + n]) for i in range(0, len(rows), n)]
        mapping_chunks = [_json(mappings[i:i + n]) for i in range(0, len(mappings), n)]
        hasher = hashlib.blake2b(_flag(delete_absent_topics).encode(), digest_size=16)
        for text in (*topic_chunks, b"|", *mapping_chunks):
            hasher.update(text)
        digest = hasher.hexdigest()
        if not mappings and isinstance(source, tuple):
            checked = CheckedTopics(reg.topics_sent, reg.topic_configs, reg.dropped_topics)
            self._tables.put(key, (source, checked, rows, topic_chunks, digest), len(rows))
        return rows, mappings, topic_chunks, mapping_chunks, digest

    async def register_broker(self, reg: BrokerRegistration, *, delete_absent_topics: bool = False,
                              return_order_conf: bool = True,
                              connection: str | None = None) -> RegisterResult:
        """Register (RouteInfoManager.registerBroker). ``connection`` names the remoting
        connection it came over ("<worker>:<n>"), which then keeps the broker registered until
        it closes (``connection_closed``)."""
        if len(reg.topic_configs) > OFF_LOOP_TOPICS:
            table = await asyncio.to_thread(self._encoded_table, reg, delete_absent_topics)
        else:
            table = self._encoded_table(reg, delete_absent_topics)
        rows, mappings, topic_chunks, mapping_chunks, digest = table
        dv = reg.data_version
        timeout = reg.heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MS
        acting = "" if reg.enable_acting_master is None else str(reg.enable_acting_master).lower()
        filters = list(reg.filter_server_list) if reg.filter_server_list is not None else None

        def args(mode: str) -> list[Any]:
            full = mode == "full"
            return [reg.cluster, reg.addr, reg.name, reg.broker_id, reg.ha_server_addr or "",
                    reg.zone_name or "", timeout, acting, dv.counter, dv.timestamp,
                    dv.state_version, -1 if filters is None else len(filters),
                    len(rows) if full else 0, _flag(delete_absent_topics),
                    _flag(return_order_conf), reg.topics_sent, connection or "",
                    len(mappings), digest, mode, self.chunk_rows,
                    *(filters or ()), topic_chunks[0] if full and topic_chunks else "[]",
                    mapping_chunks[0] if full and mapping_chunks else "[]"]

        keys = [self.keys.kv_namespaces, self.keys.kv_table(ORDER_TOPIC_CONFIG)]
        # A big table is first offered as its digest: an unchanged re-registration (a broker's
        # every 30 s) then costs O(1) in Redis and sends no topics; otherwise it is sent whole,
        # in one call when it is small, else in chunks (``_register_in_chunks``).
        chunked = len(rows) + len(mappings) > self.chunk_rows
        mode = "probe" if chunked or len(rows) >= self.probe_min_topics else "full"
        for _ in range(5):  # "drain" answers are followed by a drain, then a retry
            if mode == "full" and chunked:
                mode = "head"
            status, rest = await self._call("register_broker", args(mode), keys)
            if status == "drain":
                await self.drain_cleanups(only=reg.name)
                continue
            if status == "full" or status == "chunk":
                mode = "head" if status == "chunk" else "full"
                continue
            break
        changed = False
        if status == "head":
            changed, rest = await self._register_in_chunks(
                reg, rest, rows, topic_chunks, mapping_chunks, digest, delete_absent_topics,
                return_order_conf)
        if status == "rejected":
            raise RegistrationRejected
        if status == "fenced":
            await self.drain_cleanups(only=reg.name)
            return RegisterResult(fenced=True, dropped_topics=reg.dropped_topics)
        if status not in ("ok", "head"):
            raise ScriptReplyError(f"register_broker: still {status!r} after draining")
        master, ha, generation, changed_flag, kv_flag, *kv = rest
        return RegisterResult(master_addr=master or None, ha_server_addr=ha or None,
                              kv_table=_pairs(kv) if kv_flag == "1" else None,
                              generation=int(generation), dropped_topics=reg.dropped_topics,
                              changed=changed or changed_flag == "1")

    async def _register_in_chunks(self, reg: BrokerRegistration, head: list[Any],
                                  rows: list[Row], topic_chunks: list[bytes],
                                  mapping_chunks: list[bytes], digest: str, delete_absent: bool,
                                  return_order_conf: bool) -> tuple[bool, list[Any]]:
        """After register_broker.lua's "head" call: the queue data in chunks of at most
        ``chunk_rows`` rows (register_topics.lua), the rows deleteTopicWithBroker-
        Registration drops likewise, then register_commit.lua. A worker dying half-way leaves the
        registration record "pending", so the broker's next registration does it all again.
        Returns (changed, the commit's answer after its status)."""
        generation, force, clear_write, writer, head_changed, fresh, epoch = head
        changed = head_changed == "1"
        base = [reg.cluster, reg.addr, reg.name, generation, force, clear_write]
        stale = False
        # The group's topicsEpoch as the chunks leave it, unless another writer changed a row
        # meanwhile: then the commit records no epoch and the next registration does it all.
        expected_epoch = int(epoch)
        # ... and as it would be had the chunks only added rows (which leaves the broker's other
        # recorded tables valid, lua/includes/tables.lua).
        added_epoch = int(epoch)
        if writer == "1":
            n = self.chunk_rows
            calls = [[*base, text, "[]", "[]", fresh] for text in topic_chunks]
            calls += [[*base, "[]", text, "[]", fresh] for text in mapping_chunks]
            # A "stale" chunk: a newer registration of the broker, or its removal, took over.
            for status, rest in await self._call_many("register_topics", calls, stop_on="stale"):
                stale = stale or status == "stale"
                if status == "ok":
                    changed = changed or rest[0] == "1"
                    expected_epoch += int(rest[1])
                    added_epoch += int(rest[2])
            if delete_absent and not stale:
                incoming = {r[0] for r in rows}
                absent = [t async for t in self.redis.sscan_iter(
                    self.keys.broker_topics(reg.name), count=1000) if t not in incoming]
                absent = sorted(set(absent))  # SSCAN may return a member twice
                calls = [[*base, "[]", "[]", _json(absent[i:i + n]), "0"]
                         for i in range(0, len(absent), n)]
                for status, rest in await self._call_many("register_topics", calls,
                                                          stop_on="stale"):
                    if status == "ok":
                        changed = changed or rest[0] == "1"
                        expected_epoch += int(rest[1])
        _, rest = await self._call(
            "register_commit", [reg.cluster, reg.addr, reg.name, reg.broker_id, generation, digest,
                                _flag(return_order_conf), expected_epoch,
                                _flag(force == "1" and writer == "1"), added_epoch],
            [self.keys.kv_namespaces, self.keys.kv_table(ORDER_TOPIC_CONFIG)])
        return changed, rest

    async def drain_cleanups(self, only: str | None = None) -> int:
        """Finish what cascades left to do in chunks: delete the queue rows of removed groups
        (P:idx:cleanups) and clear the write perm of acting-master groups that lost their master
        (P:idx:perm-clears); only group ``only``'s when given. ``chunk_rows`` rows per call;
        returns how many rows were deleted or changed. The sweep calls it too, so the work of a
        worker that died half-way is finished."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.smembers(self.keys.cleanups)
        pipe.hkeys(self.keys.perm_clears)
        cleanups, perm_clears = await pipe.execute()
        if only is not None:
            # A caller waits for its own group's rows, not for every group a mass departure
            # left to drain (each one's own caller, or the sweep, drains those).
            cleanups, perm_clears = ({only} & set(cleanups), {only} & set(perm_clears))
        done = 0
        for name in sorted(cleanups):
            left = 1
            while left:
                _, (count, left) = await self._call("drain_cleanup", [name, self.chunk_rows])
                done += int(count)
        for name in sorted(perm_clears):
            more = "1"
            while more == "1":
                _, (count, more) = await self._call("clear_write_perm", [name, self.chunk_rows])
                done += int(count)
        return done

    async def unregister_broker(self, cluster: str, addr: str, name: str, *,
                                closed_connection: str | None = None, drain: bool = True) -> int:
        """Remove a broker with the full cascade: 0 group kept, 1 group removed. With
        ``closed_connection``, only when no other connection it registered over is open:
        -1 when it was kept. Then the rows the cascade left to drain, unless ``drain`` is
        False (the caller drains them, ``drain_cleanups(only=name)``)."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        validation.name(name, "brokerName")
        status, rest = await self._call(
            "unregister_broker", [cluster, addr, name, closed_connection or "", self.chunk_rows])
        if status == "kept":
            return -1
        if rest[1] == "1" and drain:
            await self.drain_cleanups(only=name)
        return 1 if rest[0] == "1" else 0

    async def mark_worker_alive(self, worker: str, ttl_ms: int) -> None:
        """This worker is alive for ``ttl_ms`` more: its connections count as open."""
        await self.redis.set(self.keys.worker(worker), "1", px=ttl_ms)

    async def heartbeat(self, cluster: str, addr: str) -> bool:
        """Refresh a live broker's deadline; False when the broker is not live."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, _ = await self._call("heartbeat", [cluster, addr, "0"])
        return status == "ok"

    async def query_data_version(self, cluster: str, addr: str,
                                 dv: DataVersion) -> tuple[bool, DataVersion | None]:
        """(changed, stored DataVersion or None); also refreshes the deadline like Java 5.x."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, (changed, counter, ts, state) = await self._call(
            "heartbeat", [cluster, addr, "1", dv.counter, dv.timestamp, dv.state_version])
        stored = DataVersion(int(counter), int(ts), int(state)) if status == "ok" else None
        return changed == "1", stored

    async def sweep(self, *, now_ms: int | None = None, batch: int = 100,
                    guard_share: float = 0.0, guard_max_hold_ms: int = 120_000) -> SweepResult:
        """Expire up to ``batch`` brokers past their deadline as of ``now_ms`` (default: the
        Redis clock). With ``guard_share`` > 0, a sweep that would expire more than that share
        of the live brokers holds them, but never longer than ``guard_max_hold_ms`` past their
        deadline."""
        status, (due, live, cleanup, *flat) = await self._call(
            "sweep", ["" if now_ms is None else now_ms, batch, guard_share, guard_max_hold_ms,
                      self.chunk_rows])
        removed = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        if cleanup == "1":
            await self.drain_cleanups()
        return SweepResult(status == "held", int(due), int(live), removed)

    async def live_count_by_cluster(self) -> dict[str, int]:
        """How many brokers of each cluster are before their deadline (Redis clock)."""
        seconds, micros = await self.redis.time()
        members = await self.redis.zrangebyscore(self.keys.deadlines,
                                                 f"({seconds * 1000 + micros // 1000}", "+inf")
        return dict(Counter(m.split("\t", 1)[0] for m in members))

    async def live_brokers(self) -> list[LiveBroker]:
        """Every broker in the deadline set whose row is still live (admin broker-list)."""
        members = await self.redis.zrange(self.keys.deadlines, 0, -1)
        fields = ("cluster", "brokerAddr", "brokerName", "brokerId", "haServerAddr",
                  "lastUpdateTimestamp", "heartbeatTimeoutMillis", "dataVersionCounter",
                  "dataVersionTimestamp", "stateVersion", "zoneName")
        out: list[LiveBroker] = []
        for i in range(0, len(members), 500):
            pipe = self.redis.pipeline(transaction=False)
            for m in members[i:i + 500]:
                cluster, addr = m.split("\t", 1)
                pipe.hmget(self.keys.broker(cluster, addr), fields)
            for row in await pipe.execute():
                if row[0] is None:
                    continue
                out.append(LiveBroker(
                    row[0], row[1], row[2], int(row[3]), row[4], int(row[5]), int(row[6]),
                    DataVersion(int(row[7]), int(row[8]), int(row[9])), row[10] or None))
        return out

    # --- routes --------------------------------------------------------------------------------

    async def pickup_route(self, topic: str, *, order_conf: bool = False) -> RouteRead | None:
        """The topic's TopicRouteData, or None when no queue data or no live group remains."""
        validation.route_topic(topic)
        status, rest = await self._call("route", [topic, _flag(order_conf)],
                                        [self.keys.kv_table(ORDER_TOPIC_CONFIG)])
        if status == "none":
            return None
        rev, order_topic_conf, ttl, mappings, *groups = rest
        route = TopicRouteData(order_topic_conf=order_topic_conf or None,
                               topic_queue_mapping_by_broker={
                                   bname: topic_queue_mapping_info(json.loads(info), bname)
                                   for bname, info in _pairs(mappings).items()} or None)
        for name, cluster, acting, zone, rq, wq, perm, sysflag, addrs, filters in groups:
            route.queue_datas.append(QueueData(name, int(rq), int(wq), int(perm), int(sysflag)))
            route.broker_datas.append(BrokerData(cluster, name, _members(addrs), acting == "true",
                                                 zone or None))
            for addr, fs in _pairs(filters).items():
                route.filter_server_table[addr] = fs.split("\n")
        return RouteRead(route, int(rev), int(ttl))

    async def rev(self) -> int:
        return int(await self.redis.get(self.keys.rev) or 0)

    async def view_marker(self) -> ViewMarker:
        """The server and change counter now (see ViewMarker). The process id is read before
        and after the counter, so a restart in between never passes for the same server. A
        server that refuses INFO (some managed services; fakeredis) is known by the counter
        alone."""
        if isinstance(self.redis, RedisCluster):
            node = self.redis.get_node_from_key(self.keys.rev)
            before = await self._run_id(self.redis.info("server", target_nodes=node))
            rev = await self.redis.get(self.keys.rev)
            after = await self._run_id(self.redis.info("server", target_nodes=node))
        else:
            pipe = self.redis.pipeline(transaction=False)
            pipe.info("server")
            pipe.get(self.keys.rev)
            pipe.info("server")
            first, rev, last = await pipe.execute(raise_on_error=False)
            if isinstance(rev, Exception):
                raise rev
            before, after = _run_id(first), _run_id(last)
        # A restart between the two reads: a server no view can match.
        server = before if before == after else f"restarted:{uuid.uuid4().hex}"
        return ViewMarker(server, int(rev or 0))

    @staticmethod
    async def _run_id(info: Awaitable[Any]) -> str:
        try:
            return _run_id(await info)
        except ResponseError as exc:
            return _run_id(exc)

    # --- cluster tables ------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        _, (clusters, groups) = await self._call("cluster_info")
        info = ClusterInfo()
        for i in range(0, len(clusters), 2):
            info.cluster_addr_table[clusters[i]] = sorted(clusters[i + 1])
        for name, cluster, acting, zone, members in groups:
            info.broker_addr_table[name] = BrokerData(cluster, name, _members(members),
                                                      acting == "true", zone or None)
        return info

    async def broker_member_group(self, cluster: str, name: str) -> BrokerData:
        """GET_BROKER_MEMBER_GROUP: looked up by brokerName; clusterName is only echoed."""
        validation.name(name, "brokerName")
        flat = await self.redis.hgetall(self.keys.members(name))
        return BrokerData(cluster, name, {int(k): v for k, v in flat.items()})

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names plus one broker address (GET_SYSTEM_TOPIC_LIST_FROM_NS)."""
        info = await self.cluster_info()
        topics = sorted(set(info.cluster_addr_table) | set(info.broker_addr_table))
        addr = next((b.broker_addrs[min(b.broker_addrs)]
                     for _, b in sorted(info.broker_addr_table.items()) if b.broker_addrs), None)
        return topics, addr

    # --- topics --------------------------------------------------------------------------------

    async def all_topics(self) -> list[str]:
        return sorted(await self.redis.smembers(self.keys.topics))

    async def _topic_list(self, *args: str) -> list[str]:
        _, topics = await self._call("topic_list", args)
        return sorted(topics)

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        return await self._topic_list("cluster", cluster)

    async def unit_topics(self) -> list[str]:
        return await self._topic_list("unit")

    async def has_unit_sub_topics(self) -> list[str]:
        return await self._topic_list("unit-sub")

    async def has_unit_sub_ununit_topics(self) -> list[str]:
        return await self._topic_list("unit-sub-ununit")

    async def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        validation.route_topic(topic)
        if cluster:
            validation.name(cluster, "clusterName")
        # A topic served by many groups goes in several calls, each group's queue row whole.
        removed = 0
        while True:
            _, (count, left) = await self._call("delete_topic",
                                                [topic, cluster or "", self.chunk_rows])
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
        args: list[Any] = [topic]
        for i, q in enumerate(queue_datas):
            f = f"queueDatas[{i}]"
            validation.name(q.broker_name, f"{f}.brokerName")
            args.append(q.broker_name)
            for value, what in ((q.read_queue_nums, "readQueueNums"),
                                (q.write_queue_nums, "writeQueueNums"), (q.perm, "perm"),
                                (q.topic_sys_flag, "topicSysFlag")):
                args.append(validation.integer(value, f"{f}.{what}", validation.JAVA_INT_MIN,
                                               validation.JAVA_INT_MAX))
        _, (written,) = await self._call("register_topic", args)
        return int(written)

    async def _write_perm(self, name: str, op: str) -> int:
        """A group's write perm, ``chunk_rows`` topics per call; Java's count (the first call's:
        the topics the group had when the operation began)."""
        validation.name(name, "brokerName")
        _, (count, cursor) = await self._call("write_perm", [name, op, "0", self.chunk_rows])
        while cursor != "0":
            _, (_, cursor) = await self._call("write_perm", [name, op, cursor, self.chunk_rows])
        return int(count)

    async def wipe_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "wipe")

    async def add_write_perm(self, name: str) -> int:
        return await self._write_perm(name, "add")

    # --- KV config -----------------------------------------------------------------------------

    async def kv_put(self, namespace: str, key: str, value: str | None) -> bool:
        """Store a value; ``None`` is Java's null value (the namespace exists, the key is
        absent). True when something changed."""
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        k = self.keys
        _, (changed,) = await self._call(
            "kv_put", [namespace, key, value or "", _flag(namespace == ORDER_TOPIC_CONFIG),
                       _flag(value is None)],
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
            "kv_delete", [key, _flag(namespace == ORDER_TOPIC_CONFIG)],
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

    # --- the worker's own needs ----------------------------------------------------------------

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
