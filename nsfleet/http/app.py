"""The aiohttp application: routes, handlers and health endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from nsfleet import validation
from nsfleet.http import parse
from nsfleet.http.errors import ApiError, json_body, make_middleware
from nsfleet.http.openapi import openapi_document
from nsfleet.model import TopicRouteData
from nsfleet.nameserver import NameServer
from nsfleet.store import RegistrationRejected

NS_KEY = web.AppKey("nameserver", NameServer)
STATE_KEY = web.AppKey("state", dict)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def ok(obj: Any = None, status: int = 200) -> web.Response:
    return web.json_response({} if obj is None else obj, status=status, dumps=_dumps)


def _standard_route_json(route: TopicRouteData) -> bytes:
    return _dumps(route.to_dict()).encode()


def _ns(request: web.Request) -> NameServer:
    return request.app[NS_KEY]


# --- brokers -------------------------------------------------------------------------------------

async def register_broker(request: web.Request) -> web.Response:
    reg = parse.registration(await json_body(request))
    try:
        result = await _ns(request).register_broker(reg)
    except RegistrationRejected as exc:
        raise ApiError(409, f"{exc}: a single-topic registration from an unknown broker id",
                       1) from None
    return ok({"masterAddr": result.master_addr, "haServerAddr": result.ha_server_addr,
               "kvTable": result.kv_table, "registrationId": result.generation,
               "fenced": result.fenced})


async def heartbeat(request: web.Request) -> web.Response:
    cluster, addr, _, _ = parse.broker_identity(await json_body(request))
    found = await _ns(request).store.heartbeat(cluster, addr)
    return ok({"known": found})


async def query_data_version(request: web.Request) -> web.Response:
    body = await json_body(request)
    cluster, addr, _, _ = parse.broker_identity(body)
    dv = parse.data_version(parse.required(body, "dataVersion"))
    changed, stored = await _ns(request).store.query_data_version(cluster, addr, dv)
    return ok({"changed": changed, "dataVersion": stored.to_dict() if stored else None})


async def unregister_broker(request: web.Request) -> web.Response:
    cluster, addr, name, _ = parse.broker_identity(await json_body(request))
    outcome = await _ns(request).store.unregister_broker(cluster, addr, name)
    return ok({"groupRemoved": outcome == 1})


async def list_brokers(request: web.Request) -> web.Response:
    brokers = await _ns(request).store.live_brokers()
    return ok({"brokers": [b.to_dict() for b in sorted(
        brokers, key=lambda b: (b.cluster, b.broker_name, b.broker_id))]})


async def wipe_write_perm(request: web.Request) -> web.Response:
    name = validation.name(request.match_info["broker_name"], "brokerName")
    return ok({"wipeTopicCount": await _ns(request).store.wipe_write_perm(name)})


async def add_write_perm(request: web.Request) -> web.Response:
    name = validation.name(request.match_info["broker_name"], "brokerName")
    return ok({"addTopicCount": await _ns(request).store.add_write_perm(name)})


async def broker_member_group(request: web.Request) -> web.Response:
    name = validation.name(request.match_info["broker_name"], "brokerName")
    cluster = request.query.get("cluster", "")
    group = await _ns(request).store.broker_member_group(cluster, name)
    return ok({"brokerMemberGroup": {"cluster": group.cluster, "brokerName": group.broker_name,
                                     "brokerAddrs": {str(k): v for k, v in
                                                     sorted(group.broker_addrs.items())}}})


# --- routes and topics ---------------------------------------------------------------------------

def _wait_seconds(request: web.Request, limit: float) -> float:
    raw = request.query.get("wait")
    if raw is None:
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        raise validation.ValidationError("wait", f"{raw!r} is not a number of seconds") from None
    if not 0 <= wait <= limit:
        raise validation.ValidationError("wait", f"must be between 0 and {limit:g} seconds")
    return wait


async def get_route(request: web.Request) -> web.StreamResponse:
    """The topic's TopicRouteData. ETag is the topic's change counter; with If-None-Match and
    ?wait=S the request long-polls until the route changes (200) or S seconds pass (304)."""
    ns = _ns(request)
    topic = validation.topic(request.match_info["topic"])
    wait = _wait_seconds(request, ns.settings.long_poll_max)
    known = request.headers.get("If-None-Match", "").strip('W/"')
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    state = request.app[STATE_KEY]
    while True:
        answer = await ns.route(topic)
        etag = str(answer.rev) if answer else "0"
        remaining = deadline - loop.time()
        if known != etag or remaining <= 0 or state["draining"]:
            break
        await ns.cache.wait_for_change(topic, min(remaining, 1.0))
    if known == etag:
        return web.Response(status=304, headers={"ETag": f'"{etag}"'})
    if answer is None:
        raise ApiError(404, f"No topic route info in name server for the topic: {topic}", 17)
    body = answer.encoded("standard-json", _standard_route_json)
    return web.Response(body=body, content_type="application/json",
                        headers={"ETag": f'"{etag}"'})


async def cluster_info(request: web.Request) -> web.Response:
    return ok((await _ns(request).store.cluster_info()).to_dict())


def _topic_list(fetch: Callable[[NameServer], Any], gate: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        ns = _ns(request)
        getattr(ns, gate)()
        return ok({"topicList": await fetch(ns)})
    return handler


async def topics_by_cluster(request: web.Request) -> web.Response:
    ns = _ns(request)
    ns.check_topic_list()
    cluster = validation.name(request.match_info["cluster"], "cluster")
    return ok({"topicList": await ns.store.topics_by_cluster(cluster)})


async def system_topics(request: web.Request) -> web.Response:
    topics, addr = await _ns(request).store.system_topic_list()
    return ok({"topicList": topics, "brokerAddr": addr})


async def delete_topic(request: web.Request) -> web.Response:
    topic = validation.topic(request.match_info["topic"])
    cluster = request.query.get("cluster")
    if cluster is not None:
        validation.name(cluster, "cluster")
    removed = await _ns(request).store.delete_topic(topic, cluster)
    return ok({"removedQueueDatas": removed})


async def register_topic(request: web.Request) -> web.Response:
    topic = validation.topic(request.match_info["topic"])
    qds = parse.queue_datas(await json_body(request))
    written = await _ns(request).store.register_topic(topic, qds)
    return ok({"writtenQueueDatas": written})


# --- KV config -----------------------------------------------------------------------------------

async def kv_put(request: web.Request) -> web.Response:
    ns_, key = request.match_info["namespace"], request.match_info["key"]
    value = parse.string(await json_body(request), "value")
    assert value is not None
    changed = await _ns(request).store.kv_put(ns_, key, value)
    return ok({"changed": changed})


async def kv_get(request: web.Request) -> web.Response:
    ns_, key = request.match_info["namespace"], request.match_info["key"]
    value = await _ns(request).store.kv_get(ns_, key)
    if value is None:
        raise ApiError(404, f"No config item, Namespace: {ns_} Key: {key}", 22)
    return ok({"value": value})


async def kv_delete(request: web.Request) -> web.Response:
    ns_, key = request.match_info["namespace"], request.match_info["key"]
    return ok({"deleted": await _ns(request).store.kv_delete(ns_, key)})


async def kv_list(request: web.Request) -> web.Response:
    ns_ = request.match_info["namespace"]
    table = await _ns(request).store.kv_list(ns_)
    if table is None:
        raise ApiError(404, f"No config item, Namespace: {ns_}", 22)
    return ok({"table": table})


# --- health, metrics, docs -----------------------------------------------------------------------

async def livez(request: web.Request) -> web.Response:
    return ok({"status": "alive"})


async def readyz(request: web.Request) -> web.Response:
    ns, state = _ns(request), request.app[STATE_KEY]
    reasons = []
    if state["draining"]:
        reasons.append("draining")
    if not state["scripts_loaded"]:
        reasons.append("scripts not loaded")
    try:
        await asyncio.wait_for(ns.store.redis.ping(), 2.0)
    except Exception as exc:
        reasons.append(f"Redis unreachable: {exc or type(exc).__name__}")
    if reasons:
        return web.json_response({"code": 503, "error": "; ".join(reasons)}, status=503)
    return ok({"status": "ready"})


async def metrics(request: web.Request) -> web.Response:
    registry = _ns(request).metrics.registry
    return web.Response(body=generate_latest(registry),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    return ok(openapi_document())


def metrics_app(ns: NameServer) -> web.Application:
    """The optional metrics-only listener (--metrics-port)."""
    app = web.Application()
    app[NS_KEY] = ns
    app.router.add_get("/metrics", metrics)
    return app


def create_app(ns: NameServer, *, scripts_loaded: bool = True) -> web.Application:
    app = web.Application(middlewares=[make_middleware(ns.metrics)],
                          client_max_size=ns.settings.max_body_size)
    app[NS_KEY] = ns
    app[STATE_KEY] = {"draining": False, "scripts_loaded": scripts_loaded}
    r = app.router
    r.add_post("/v1/brokers/register", register_broker)
    r.add_post("/v1/brokers/heartbeat", heartbeat)
    r.add_post("/v1/brokers/query-data-version", query_data_version)
    r.add_post("/v1/brokers/unregister", unregister_broker)
    r.add_get("/v1/brokers", list_brokers)
    r.add_post("/v1/brokers/{broker_name}/wipe-write-perm", wipe_write_perm)
    r.add_post("/v1/brokers/{broker_name}/add-write-perm", add_write_perm)
    r.add_get("/v1/brokers/{broker_name}/members", broker_member_group)
    r.add_get("/v1/routes/{topic}", get_route)
    r.add_get("/v1/cluster-info", cluster_info)
    r.add_get("/v1/topics", _topic_list(lambda ns: ns.store.all_topics(), "check_all_topic_list"))
    r.add_get("/v1/topics/unit", _topic_list(lambda ns: ns.store.unit_topics(),
                                             "check_topic_list"))
    r.add_get("/v1/topics/unit-sub", _topic_list(lambda ns: ns.store.has_unit_sub_topics(),
                                                 "check_topic_list"))
    r.add_get("/v1/topics/unit-sub-ununit",
              _topic_list(lambda ns: ns.store.has_unit_sub_ununit_topics(), "check_topic_list"))
    r.add_get("/v1/topics/system", system_topics)
    r.add_get("/v1/clusters/{cluster}/topics", topics_by_cluster)
    r.add_delete("/v1/topics/{topic}", delete_topic)
    r.add_put("/v1/topics/{topic}", register_topic)
    r.add_put("/v1/kv/{namespace}/{key}", kv_put)
    r.add_get("/v1/kv/{namespace}/{key}", kv_get)
    r.add_delete("/v1/kv/{namespace}/{key}", kv_delete)
    r.add_get("/v1/kv/{namespace}", kv_list)
    r.add_get("/livez", livez)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    r.add_get("/openapi.json", openapi)
    return app
