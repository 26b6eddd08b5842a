"""The aiohttp application: routes, handlers and health endpoints."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from nsfleet.domain.errors import NameServerError, TopicRouteNotFound, ValidationError
from nsfleet.http import address_routes, controller_routes, parse
from nsfleet.http.errors import make_middleware
from nsfleet.http.openapi import openapi_document
from nsfleet.runtime.table_thread import OFF_LOOP_BODY_BYTES, in_table_thread
from nsfleet.service.address_server import AddressServer
from nsfleet.service.nameserver import NameServer
from nsfleet.service.route_reads import ABSENT_ETAG, RouteAnswer, standard_route_json


@dataclass(frozen=True)
class HttpOptions:
    """What the HTTP front end needs of the worker's settings, handed over by the wiring."""

    max_body_size: int = 16 * 1024 * 1024
    long_poll_max: float = 30.0  # longest wait, in seconds, a long-poll may ask for
    ui: bool = True  # the read-only console at /ui


NS_KEY = web.AppKey("nameserver", NameServer)
OPTIONS_KEY = web.AppKey("options", HttpOptions)
STATE_KEY = web.AppKey("state", dict)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def ok(obj: Any = None, status: int = 200) -> web.Response:
    return web.json_response({} if obj is None else obj, status=status, dumps=_dumps)


def _ns(request: web.Request) -> NameServer:
    return request.app[NS_KEY]


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if len(raw) > OFF_LOOP_BODY_BYTES:
        return await in_table_thread(parse.json_object, raw)
    return parse.json_object(raw)


# --- brokers -------------------------------------------------------------------------------------

async def register_broker(request: web.Request) -> web.Response:
    raw = await request.read()
    if len(raw) > OFF_LOOP_BODY_BYTES:
        reg = await in_table_thread(parse.registration_bytes, raw)
    else:
        reg = parse.registration_bytes(raw)
    result = await _ns(request).register_broker(reg)
    return ok({"masterAddr": result.master_addr, "haServerAddr": result.ha_server_addr,
               "kvTable": result.kv_table, "registrationId": result.generation,
               "fenced": result.fenced,
               "droppedTopics": [{"topic": d.topic, "reason": d.reason}
                                 for d in result.dropped_topics]})


async def heartbeat(request: web.Request) -> web.Response:
    cluster, addr, _ = parse.broker_identity(await _body(request))
    return ok({"known": await _ns(request).heartbeat(cluster, addr)})


async def query_data_version(request: web.Request) -> web.Response:
    body = await _body(request)
    cluster, addr, _ = parse.broker_identity(body)
    changed, stored = await _ns(request).query_data_version(cluster, addr,
                                                            parse.data_version(body))
    return ok({"changed": changed, "dataVersion": stored.to_dict() if stored else None})


async def unregister_broker(request: web.Request) -> web.Response:
    cluster, addr, name = parse.broker_identity(await _body(request))
    outcome = await _ns(request).unregister_broker(cluster, addr, name)
    return ok({"groupRemoved": outcome == 1})


async def list_brokers(request: web.Request) -> web.Response:
    return ok({"brokers": [b.to_dict() for b in await _ns(request).live_brokers()]})


async def wipe_write_perm(request: web.Request) -> web.Response:
    name = request.match_info["broker_name"]
    return ok({"wipeTopicCount": await _ns(request).wipe_write_perm(name, known_only=True)})


async def add_write_perm(request: web.Request) -> web.Response:
    name = request.match_info["broker_name"]
    return ok({"addTopicCount": await _ns(request).add_write_perm(name, known_only=True)})


async def broker_member_group(request: web.Request) -> web.Response:
    name = request.match_info["broker_name"]
    addrs = await _ns(request).broker_member_group(name)
    return ok({"brokerMemberGroup": {"cluster": request.query.get("cluster", ""),
                                     "brokerName": name,
                                     "brokerAddrs": {str(k): v for k, v in
                                                     sorted(addrs.items())}}})


# --- routes and topics ---------------------------------------------------------------------------

def _wait_seconds(request: web.Request, limit: float) -> float:
    raw = request.query.get("wait")
    if raw is None:
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        raise ValidationError("wait", f"{raw!r} is not a number of seconds") from None
    if not 0 <= wait <= limit:
        raise ValidationError("wait", f"must be between 0 and {limit:g} seconds")
    return wait


def _cached_answer(ns: NameServer, topic: str, known: str, wait: float) -> RouteAnswer | None:
    """The answer ``route_change`` would give at once, when the route cache holds it and no
    long-poll is asked for (no wait, or the client's ETag is already stale); else None, and
    the full path answers (and raises whatever error applies)."""
    try:
        answer = ns.cached_route(topic)
    except NameServerError:
        return None
    if answer is None or (wait and answer.etag == known):
        return None
    return answer


async def get_route(request: web.Request) -> web.StreamResponse:
    """The topic's TopicRouteData. ETag is a digest of the body; with If-None-Match and
    ?wait=S the request long-polls until the route changes (200) or S seconds pass (304)."""
    ns = _ns(request)
    topic = request.match_info["topic"]
    wait = _wait_seconds(request, request.app[OPTIONS_KEY].long_poll_max)
    known = request.headers.get("If-None-Match", "").strip('W/"')
    answer = _cached_answer(ns, topic, known, wait)
    if answer is None:
        state = request.app[STATE_KEY]
        answer = await ns.route_change(topic, known, wait, lambda: state["draining"])
    etag = answer.etag if answer else ABSENT_ETAG
    if known == etag:
        return web.Response(status=304, headers={"ETag": f'"{etag}"'})
    if answer is None:
        raise TopicRouteNotFound(topic)
    body = answer.encoded("standard-json", standard_route_json)
    return web.Response(body=body, content_type="application/json",
                        headers={"ETag": f'"{etag}"'})


MAX_WATCHED_TOPICS = 10_000


async def watch_routes(request: web.Request) -> web.StreamResponse:
    """Long-poll many topics: body ``{"topics": {topic: etag or null}}``; answers the topics
    whose ETag differs (``{"routes": {topic: {"etag", "route" or null}}}``) as soon as one does,
    or 304 when none did within ``?wait=S``."""
    ns = _ns(request)
    wait = _wait_seconds(request, request.app[OPTIONS_KEY].long_poll_max)
    known = parse.watched_topics(await _body(request), MAX_WATCHED_TOPICS)
    state = request.app[STATE_KEY]
    changed = await ns.watch_routes(known, wait, lambda: state["draining"])
    if not changed:
        return web.Response(status=304)
    parts = []
    for topic, answer in sorted(changed.items()):
        etag = answer.etag if answer else ABSENT_ETAG
        body = answer.encoded("standard-json", standard_route_json) if answer else b"null"
        parts.append(b'%s:{"etag":%s,"route":%s}' % (
            _dumps(topic).encode(), _dumps(etag).encode(), body))
    return web.Response(body=b'{"routes":{' + b",".join(parts) + b"}}",
                        content_type="application/json")


async def cluster_info(request: web.Request) -> web.Response:
    return ok((await _ns(request).cluster_info()).to_dict())


def _topic_list(fetch: Callable[[NameServer], Awaitable[list[str]]]) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return ok({"topicList": await fetch(_ns(request))})
    return handler


async def topics_by_cluster(request: web.Request) -> web.Response:
    topics = await _ns(request).topics_by_cluster(request.match_info["cluster"])
    return ok({"topicList": topics})


async def system_topics(request: web.Request) -> web.Response:
    topics, addr = await _ns(request).system_topic_list()
    return ok({"topicList": topics, "brokerAddr": addr})


async def delete_topic(request: web.Request) -> web.Response:
    removed = await _ns(request).delete_topic(request.match_info["topic"],
                                              request.query.get("cluster"))
    return ok({"removedQueueDatas": removed})


async def register_topic(request: web.Request) -> web.Response:
    qds = parse.queue_datas(await _body(request))
    written = await _ns(request).create_topic(request.match_info["topic"], qds)
    return ok({"writtenQueueDatas": written})


# --- KV config -----------------------------------------------------------------------------------

async def kv_put(request: web.Request) -> web.Response:
    value = parse.string(await _body(request), "value")
    if value is None:
        raise ValidationError("value", "is required")
    changed = await _ns(request).kv_put(request.match_info["namespace"],
                                        request.match_info["key"], value)
    return ok({"changed": changed})


async def kv_get(request: web.Request) -> web.Response:
    value = await _ns(request).kv_get(request.match_info["namespace"], request.match_info["key"])
    return ok({"value": value})


async def kv_delete(request: web.Request) -> web.Response:
    deleted = await _ns(request).kv_delete(request.match_info["namespace"],
                                           request.match_info["key"])
    return ok({"deleted": deleted})


async def kv_list(request: web.Request) -> web.Response:
    return ok({"table": await _ns(request).kv_list(request.match_info["namespace"])})


# --- NameServer config ---------------------------------------------------------------------------

async def get_namesrv_config(request: web.Request) -> web.Response:
    return ok({"config": _ns(request).config_values()})


async def update_namesrv_config(request: web.Request) -> web.Response:
    values = parse.config_values(await _body(request))
    return ok({"applied": await _ns(request).update_config_values(values, known_only=True)})


# --- the fleet at a glance (the console) ---------------------------------------------------------

UI_DIR = Path(__file__).parent / "ui"


MAX_CHANGES = 1000  # history entries one request may ask for
STREAM_ID = re.compile(r"\d{1,20}-\d{1,20}")


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(name, f"{raw!r} is not an integer") from None
    if not low <= value <= high:
        raise ValidationError(name, f"must be between {low} and {high}")
    return value


async def fleet_changes(request: web.Request) -> web.Response:
    """With ?since=N: long-poll the fleet's change counter. Without: the counter and the fleet's
    recent changes, newest first (?limit=N, ?before=ID for the next page)."""
    ns = _ns(request)
    if "since" not in request.query:
        limit = _int_param(request, "limit", 100, 1, MAX_CHANGES)
        before = request.query.get("before") or None
        if before is not None and not STREAM_ID.fullmatch(before):
            raise ValidationError("before", f"{before[:40]!r} is not a change id (ms-seq)")
        rev = await ns.fleet_changes(0, 0)
        changes = await ns.recent_changes(limit, before)
        return ok({"rev": rev, "changes": [c.to_dict() for c in changes]})
    raw = request.query["since"]
    try:
        since = int(raw)
    except ValueError:
        raise ValidationError("since", f"{raw!r} is not a change counter") from None
    wait = _wait_seconds(request, request.app[OPTIONS_KEY].long_poll_max)
    return ok({"rev": await ns.fleet_changes(since, wait)})


async def topic_summary(request: web.Request) -> web.Response:
    resp = web.Response(body=await _ns(request).topic_summary(),
                        content_type="application/json")
    resp.enable_compression()  # ~60 bytes a topic: gzip takes a 10,000-topic answer to a tenth
    return resp


async def kv_namespaces(request: web.Request) -> web.Response:
    return ok({"namespaces": await _ns(request).kv_namespaces()})


async def status(request: web.Request) -> web.Response:
    return ok(_ns(request).status())


async def ui_index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(UI_DIR / "index.html")


async def favicon(request: web.Request) -> web.FileResponse:
    return web.FileResponse(UI_DIR / "favicon.ico")


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
    store_up = 0
    # While a stale view is served the store is probably away: answer within a probe's timeout.
    limit = 2.0 if ns.stale_age() is None else 0.5
    store_error = ""
    try:
        async with asyncio.timeout(limit):
            await ns.check_store()
        store_up = 1
    except NameServerError as exc:
        store_error = exc.remark
    except TimeoutError:
        store_error = f"Redis unavailable: no answer within {limit:g} s"
    ns.metrics.store_up.set(store_up)
    age = ns.stale_age() if store_error else None
    if store_error and age is None:
        reasons.append(store_error)
    ns.metrics.ready.set(0 if reasons else 1)
    if reasons:
        return web.json_response({"code": 503, "error": "; ".join(reasons)}, status=503)
    # serve --processes N: which process answered ("process" slot and "pid"), each for itself
    who = state.get("process", {})
    if age is not None:
        # Ready while it can serve: the routes it holds are answered, marked stale.
        left = ns.stale_serve_max - age
        return ok({"status": "ready", **who, "stale": True,
                   "staleSeconds": round(age, 1), "staleRoutes": ns.stale_routes,
                   "reason": f"{store_error}; serving this worker's last coherent view "
                             f"({ns.stale_routes} routes, {age:.0f} s old) for {left:.0f} s "
                             "more at most"})
    return ok({"status": "ready", **who})


async def metrics(request: web.Request) -> web.Response:
    ns_metrics = _ns(request).metrics
    body = (generate_latest(ns_metrics.registry) if ns_metrics.exposition is None
            else await ns_metrics.exposition())  # every process of serve --processes
    return web.Response(body=body,
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi(request: web.Request) -> web.Response:
    return ok(openapi_document())


def metrics_app(ns: NameServer) -> web.Application:
    """The optional metrics-only listener (--metrics-port)."""
    app = web.Application()
    app[NS_KEY] = ns
    app.router.add_get("/metrics", metrics)
    return app


def create_app(ns: NameServer, *, options: HttpOptions = HttpOptions(),
               scripts_loaded: bool = True,
               addresses: AddressServer | None = None) -> web.Application:
    """The application; with ``addresses``, the address server (``/rocketmq/...``) too."""
    app = web.Application(middlewares=[make_middleware(ns.metrics)],
                          client_max_size=options.max_body_size)
    app[NS_KEY] = ns
    app[OPTIONS_KEY] = options
    app[STATE_KEY] = {"draining": False, "scripts_loaded": scripts_loaded}
    if addresses is not None:
        address_routes.add_routes(app, addresses)
    r = app.router
    r.add_post("/v1/brokers/register", register_broker)
    r.add_post("/v1/brokers/heartbeat", heartbeat)
    r.add_post("/v1/brokers/query-data-version", query_data_version)
    r.add_post("/v1/brokers/unregister", unregister_broker)
    r.add_get("/v1/brokers", list_brokers)
    r.add_post("/v1/brokers/{broker_name}/wipe-write-perm", wipe_write_perm)
    r.add_post("/v1/brokers/{broker_name}/add-write-perm", add_write_perm)
    r.add_get("/v1/brokers/{broker_name}/members", broker_member_group)
    r.add_post("/v1/routes/watch", watch_routes)
    r.add_get("/v1/routes/{topic}", get_route)
    r.add_get("/v1/cluster-info", cluster_info)
    r.add_get("/v1/topics", _topic_list(NameServer.all_topics))
    r.add_get("/v1/topics/unit", _topic_list(NameServer.unit_topics))
    r.add_get("/v1/topics/unit-sub", _topic_list(NameServer.has_unit_sub_topics))
    r.add_get("/v1/topics/unit-sub-ununit", _topic_list(NameServer.has_unit_sub_ununit_topics))
    r.add_get("/v1/topics/system", system_topics)
    r.add_get("/v1/topics/summary", topic_summary)
    r.add_get("/v1/clusters/{cluster}/topics", topics_by_cluster)
    r.add_delete("/v1/topics/{topic}", delete_topic)
    r.add_put("/v1/topics/{topic}", register_topic)
    r.add_put("/v1/kv/{namespace}/{key}", kv_put)
    r.add_get("/v1/kv/{namespace}/{key}", kv_get)
    r.add_delete("/v1/kv/{namespace}/{key}", kv_delete)
    r.add_get("/v1/kv/{namespace}", kv_list)
    r.add_get("/v1/changes", fleet_changes)
    r.add_get("/v1/kv", kv_namespaces)
    r.add_get("/v1/status", status)
    controller_routes.add_routes(app, ns.controller)
    if options.ui:
        r.add_get("/ui", ui_index)
        r.add_static("/ui/static", UI_DIR)
        r.add_get("/favicon.ico", favicon)
    r.add_get("/v1/namesrv-config", get_namesrv_config)
    r.add_put("/v1/namesrv-config", update_namesrv_config)
    r.add_get("/livez", livez)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    r.add_get("/openapi.json", openapi)
    return app
