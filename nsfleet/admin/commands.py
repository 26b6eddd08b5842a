"""The admin commands: each asks through a NameService (HTTP or remoting) and returns an Output
(the HTTP API's JSON shapes for ``--json``, renderables for people)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from nsfleet.admin import tables
from nsfleet.client.http import ApiError
from nsfleet.client.name_service import NameService
from nsfleet.client.queues import parse_order_conf
from nsfleet.domain.model import ORDER_TOPIC_CONFIG


@dataclass(slots=True)
class Output:
    data: Any
    show: list[RenderableType] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # for stderr, with --json too
    failed: bool = False  # printed whole, then exit status 1 (a part of it was refused)


Command = Callable[[NameService, argparse.Namespace], Awaitable[Output]]


async def cluster_list(api: NameService, args: argparse.Namespace) -> Output:
    info = await api.cluster_info()
    live = await api.brokers() if api.heartbeats_known else []  # heartbeat ages over HTTP only
    return Output(info, [tables.cluster_table(info, live,
                                              heartbeats_known=api.heartbeats_known)])


async def broker_list(api: NameService, args: argparse.Namespace) -> Output:
    """Live brokers; over remoting without heartbeat ages and deadlines (no request has them)."""
    brokers = await api.brokers()
    return Output({"brokers": brokers}, [tables.broker_table(brokers)])


async def topic_route(api: NameService, args: argparse.Namespace) -> Output:
    route = await api.route(args.topic)
    return Output(route, list(tables.route_tables(args.topic, route)))


async def topic_list(api: NameService, args: argparse.Namespace) -> Output:
    topics = await api.topics(args.cluster)
    title = f"Topics of cluster {args.cluster}" if args.cluster else "Topics"
    return Output({"topicList": topics}, [tables.list_table(title, "Topic", topics)])


async def topic_cluster_list(api: NameService, args: argparse.Namespace) -> Output:
    route = await api.route(args.topic)
    clusters = sorted({b["cluster"] for b in route.get("brokerDatas", [])})
    return Output({"clusterList": clusters},
                  [tables.list_table(f"Clusters of {args.topic}", "Cluster", clusters)])


async def changes(api: NameService, args: argparse.Namespace) -> Output:
    """The fleet's recent changes, newest first (every worker's, from the shared history)."""
    data = await api.changes(args.limit)
    return Output(data, [tables.changes_table(data["changes"])])


async def delete_topic(api: NameService, args: argparse.Namespace) -> Output:
    removed = await api.delete_topic(args.topic, args.cluster)
    data = {"removedQueueDatas": removed}
    scope = f" in cluster {args.cluster}" if args.cluster else ""
    count = "" if removed is None else f": {removed} queue data removed"
    # mqadmin deleteTopic also deletes it on the brokers; without that, a broker's next
    # registration brings the topic back.
    return Output(data, [Text(f"deleted topic {args.topic}{scope}{count}")])


async def _kv_put(api: NameService, namespace: str, key: str, value: str) -> Output:
    changed = await api.kv_put(namespace, key, value)
    return Output({"changed": changed}, [Text(f"put {namespace} {key} = {value}"
                                              + (" (unchanged)" if changed is False else ""))])


async def _kv_delete(api: NameService, namespace: str, key: str) -> Output:
    deleted = await api.kv_delete(namespace, key)
    return Output({"deleted": deleted}, [Text(f"{namespace} {key} was not set" if deleted is False
                                              else f"deleted {namespace} {key}")])


async def _kv_get(api: NameService, namespace: str, key: str) -> Output:
    value = await api.kv_get(namespace, key)
    return Output({"value": value}, [Text(value)])


async def kv(api: NameService, args: argparse.Namespace) -> Output:
    if args.kv_action == "get":
        return await _kv_get(api, args.namespace, args.key)
    if args.kv_action == "put":
        return await _kv_put(api, args.namespace, args.key, args.value)
    if args.kv_action == "delete":
        return await _kv_delete(api, args.namespace, args.key)
    table = await api.kv_table(args.namespace)
    rows = sorted(table.items())
    title = f"KV namespace {args.namespace} ({len(rows)})"
    return Output({"table": table}, [tables.pairs_table(title, ("Key", "Value"), rows)])


async def order_conf(api: NameService, args: argparse.Namespace) -> Output:
    if args.order_action == "get":
        return await _kv_get(api, ORDER_TOPIC_CONFIG, args.topic)
    if args.order_action == "put":
        # Checked here because a malformed value breaks every Java producer of the topic
        # (Integer.parseInt in topicRouteData2TopicPublishInfo); mqadmin does not check.
        named = [name for name, _ in parse_order_conf(args.conf)]
        if not named:
            raise ValueError("orderConf is empty; expected brokerName:queueNums;...")
        serving = await _groups_serving(api, args.topic)
        out = await _kv_put(api, ORDER_TOPIC_CONFIG, args.topic, args.conf)
        strays = [name for name in named if name not in serving]
        if strays:
            # Stored all the same, as Java's NameServer and mqadmin updateOrderConf store it:
            # the groups may register the topic later.
            out.warnings.append(
                f"{', '.join(strays)} {'does' if len(strays) == 1 else 'do'} not serve topic "
                f"{args.topic} now (it is on {', '.join(sorted(serving)) or 'no broker group'}); "
                "ordered producers get no queues there until it does. Stored anyway, as Java's "
                "NameServer does")
        return out
    return await _kv_delete(api, ORDER_TOPIC_CONFIG, args.topic)


async def _groups_serving(api: NameService, topic: str) -> set[str]:
    """The broker groups with queue data for ``topic`` (none when it has no route)."""
    try:
        route = await api.route(topic)
    except ApiError as exc:
        if exc.status == 404:
            return set()
        raise
    return {q["brokerName"] for q in route.get("queueDatas", [])}


async def wipe_write_perm(api: NameService, args: argparse.Namespace) -> Output:
    count = await _write_perm(api, args.broker, wipe=True)
    return Output({"wipeTopicCount": count}, [Text(
        f"wiped the write perm of broker {args.broker} in {count} topics")])


async def add_write_perm(api: NameService, args: argparse.Namespace) -> Output:
    count = await _write_perm(api, args.broker, wipe=False)
    return Output({"addTopicCount": count}, [Text(
        f"added the write perm of broker {args.broker} in {count} topics")])


async def _write_perm(api: NameService, broker: str, wipe: bool) -> int:
    """An nsfleet worker's HTTP API refuses a group no broker registered (404). The remoting
    answer is Java's, a count of 0 for an unknown name as for a group without topics, so a
    count of 0 is checked against the cluster info, which lists every registered group."""
    count = await api.write_perm(broker, wipe=wipe)
    if not count and broker not in (await api.cluster_info()).get(
            "brokerAddrTable", {}):
        raise ValueError(f"no broker group {broker} is registered: nothing changed (check the "
                         "name: nsfleet admin cluster-list)")
    return count


async def namesrv_config(api: NameService, args: argparse.Namespace) -> Output:
    """getNamesrvConfig / updateNamesrvConfig (fleet-wide on nsfleet)."""
    if args.config_action == "get":
        config = dict(sorted((await api.config()).items()))
        return Output({"config": config}, [tables.pairs_table(
            "NameServer config", ("Key", "Value"), sorted(config.items()))])
    values = {}
    for pair in args.pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        values[key] = value
    if api.protocol == "remoting":
        # Java ignores unknown keys without a word; the keys it has are those it lists.
        known = await api.config()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(unknown)} (the NameServer's config "
                             "lists no such key); nothing sent")
    applied = await api.config_set(values)
    data = {"applied": applied}
    if applied is None:  # the remoting answer does not say
        return Output(data, [Text(f"sent {k} = {v}") for k, v in sorted(values.items())])
    out = Output(data, [Text(f"set {k} = {v}") for k, v in sorted(applied.items())])
    unparsed = sorted(set(values) - set(applied))
    if unparsed:  # an unknown key is refused by the worker: these are values
        out.warnings.append(
            "not applied, as Java does not apply a value it cannot parse (the key keeps its "
            f"value): {', '.join(f'{k}={values[k]}' for k in unparsed)}")
    return out
