"""The OpenAPI 3.1 description served at /openapi.json (a test checks it covers every route)."""

from __future__ import annotations

from functools import cache
from typing import Any

from nsfleet import __version__
from nsfleet.http.errors import STALE_MARKED

_ERROR = {"$ref": "#/components/schemas/Error"}
_IDENTITY = {
    "clusterName": {"type": "string"},
    "brokerAddr": {"type": "string", "example": "10.0.0.1:10911"},
    "brokerName": {"type": "string"}, "brokerId": {"type": "integer", "minimum": 0},
}
_DATA_VERSION = {"type": "object", "properties": {
    "counter": {"type": "integer"}, "timestamp": {"type": "integer"},
    "stateVersion": {"type": "integer"}}}
_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["code", "error"], "properties": {
        "code": {"type": "integer", "description": "RocketMQ response code where one applies "
                 "(17 topic not exist, 22 not found, 1 system error, 2000-2014 the "
                 "controller's refusals), else the HTTP status"},
        "error": {"type": "string"}}},
    "BrokerIdentity": {"type": "object", "required": list(_IDENTITY), "properties": _IDENTITY},
    "DataVersion": _DATA_VERSION,
    "Registration": {"type": "object", "required": list(_IDENTITY), "properties": {
        **_IDENTITY, "haServerAddr": {"type": "string"},
        "heartbeatTimeoutMillis": {"type": "integer", "minimum": 1},
        "enableActingMaster": {"type": "boolean"}, "zoneName": {"type": "string"},
        "dataVersion": _DATA_VERSION,
        "topicConfigTable": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {
                "readQueueNums": {"type": "integer"}, "writeQueueNums": {"type": "integer"},
                "perm": {"type": "integer"},
                "topicSysFlag": {"type": "integer"}, "order": {"type": "boolean"}}}},
        "filterServerList": {"type": "array", "items": {"type": "string"}}}},
    "QueueData": {"type": "object", "properties": {
        "brokerName": {"type": "string"}, "readQueueNums": {"type": "integer"},
        "writeQueueNums": {"type": "integer"}, "perm": {"type": "integer"},
        "topicSysFlag": {"type": "integer"}}},
    "BrokerData": {"type": "object", "properties": {
        "cluster": {"type": "string"}, "brokerName": {"type": "string"},
        "brokerAddrs": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "brokerId (as a string) -> address"},
        "enableActingMaster": {"type": "boolean"}, "zoneName": {"type": "string"}}},
    "TopicRouteData": {"type": "object", "properties": {
        "queueDatas": {"type": "array", "items": {"$ref": "#/components/schemas/QueueData"}},
        "brokerDatas": {"type": "array", "items": {"$ref": "#/components/schemas/BrokerData"}},
        "filterServerTable": {"type": "object", "additionalProperties": {
            "type": "array", "items": {"type": "string"}}},
        "orderTopicConf": {"type": "string"},
        "topicQueueMappingByBroker": {"type": "object", "description": "static topics: "
                                      "brokerName -> TopicQueueMappingInfo"}}},
    "TopicSummary": {"type": "object", "properties": {
        "rev": {"type": "integer", "description": "the fleet's change counter read first: "
                "the answer shows every change up to it"},
        "queueFields": {"type": "array", "items": {"type": "string"}, "description": "what "
                        "each queues entry holds: brokerName, readQueueNums, writeQueueNums, "
                        "perm, topicSysFlag"},
        "topics": {"type": "array", "items": {"type": "object", "properties": {
            "topic": {"type": "string"},
            "kind": {"enum": ["normal", "retry", "dlq", "system"], "description": "retry: "
                     "%RETRY%, dlq: %DLQ%, system: TopicValidator's system topics, rmq_sys_*, "
                     "and the topics named after a cluster or broker group"},
            "queues": {"type": "array", "items": {"type": "array"},
                       "description": "one [brokerName, r, w, perm, sysFlag] per group"},
            "orderConf": {"type": ["string", "null"],
                          "description": "its ORDER_TOPIC_CONFIG value"}}}}}},
    "RecentChanges": {"type": "object", "properties": {
        "rev": {"type": "integer", "description": "the fleet's change counter"},
        "changes": {"type": "array", "description": "without ?since: the newest recorded "
                    "changes, newest first", "items": {"type": "object", "properties": {
                        "id": {"type": "string", "description": "<ms>-<seq>: ?before= pages"},
                        "time": {"type": "integer", "description": "epoch ms"},
                        "action": {"type": "string", "example": "broker registered"},
                        "worker": {"type": "string", "description": "the worker's id"},
                        "detail": {"type": "object", "description": "the audit fields"}}}}}},
    "RouteWatch": {"type": "object", "required": ["topics"], "properties": {
        "topics": {"type": "object", "additionalProperties": {"type": ["string", "null"]},
                   "description": "topic -> the ETag the client holds (\"0\": no route; null: "
                                  "none held), at most 10,000 topics"}}},
    "ChangedRoutes": {"type": "object", "properties": {"routes": {
        "type": "object", "additionalProperties": {"type": "object", "properties": {
            "etag": {"type": "string"},
            "route": {"oneOf": [{"$ref": "#/components/schemas/TopicRouteData"},
                                {"type": "null"}]}}}}}},
    "TopicList": {"type": "object", "properties": {
        "topicList": {"type": "array", "items": {"type": "string"}},
        "brokerAddr": {"type": ["string", "null"]}}},
    "BrokerSet": {"type": "object", "description": "a broker set as RocketMQ 5's controller "
                  "knows it (null master: none)", "properties": {
                      "brokerName": {"type": "string"}, "clusterName": {"type": "string"},
                      "masterBrokerId": {"type": ["integer", "null"]},
                      "masterAddress": {"type": ["string", "null"]},
                      "masterEpoch": {"type": "integer"},
                      "syncStateSet": {"type": "array", "items": {"type": "integer"}},
                      "syncStateSetEpoch": {"type": "integer"},
                      "replicas": {"type": "array", "items": {"type": "object", "properties": {
                          "brokerId": {"type": "integer"}, "brokerAddress": {"type": "string"},
                          "alive": {"type": "boolean"},
                          "inSync": {"type": "boolean",
                                     "description": "in the SyncStateSet"}}}}}},
    "BrokerSets": {"type": "object", "properties": {"brokerSets": {
        "type": "array", "items": {"$ref": "#/components/schemas/BrokerSet"}}}},
    "ImportBrokerSet": {"type": "object", "description": "a broker set as a Java controller's "
                        "GET_SYNC_STATE_DATA answers it (the BrokerSet shape; inSync is read "
                        "from syncStateSet)",
                        "required": ["clusterName", "masterEpoch", "syncStateSet",
                                     "syncStateSetEpoch", "replicas"],
                        "properties": {
                            "clusterName": {"type": "string"},
                            "masterBrokerId": {"type": ["integer", "null"]},
                            "masterEpoch": {"type": "integer", "minimum": 0},
                            "syncStateSet": {"type": "array", "items": {"type": "integer"}},
                            "syncStateSetEpoch": {"type": "integer", "minimum": 0},
                            "replicas": {"type": "array", "items": {
                                "type": "object", "required": ["brokerId", "brokerAddress"],
                                "properties": {"brokerId": {"type": "integer", "minimum": 1},
                                               "brokerAddress": {"type": "string"},
                                               "alive": {"type": "boolean"}}}},
                            "graceSeconds": {"type": "number", "minimum": 1, "maximum": 3600,
                                             "description": "how long a replica the Java "
                                             "controller saw alive counts alive here before "
                                             "its own heartbeats arrive (150)"}}},
    "ElectMaster": {"type": "object", "required": ["brokerId"], "properties": {
        "brokerId": {"type": "integer", "minimum": 0,
                     "description": "the replica to make master (designateElect)"}}},
    "CleanBrokerData": {"type": "object", "properties": {
        "brokerIds": {"type": "array", "items": {"type": "integer", "minimum": 0},
                      "description": "the replicas to clean; none: the whole set"},
        "cleanLivingBroker": {"type": "boolean", "default": False}}},
}

# (method, path, summary, request schema or None, success schema or description, error statuses)
_OPS: list[tuple[str, str, str, str | None, str, tuple[int, ...]]] = [
    ("post", "/v1/brokers/register", "Register a broker (REGISTER_BROKER)", "Registration",
     "masterAddr, haServerAddr, kvTable (ORDER_TOPIC_CONFIG), registrationId, fenced, "
     "droppedTopics",
     (400, 409, 413, 503)),
    ("post", "/v1/brokers/heartbeat", "Refresh a broker's deadline (BROKER_HEARTBEAT)",
     "BrokerIdentity", "known: whether the broker was live", (400, 503)),
    ("post", "/v1/brokers/query-data-version", "Compare DataVersions (QUERY_DATA_VERSION); "
     "also refreshes the deadline", "BrokerIdentity", "changed, dataVersion", (400, 503)),
    ("post", "/v1/brokers/unregister", "Unregister a broker with the full cascade",
     "BrokerIdentity", "groupRemoved", (400, 503)),
    ("get", "/v1/brokers", "Live brokers with last heartbeat and deadline", None, "brokers",
     (503,)),
    ("post", "/v1/brokers/{broker_name}/wipe-write-perm", "Clear the write perm of a broker "
     "group's queues (404 for a group no broker registered)", None, "wipeTopicCount",
     (400, 404, 503)),
    ("post", "/v1/brokers/{broker_name}/add-write-perm", "Set perm 6 on a broker group's queues "
     "(404 for a group no broker registered)", None, "addTopicCount", (400, 404, 503)),
    ("get", "/v1/brokers/{broker_name}/members", "A broker group's members "
     "(GET_BROKER_MEMBER_GROUP); ?cluster= is echoed", None, "brokerMemberGroup", (400, 503)),
    ("get", "/v1/routes/{topic}", "A topic's route. The ETag changes whenever the body does "
     "(a digest of the body); If-None-Match with ?wait=S long-polls up to S seconds "
     "(304 when unchanged)", None, "TopicRouteData", (304, 400, 404, 503)),
    ("post", "/v1/routes/watch", "Long-poll many topics (?wait=S): the routes whose ETag "
     "differs from the one given, as soon as one does, or 304 when none did", "RouteWatch",
     "ChangedRoutes", (304, 400, 413, 503)),
    ("get", "/v1/cluster-info", "brokerAddrTable and clusterAddrTable", None,
     "brokerAddrTable, clusterAddrTable", (503,)),
    ("get", "/v1/topics", "All topics (403 when enableAllTopicList is false)", None,
     "TopicList", (403, 503)),
    ("get", "/v1/topics/unit", "Topics with FLAG_UNIT", None, "TopicList", (403, 503)),
    ("get", "/v1/topics/unit-sub", "Topics with FLAG_UNIT_SUB", None, "TopicList", (403, 503)),
    ("get", "/v1/topics/unit-sub-ununit", "Topics with FLAG_UNIT_SUB and not FLAG_UNIT", None,
     "TopicList", (403, 503)),
    ("get", "/v1/topics/system", "Cluster and broker names plus one broker address", None,
     "TopicList", (503,)),
    ("get", "/v1/clusters/{cluster}/topics", "Topics of a cluster's broker groups", None,
     "TopicList", (400, 403, 503)),
    ("delete", "/v1/topics/{topic}", "Delete a topic, or only a cluster's queues (?cluster=)",
     None, "removedQueueDatas", (400, 503)),
    ("put", "/v1/topics/{topic}", "Register queue data for registered broker groups "
     "(REGISTER_TOPIC_IN_NAMESRV; 400 naming a group no broker registered, nothing written)",
     "TopicRouteData", "writtenQueueDatas", (400, 413, 503)),
    ("put", "/v1/kv/{namespace}/{key}", "Put a KV config value; body {value}", None, "changed",
     (400, 413, 503)),
    ("get", "/v1/kv/{namespace}/{key}", "Get a KV config value", None, "value", (404, 503)),
    ("delete", "/v1/kv/{namespace}/{key}", "Delete a KV config value (the namespace stays)", None,
     "deleted", (503,)),
    ("get", "/v1/kv/{namespace}", "A KV namespace's table", None, "table", (404, 503)),
    ("get", "/v1/namesrv-config", "NamesrvConfig and NettyServerConfig values, as "
     "GET_NAMESRV_CONFIG lists them", None, "config", (503,)),
    ("put", "/v1/namesrv-config", "Update NamesrvConfig fleet-wide (UPDATE_NAMESRV_CONFIG's "
     "blacklist and parsing; 400 naming unknown keys, nothing applied); body {key: value}", None,
     "applied", (400, 403, 503)),
    ("get", "/v1/changes", "Without ?since: the fleet's recent changes, newest first (?limit=N, "
     "1-1000, default 100; ?before=ID pages back) with {rev}. With ?since=N&wait=S: long-poll "
     "the change counter, answering {rev} once it differs from N, or after S seconds", None,
     "RecentChanges", (400, 503)),
    ("get", "/v1/topics/summary", "Every topic with its kind, the queue data of each group "
     "serving it and its ORDER_TOPIC_CONFIG value, in one answer (the console's topic table; "
     "gzip when asked)", None, "TopicSummary", (403, 503)),
    ("get", "/v1/kv", "The KV namespaces", None, "namespaces", (503,)),
    ("get", "/rocketmq/{subgroup}", "RocketMQ's address server (what clients and brokers with "
     "rocketmq.namesrv.domain fetch): text/plain host:port;host:port, the remoting addresses "
     "of the live workers then the fixed extra ones; every subgroup, the -{unitName} form "
     "with ?nofix=1 and extra query parameters get the same list; no token needed", None,
     "host:port;host:port", (503,)),
    ("get", "/v1/address-server", "The address server's answer: the live workers' advertised "
     "addresses, the fixed extra addresses, and nsaddr (the text clients get)", None,
     "workers, extra, nsaddr", (503,)),
    ("put", "/v1/address-server/extra", "Replace the fleet-wide fixed extra addresses; body "
     "{addresses: [host:port] or \"host:port;host:port\"}", None, "extra", (400, 503)),
    ("post", "/v1/address-server/extra", "Add and remove fixed extra addresses; body {add: "
     "[host:port], remove: [host:port]}", None, "extra", (400, 503)),
    ("get", "/v1/controller/metadata", "RocketMQ 5's controller (GET_METADATA_INFO): every "
     "worker is its leader", None, "group, controllerLeaderId, controllerLeaderAddress, "
     "isLeader, peers", (503,)),
    ("get", "/v1/controller/config", "The controller's config (GET_CONTROLLER_CONFIG) as a map",
     None, "config", ()),
    ("put", "/v1/controller/config", "Update the controller's config fleet-wide "
     "(UPDATE_CONTROLLER_CONFIG): a JSON object of key -> value; enableElectUncleanMaster and "
     "notifyBrokerRoleChanged apply (every worker within 5 s), other keys are ignored as Java "
     "ignores them, configBlackList's are refused (403)", None, "config", (400, 403, 413, 503)),
    ("get", "/v1/controller/broker-sets", "Every broker set in controller mode: master, epochs, "
     "SyncStateSet and replicas (alive, in sync)", None, "BrokerSets", (503,)),
    ("get", "/v1/controller/broker-sets/{broker_name}", "One broker set (404 code 2008 when the "
     "controller does not know it)", None, "BrokerSet", (404, 503)),
    ("put", "/v1/controller/broker-sets/{broker_name}", "Import a broker set from a Java "
     "controller (docs/controller.md, moving a running set): its ids, master and epochs, so the "
     "next election continues them; imported false when the fleet holds it already, 409 when "
     "the fleet has a newer masterEpoch or another master at the same one (nothing written)",
     "ImportBrokerSet", "imported, brokerSet", (400, 409, 413, 503)),
    ("post", "/v1/controller/broker-sets/{broker_name}/elect", "Make a replica the set's master "
     "(mqadmin electMaster, designated); 409 with Java's code otherwise: 2011 naming the master "
     "that stays, 2010 an unknown set, 2012 no such candidate", "ElectMaster", "BrokerSet",
     (400, 409, 413, 503)),
    ("post", "/v1/controller/broker-sets/{broker_name}/clean", "Remove replicas, or the whole "
     "set, from the controller (mqadmin cleanBrokerMetadata); 409 code 2009 while one is alive "
     "(unless cleanLivingBroker) or for an unknown set", "CleanBrokerData",
     "brokerName, brokerIds, cleanLivingBroker", (400, 409, 413, 503)),
    ("get", "/v1/status", "This worker: its id, its sweeps' removals and guard holds, uptime",
     None, "workerId, sweepHeld, sweepRemovals, uptimeSeconds", ()),
    ("get", "/ui", "The read-only fleet console (HTML; off with --no-ui)", None, "HTML page",
     ()),
    ("get", "/ui/static", "The console's script and style sheet (/ui/static/<file>)", None,
     "static file", (404,)),
    ("get", "/favicon.ico", "The console's icon (with the console)", None, "icon", ()),
    ("get", "/livez", "The process is up", None, "status", ()),
    ("get", "/readyz", "Redis reachable (or, while it is not, a stale view still served: "
     "\"stale\": true with the reason), scripts loaded, not draining", None, "status", (503,)),
    ("get", "/metrics", "Prometheus metrics (text format)", None, "metrics", ()),
    ("get", "/openapi.json", "This document", None, "OpenAPI document", ()),
]


_ALWAYS_OPEN = frozenset({"/ui", "/ui/static", "/openapi.json",  # never behind a token
                          "/rocketmq/{subgroup}"})


# Present only on answers from the worker's last coherent view while Redis is unreachable
# (docs/reliability.md, "Redis away").
_STALE_HEADERS = {
    "Age": {"description": "Seconds since the worker's view was last coherent (only on stale "
                           "answers)", "schema": {"type": "integer"}},
    "Warning": {"description": '`110 nsfleet "Response is Stale"` (only on stale answers)',
                "schema": {"type": "string"}},
    "X-Nsfleet-Stale": {"description": "Seconds since the view was last coherent, to 0.1 s "
                                       "(only on stale answers)", "schema": {"type": "string"}},
}


def _operation(summary: str, request: str | None, success: str,
               errors: tuple[int, ...], path: str) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary}
    params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True,
                             "schema": {"type": "string"}} for p in params]
    if request:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{request}"}}}}
    ok: dict[str, Any] = {"description": success}
    if success in _SCHEMAS:
        ref = {"$ref": f"#/components/schemas/{success}"}
        ok["content"] = {"application/json": {"schema": ref}}
    if path.startswith(STALE_MARKED):
        ok["headers"] = _STALE_HEADERS
    responses: dict[str, Any] = {"200": ok}
    for status in errors:
        if status == 304:
            responses["304"] = {"description": "Not modified (ETag unchanged after the wait)"}
        else:
            responses[str(status)] = {"description": "Error", "content": {
                "application/json": {"schema": _ERROR}}}
    for status, why in (("401", "No valid bearer token (workers with tokens on)"),
                        ("403", "The token lacks the scope (workers with tokens on)")):
        if path in _ALWAYS_OPEN:
            break
        responses.setdefault(status, {"description": why, "content": {
            "application/json": {"schema": _ERROR}}})
    op["responses"] = responses
    return op


@cache
def openapi_document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, request, success, errors in _OPS:
        paths.setdefault(path, {})[method] = _operation(summary, request, success, errors, path)
    return {"openapi": "3.1.0",
            "info": {"title": "nsfleet", "version": __version__,
                     "description": "JSON API of an nsfleet worker (RocketMQ NameServer fleet)"},
            "paths": paths,
            # Tokens are off unless the worker has some (docs/security.md): either no scheme or
            # a bearer token; a write needs a token with write scope, /livez, /readyz and
            # /metrics one with probe scope when a probe token is set.
            "security": [{}, {"bearerToken": []}],
            "components": {"schemas": _SCHEMAS, "securitySchemes": {"bearerToken": {
                "type": "http", "scheme": "bearer",
                "description": "read or write scope, from --read-token-file / "
                               "--write-token-file or the accounts file's tokens"}}}}
