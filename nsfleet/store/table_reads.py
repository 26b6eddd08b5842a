"""Reading the tables: a topic's route (route.lua, one round trip), cluster info, the topic lists,
the live brokers, and the view marker a worker's cache proves its coherence with after an
outage."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from nsfleet.domain import validation
from nsfleet.domain.model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    LiveBroker,
    TopicRouteData,
    topic_queue_mapping_info,
)
from nsfleet.store import scripts
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.replies import Status
from nsfleet.store.route_parts import GroupPart, RouteParts
from nsfleet.store.script_calls import ScriptCalls, flag, member_addrs, pairs


class RouteRead(msgspec.Struct, gc=False):
    """A route as read from Redis, with what a cache needs to know about it (untracked by the
    garbage collector, as the route is: see nsfleet.domain.model)."""

    route: TopicRouteData
    ttl_ms: int  # until the first listed member's deadline; the route may change then


@dataclass(frozen=True, slots=True)
class ViewMarker:
    """What a worker's cached view is coherent with: the Redis process that held the tables
    (its ``run_id``: a restart or a promoted replica changes it) and the change counter
    ``P:rev`` of the last change the worker applied."""

    server: str
    rev: int


TopicListMode = Literal["cluster", "unit", "unit-sub", "unit-sub-ununit"]


def _run_id(info: Any) -> str:
    """INFO server's run_id; "" when the server refused INFO."""
    return "" if isinstance(info, Exception) else str(info.get("run_id", ""))


@translating_redis_errors
class TableReads:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls
        self._keys = calls.keys
        self._parts = RouteParts()

    async def live_count_by_cluster(self) -> dict[str, int]:
        """How many brokers of each cluster are before their deadline (Redis clock)."""
        seconds, micros = await self._calls.redis.time()
        members = await self._calls.redis.zrangebyscore(self._keys.deadlines,
                                                 f"({seconds * 1000 + micros // 1000}", "+inf")
        return dict(Counter(m.split("\t", 1)[0] for m in members))

    async def live_brokers(self) -> list[LiveBroker]:
        """Every broker in the deadline set whose row is still live (admin broker-list)."""
        members = await self._calls.redis.zrange(self._keys.deadlines, 0, -1)
        fields = ("cluster", "brokerAddr", "brokerName", "brokerId", "haServerAddr",
                  "lastUpdateTimestamp", "heartbeatTimeoutMillis", "dataVersionCounter",
                  "dataVersionTimestamp", "stateVersion", "zoneName")
        out: list[LiveBroker] = []
        for i in range(0, len(members), 500):
            pipe = self._calls.redis.pipeline(transaction=False)
            for m in members[i:i + 500]:
                cluster, addr = m.split("\t", 1)
                pipe.hmget(self._keys.broker(cluster, addr), fields)
            for row in await pipe.execute():
                if row[0] is None:
                    continue
                out.append(LiveBroker(
                    row[0], row[1], row[2], int(row[3]), row[4], int(row[5]), int(row[6]),
                    DataVersion(int(row[7]), int(row[8]), int(row[9])), row[10] or None))
        return out

    async def pickup_route(self, topic: str, *, order_conf: bool = False) -> RouteRead | None:
        """The topic's TopicRouteData, or None when no queue data or no live group remains.
        route.lua reads the parts in one round trip; they are put together here, in the worker,
        as the script's header describes (workers scale out, Redis does not)."""
        validation.route_topic(topic)
        status, rest = await self._calls.call("route", scripts.RouteArgs(topic, flag(order_conf)),
                                        [self._keys.kv_table(ORDER_TOPIC_CONFIG)])
        if status is Status.NONE:
            return None
        order_topic_conf, mappings, rows, entries, now, first, deadlines, filters = rest
        route = TopicRouteData(order_topic_conf=order_topic_conf or None)
        now = int(now)
        # No deadline read: no broker is past its deadline, none before `first` (route.lua).
        every_live = not deadlines
        min_ttl = int(float(first)) - now if every_live and first else -1
        parts = self._parts
        split = rows.split("\n")
        names, values = split[0::2], split[1::2]
        groups = [parts.group(name, entry) for name, entry in zip(names, entries.split("\r"),
                                                                   strict=True)]
        # Groups by name, as Java's route lists them.
        order = sorted(range(len(names)), key=names.__getitem__)
        if every_live and not filters:
            for n in order:
                group = groups[n]
                if group.broker is not None:
                    route.broker_datas.append(group.broker)
                    route.queue_datas.append(parts.queue(names[n], values[n], group,
                                                         group.broker.broker_addrs))
        else:
            min_ttl = self._live_members(route, names, values, groups, order, now, min_ttl,
                                         deadlines, filters)
        if not route.broker_datas:
            return None
        route.topic_queue_mapping_by_broker = {
            bname: topic_queue_mapping_info(json.loads(info), bname)
            for bname, info in pairs(mappings).items()} or None
        return RouteRead(route, min_ttl)

    def _live_members(self, route: TopicRouteData, names: list[str], values: list[str],
                      groups: list[GroupPart], order: list[int], now: int, min_ttl: int,
                      deadlines: list[str | None], filters: list[str | None]) -> int:
        """Fills ``route`` with the members still live (``deadlines``: each member's, in the
        script's order; [] when every member is) and their filter servers; returns the route's
        ttl (ms, -1: none)."""
        member_deadlines = iter(deadlines)
        member_filters = iter(filters)
        # Per group, in the script's order: its live members, and those members' filter servers.
        live: list[tuple[dict[int, str], list[tuple[str, str]]]] = []
        for group in groups:
            addrs: dict[int, str] = {}
            listed: list[tuple[str, str]] = []
            for member_id, addr in group.members:
                fs = next(member_filters) if filters else None
                if deadlines:
                    deadline = next(member_deadlines)
                    ttl = -1 if deadline is None else int(float(deadline)) - now
                    if ttl < 0:
                        continue
                    min_ttl = ttl if min_ttl < 0 else min(min_ttl, ttl)
                addrs[member_id] = addr
                if fs:
                    listed.append((addr, fs))
            live.append((addrs, listed))
        # An address two groups list shows the filter servers it has under the later one's
        # cluster (Java: one map put per member, in order).
        for n in order:
            addrs, listed = live[n]
            if not addrs:
                continue
            group = groups[n]
            route.queue_datas.append(self._parts.queue(names[n], values[n], group, addrs))
            route.broker_datas.append(self._parts.broker(names[n], group, addrs))
            for addr, fs in listed:
                route.filter_server_table[addr] = fs.split("\n")
        return min_ttl

    async def rev(self) -> int:
        return int(await self._calls.redis.get(self._keys.rev) or 0)

    async def view_marker(self) -> ViewMarker:
        """The server and change counter now (see ViewMarker). The process id is read before
        and after the counter, so a restart in between never passes for the same server. A
        server that refuses INFO (some managed services; fakeredis) is known by the counter
        alone."""
        redis = self._calls.redis
        if isinstance(redis, RedisCluster):
            node = redis.get_node_from_key(self._keys.rev)
            before = await self._run_id(redis.info("server", target_nodes=node))
            rev = await redis.get(self._keys.rev)
            after = await self._run_id(redis.info("server", target_nodes=node))
        else:
            pipe = redis.pipeline(transaction=False)
            pipe.info("server")
            pipe.get(self._keys.rev)
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

    async def cluster_info(self) -> ClusterInfo:
        _, (clusters, groups) = await self._calls.call("cluster_info", scripts.ClusterInfoArgs())
        info = ClusterInfo()
        for i in range(0, len(clusters), 2):
            info.cluster_addr_table[clusters[i]] = sorted(clusters[i + 1])
        for name, cluster, acting, zone, members in groups:
            info.broker_addr_table[name] = BrokerData(cluster, name, member_addrs(members),
                                                      acting == "true", zone or None)
        return info

    async def broker_member_group(self, cluster: str, name: str) -> BrokerData:
        """GET_BROKER_MEMBER_GROUP: looked up by brokerName; clusterName is only echoed."""
        validation.name(name, "brokerName")
        flat = await self._calls.redis.hgetall(self._keys.members(name))
        return BrokerData(cluster, name, {int(k): v for k, v in flat.items()})

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names plus one broker address (GET_SYSTEM_TOPIC_LIST_FROM_NS)."""
        info = await self.cluster_info()
        topics = sorted(set(info.cluster_addr_table) | set(info.broker_addr_table))
        addr = next((b.broker_addrs[min(b.broker_addrs)]
                     for _, b in sorted(info.broker_addr_table.items()) if b.broker_addrs), None)
        return topics, addr

    async def all_topics(self) -> list[str]:
        return sorted(await self._calls.redis.smembers(self._keys.topics))

    async def topic_list(self, mode: TopicListMode, cluster: str = "") -> list[str]:
        """The topics of ``cluster`` ("cluster"), or those whose first queue data carries the
        unit flags of ``mode`` (GET_UNIT_TOPIC_LIST and the two HAS_UNIT_SUB lists)."""
        _, topics = await self._calls.call("topic_list", scripts.TopicListArgs(mode, cluster))
        return sorted(topics)
