"""The admin commands: each sends its requests through FleetHttp and returns an Output (the
worker's JSON for ``--json``, renderables for people)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from nsfleet.admin import tables
from nsfleet.client.http import FleetHttp, path
from nsfleet.client.queues import parse_order_conf
from nsfleet.domain.model import ORDER_TOPIC_CONFIG


@dataclass(slots=True)
class Output:
    data: Any
    show: list[RenderableType] = field(default_factory=list)


Command = Callable[[FleetHttp, argparse.Namespace], Awaitable[Output]]


async def _get(http: FleetHttp, *parts: str, **params: str) -> Any:
    return (await http.request("GET", path(*parts), params=params or None)).json()


async def cluster_list(http: FleetHttp, args: argparse.Namespace) -> Output:
    info = await _get(http, "v1", "cluster-info")
    live = (await _get(http, "v1", "brokers"))["brokers"]
    return Output(info, [tables.cluster_table(info, live)])


async def broker_list(http: FleetHttp, args: argparse.Namespace) -> Output:
    data = await _get(http, "v1", "brokers")
    return Output(data, [tables.broker_table(data["brokers"])])


async def topic_route(http: FleetHttp, args: argparse.Namespace) -> Output:
    route = await _get(http, "v1", "routes", args.topic)
    return Output(route, list(tables.route_tables(args.topic, route)))


async def topic_list(http: FleetHttp, args: argparse.Namespace) -> Output:
    if args.cluster:
        data = await _get(http, "v1", "clusters", args.cluster, "topics")
        title = f"Topics of cluster {args.cluster}"
    else:
        data = await _get(http, "v1", "topics")
        title = "Topics"
    return Output(data, [tables.list_table(title, "Topic", data["topicList"])])


async def topic_cluster_list(http: FleetHttp, args: argparse.Namespace) -> Output:
    route = await _get(http, "v1", "routes", args.topic)
    clusters = sorted({b["cluster"] for b in route.get("brokerDatas", [])})
    return Output({"clusterList": clusters},
                  [tables.list_table(f"Clusters of {args.topic}", "Cluster", clusters)])


async def delete_topic(http: FleetHttp, args: argparse.Namespace) -> Output:
    params = {"cluster": args.cluster} if args.cluster else None
    data = (await http.request("DELETE", path("v1", "topics", args.topic), params=params)).json()
    scope = f" in cluster {args.cluster}" if args.cluster else ""
    # mqadmin deleteTopic also deletes it on the brokers; without that, a broker's next
    # registration brings the topic back.
    return Output(data, [Text(f"deleted topic {args.topic}{scope}: "
                              f"{data['removedQueueDatas']} queue data removed")])


async def _kv_get(http: FleetHttp, namespace: str, key: str) -> Output:
    data = await _get(http, "v1", "kv", namespace, key)
    return Output(data, [Text(data["value"])])


async def _kv_put(http: FleetHttp, namespace: str, key: str, value: str) -> Output:
    reply = await http.request("PUT", path("v1", "kv", namespace, key), json_body={"value": value})
    data = reply.json()
    return Output(data, [Text(f"put {namespace} {key} = {value}"
                              + ("" if data.get("changed", True) else " (unchanged)"))])


async def _kv_delete(http: FleetHttp, namespace: str, key: str) -> Output:
    data = (await http.request("DELETE", path("v1", "kv", namespace, key))).json()
    return Output(data, [Text(f"deleted {namespace} {key}" if data.get("deleted")
                              else f"{namespace} {key} was not set")])


async def kv(http: FleetHttp, args: argparse.Namespace) -> Output:
    if args.kv_action == "get":
        return await _kv_get(http, args.namespace, args.key)
    if args.kv_action == "put":
        return await _kv_put(http, args.namespace, args.key, args.value)
    if args.kv_action == "delete":
        return await _kv_delete(http, args.namespace, args.key)
    data = await _get(http, "v1", "kv", args.namespace)
    rows = sorted(data["table"].items())
    return Output(data, [tables.pairs_table(f"KV namespace {args.namespace} ({len(rows)})",
                                            ("Key", "Value"), rows)])


async def order_conf(http: FleetHttp, args: argparse.Namespace) -> Output:
    if args.order_action == "get":
        return await _kv_get(http, ORDER_TOPIC_CONFIG, args.topic)
    if args.order_action == "put":
        # Checked here because a malformed value breaks every Java producer of the topic
        # (Integer.parseInt in topicRouteData2TopicPublishInfo); mqadmin does not check.
        if not parse_order_conf(args.conf):
            raise ValueError("orderConf is empty; expected brokerName:queueNums;...")
        return await _kv_put(http, ORDER_TOPIC_CONFIG, args.topic, args.conf)
    return await _kv_delete(http, ORDER_TOPIC_CONFIG, args.topic)


async def wipe_write_perm(http: FleetHttp, args: argparse.Namespace) -> Output:
    data = (await http.request("POST", path("v1", "brokers", args.broker,
                                            "wipe-write-perm"))).json()
    return Output(data, [Text(f"wiped the write perm of broker {args.broker} in "
                              f"{data['wipeTopicCount']} topics")])


async def add_write_perm(http: FleetHttp, args: argparse.Namespace) -> Output:
    data = (await http.request("POST", path("v1", "brokers", args.broker,
                                            "add-write-perm"))).json()
    return Output(data, [Text(f"added the write perm of broker {args.broker} in "
                              f"{data['addTopicCount']} topics")])


async def namesrv_config(http: FleetHttp, args: argparse.Namespace) -> Output:
    """getNamesrvConfig / updateNamesrvConfig (fleet-wide)."""
    if args.config_action == "get":
        data = await _get(http, "v1", "namesrv-config")
        return Output(data, [tables.pairs_table("NameServer config", ("Key", "Value"),
                                                sorted(data["config"].items()))])
    values = {}
    for pair in args.pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        values[key] = value
    data = (await http.request("PUT", path("v1", "namesrv-config"), json_body=values)).json()
    applied = data["applied"]
    ignored = sorted(set(values) - set(applied))
    lines = [Text(f"set {k} = {v}") for k, v in sorted(applied.items())]
    if ignored:
        lines.append(Text(f"ignored (unknown keys or values Java cannot parse): "
                          f"{', '.join(ignored)}"))
    return Output(data, lines)
