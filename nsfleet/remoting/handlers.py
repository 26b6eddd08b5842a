"""One handler per NameServer request code (reference §1.3), over the shared NameServer.

Handlers answer exactly what the Java DefaultRequestProcessor / ClientRequestProcessor answer:
same response codes, remarks, extFields and body encodings. Header fields are read leniently, as
``decodeCommandCustomHeaderDirectly`` does: a missing or unparsable field is null.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nsfleet import validation
from nsfleet.keys import ORDER_TOPIC_CONFIG
from nsfleet.model import DataVersion, QueueData, TopicRouteData
from nsfleet.nameserver import FeatureDisabled, NameServer, RouteAnswer
from nsfleet.namesrv_config import BlacklistedKey
from nsfleet.remoting.bodies import (
    BodyDecodeError,
    crc32,
    decode_register_body,
    parse_properties,
)
from nsfleet.remoting.codec import RemotingCommand, RequestCode, ResponseCode, make_response
from nsfleet.remoting.fastjson import dumps_legacy, dumps_standard, loads_lenient
from nsfleet.remoting.zone import filter_by_zone
from nsfleet.store import BrokerRegistration, RegistrationRejected
from nsfleet.validation import ValidationError

V4_9_4 = 401
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


@dataclass
class Connection:
    """What a handler may know about the connection a request came in on."""

    peer: str
    # (cluster, addr) -> (brokerName, registration generation): brokers registered through
    # this connection, unregistered (fenced) when it closes.
    registrations: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)


Handler = Callable[[NameServer, RemotingCommand, Connection], Awaitable[RemotingCommand]]


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def ext(cmd: RemotingCommand, name: str) -> str | None:
    return (cmd.ext_fields or {}).get(name)


def java_str(value: object) -> str:
    """String concatenation in Java: a null prints as "null"."""
    return "null" if value is None else str(value)


def _parse_java_integer(raw: str | None, lo: int, hi: int) -> int | None:
    """Long.parseLong / Integer.parseInt: an optional sign and ASCII digits, nothing else (no
    whitespace), within range. decodeCommandCustomHeaderDirectly swallows a failure and leaves
    the field null (or at its default)."""
    if raw is None or not _JAVA_INTEGER.fullmatch(raw):
        return None
    try:
        value = int(raw)
    except ValueError:  # past Python's int-from-string digit limit: far out of range anyway
        return None
    return value if lo <= value <= hi else None


def ext_long(cmd: RemotingCommand, name: str) -> int | None:
    """A ``Long`` header field: null when missing or not a valid Java long."""
    return _parse_java_integer(ext(cmd, name), _LONG_MIN, _LONG_MAX)


def ext_int(cmd: RemotingCommand, name: str) -> int | None:
    """An ``Integer`` header field: null when missing or not a valid Java int."""
    return _parse_java_integer(ext(cmd, name), _INT_MIN, _INT_MAX)


def ext_bool(cmd: RemotingCommand, name: str) -> bool | None:
    """A ``Boolean`` header field: Boolean.parseBoolean, so only a case-insensitive "true"
    (no surrounding whitespace) is true."""
    raw = ext(cmd, name)
    return None if raw is None else raw.lower() == "true"


def ok(cmd: RemotingCommand, ext_fields: dict[str, str] | None = None,
       body: bytes | None = None) -> RemotingCommand:
    return make_response(cmd, ResponseCode.SUCCESS, ext_fields=ext_fields, body=body)


def error(cmd: RemotingCommand, code: int, remark: str,
          ext_fields: dict[str, str] | None = None) -> RemotingCommand:
    return make_response(cmd, code, remark=remark, ext_fields=ext_fields)


def _identity(cmd: RemotingCommand) -> tuple[str, str, str]:
    """clusterName, brokerAddr, brokerName from the header, validated (ValidationError)."""
    return (validation.name(ext(cmd, "clusterName"), "clusterName"),
            validation.addr(ext(cmd, "brokerAddr")),
            validation.name(ext(cmd, "brokerName"), "brokerName"))


def _live_key(cmd: RemotingCommand) -> tuple[str, str] | None:
    """(clusterName, brokerAddr) when both are valid. Registration validates them, so any other
    value cannot name a known broker: Java's lookup would simply find nothing."""
    try:
        return (validation.name(ext(cmd, "clusterName"), "clusterName"),
                validation.addr(ext(cmd, "brokerAddr")))
    except ValidationError:
        return None


def _valid_name(value: str | None) -> str | None:
    """A brokerName that can exist (registration validates names), else None."""
    try:
        return validation.name(value, "brokerName")
    except ValidationError:
        return None


def _valid_kv_part(value: str | None) -> str | None:
    """A KV namespace or key that can have been stored (writes validate them), else None."""
    try:
        return validation.kv_part(value, "namespace")
    except ValidationError:
        return None


# --- KV config -----------------------------------------------------------------------------------

async def put_kv_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace, key, value = ext(cmd, "namespace"), ext(cmd, "key"), ext(cmd, "value")
    if namespace is None or key is None:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    # A missing value is Java's null: the namespace exists, GET finds nothing and the KVTable
    # leaves the key out (fastjson drops null map values).
    await ns.store.kv_put(namespace, key, value)
    return ok(cmd)


async def get_kv_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace, key = ext(cmd, "namespace"), ext(cmd, "key")
    valid_ns, valid_key = _valid_kv_part(namespace), _valid_kv_part(key)
    value = await ns.store.kv_get(valid_ns, valid_key) if valid_ns and valid_key else None
    if value is None:
        # The response header class is set even here, so Java sends "extFields":{}.
        return error(cmd, ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {java_str(namespace)} Key: {java_str(key)}", {})
    return ok(cmd, {"value": value})


async def delete_kv_config(ns: NameServer, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    namespace, key = ext(cmd, "namespace"), ext(cmd, "key")
    valid_ns, valid_key = _valid_kv_part(namespace), _valid_kv_part(key)
    if valid_ns and valid_key:
        await ns.store.kv_delete(valid_ns, valid_key)
    return ok(cmd)  # always SUCCESS


async def get_kv_list(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace = ext(cmd, "namespace")
    valid_ns = _valid_kv_part(namespace)
    table = await ns.store.kv_list(valid_ns) if valid_ns else None
    if table is None:
        return error(cmd, ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {java_str(namespace)}")
    return ok(cmd, body=dumps_legacy({"table": table}))


# --- brokers -------------------------------------------------------------------------------------

async def register_broker(ns: NameServer, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    # Every answer, errors included, carries the RegisterBrokerResponseHeader class, so Java
    # writes "extFields":{} even when nothing is set.
    expected = ext_int(cmd, "bodyCrc32") or 0  # Integer, default 0: 0 skips the check
    if expected != 0 and crc32(cmd.body) != expected:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "crc32 not match", {})
    try:
        body = decode_register_body(cmd.body, bool(ext_bool(cmd, "compressed")), cmd.version)
    except BodyDecodeError as exc:
        return error(cmd, ResponseCode.SYSTEM_ERROR, f"BodyDecodeError: {exc}")
    cluster, addr, name = _identity(cmd)
    broker_id = ext_long(cmd, "brokerId")
    if broker_id is None:
        raise ValidationError("brokerId", "is required (a Long)")
    dv = body.data_version
    reg = BrokerRegistration(
        cluster, addr, name, broker_id,
        ha_server_addr=ext(cmd, "haServerAddr") or None,
        zone_name=ext(cmd, "__ZONE_NAME") or None,
        heartbeat_timeout_millis=ext_long(cmd, "heartbeatTimeoutMillis"),
        enable_acting_master=ext_bool(cmd, "enableActingMaster"),
        data_version=DataVersion(dv.get("counter", 0), dv.get("timestamp", 0),
                                 dv.get("stateVersion", 0)),
        topic_configs=list(body.topic_config_table.values()),
        filter_server_list=body.filter_server_list)
    try:
        result = await ns.register_broker(reg,
                                          static_topics=bool(body.topic_queue_mapping_info))
    except RegistrationRejected:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "register broker failed", {})
    kv_table = result.kv_table
    if result.fenced:
        # Java's fenced registration returns an empty (non-null) result, and the processor still
        # attaches the ORDER_TOPIC_CONFIG table to it.
        if ns.config.flag("returnOrderTopicConfigToBroker"):
            kv_table = await ns.store.kv_list(ORDER_TOPIC_CONFIG)
    else:
        conn.registrations[(cluster, addr)] = (name, result.generation)
    header: dict[str, str] = {}
    if result.master_addr:
        header["masterAddr"] = result.master_addr
    if result.ha_server_addr:
        header["haServerAddr"] = result.ha_server_addr
    payload = dumps_legacy({"table": kv_table}) if kv_table is not None else None
    return ok(cmd, header, payload)


async def unregister_broker(ns: NameServer, cmd: RemotingCommand,
                            conn: Connection) -> RemotingCommand:
    cluster, addr, name = _identity(cmd)
    await ns.store.unregister_broker(cluster, addr, name)
    conn.registrations.pop((cluster, addr), None)
    return ok(cmd)


async def broker_heartbeat(ns: NameServer, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    live = _live_key(cmd)
    if live is not None:
        await ns.store.heartbeat(*live)
    return ok(cmd)  # always SUCCESS, known broker or not


async def query_data_version(ns: NameServer, cmd: RemotingCommand,
                             conn: Connection) -> RemotingCommand:
    parsed = loads_lenient(cmd.body) if cmd.body else None
    if parsed is not None and not isinstance(parsed, dict):
        raise ValidationError("body", "must be a DataVersion JSON object")
    dv = DataVersion.from_dict(parsed) if parsed is not None else None
    changed, stored = True, None  # an unknown broker: stored == null, so changed
    live = _live_key(cmd)
    if live is not None:
        changed, stored = await ns.store.query_data_version(*live, dv or DataVersion())
        changed = changed or dv is None  # stored.equals(null) is false
    body = dumps_legacy(stored.to_dict()) if stored is not None else None
    return ok(cmd, {"changed": "true" if changed else "false"}, body)


async def wipe_write_perm(ns: NameServer, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    name = _valid_name(ext(cmd, "brokerName"))  # any other name has no topics: count 0
    count = await ns.store.wipe_write_perm(name) if name is not None else 0
    return ok(cmd, {"wipeTopicCount": str(count)})


async def add_write_perm(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    name = _valid_name(ext(cmd, "brokerName"))
    count = await ns.store.add_write_perm(name) if name is not None else 0
    return ok(cmd, {"addTopicCount": str(count)})


async def get_broker_member_group(ns: NameServer, cmd: RemotingCommand,
                                  conn: Connection) -> RemotingCommand:
    cluster, name = ext(cmd, "clusterName"), ext(cmd, "brokerName")
    addrs: dict[int, str] = {}
    valid_name = _valid_name(name)
    if valid_name is not None:  # always SUCCESS, possibly with an empty map
        addrs = (await ns.store.broker_member_group(cluster or "", valid_name)).broker_addrs
    group = {"brokerAddrs": addrs, "brokerName": name, "cluster": cluster}
    return ok(cmd, body=dumps_legacy({"brokerMemberGroup": {k: v for k, v in group.items()
                                                            if v is not None}}))


async def get_cluster_info(ns: NameServer, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    return ok(cmd, body=dumps_legacy((await ns.store.cluster_info()).to_dict()))


# --- routes and topics ---------------------------------------------------------------------------

def _route_encoding(cmd: RemotingCommand) -> tuple[str, Callable[[TopicRouteData], bytes]]:
    if cmd.version >= V4_9_4 or ext_bool(cmd, "acceptStandardJsonOnly"):
        return "standard", lambda r: dumps_standard(r.to_dict())
    return "legacy", lambda r: dumps_legacy(r.to_dict())


def _routable(topic: str | None) -> bool:
    """A name that can have a route; anything else is TOPIC_NOT_EXIST, as in Java."""
    return (topic is not None and len(topic) <= validation.TOPIC_MAX_LEN
            and validation.TOPIC_RE.match(topic) is not None)


def _route_response(cmd: RemotingCommand, topic: str | None,
                    answer: RouteAnswer | None) -> RemotingCommand:
    if answer is None:
        return error(cmd, ResponseCode.TOPIC_NOT_EXIST,
                     f"No topic route info in name server for the topic: {java_str(topic)}{FAQ}")
    zone = ext(cmd, "__ZONE_NAME")
    if ext_bool(cmd, "__ZONE_MODE") and zone and zone.strip():
        # Java's ZoneRouteRPCHook re-encodes the filtered route with the default encoder.
        return ok(cmd, body=dumps_legacy(filter_by_zone(answer.route, zone).to_dict()))
    name, encode = _route_encoding(cmd)
    return ok(cmd, body=answer.encoded(name, encode))


async def get_route(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    if ns.waiting_for_service():
        return error(cmd, ResponseCode.SYSTEM_ERROR, "name server not ready")
    topic = ext(cmd, "topic")
    answer = await ns.route(topic) if _routable(topic) else None  # type: ignore[arg-type]
    return _route_response(cmd, topic, answer)


def get_route_cached(ns: NameServer, cmd: RemotingCommand) -> RemotingCommand | None:
    """GET_ROUTEINFO_BY_TOPIC answered without a Redis round trip, or None when it needs one.

    The server calls this inline for every route request, so a cache hit costs no task."""
    if ns.waiting_for_service():
        return error(cmd, ResponseCode.SYSTEM_ERROR, "name server not ready")
    topic = ext(cmd, "topic")
    if not _routable(topic):
        return _route_response(cmd, topic, None)
    hit, answer = ns.cached_route(topic)  # type: ignore[arg-type]
    return _route_response(cmd, topic, answer) if hit else None


def _topic_list(fetch: Callable[[NameServer], Awaitable[list[str]]], gate: str) -> Handler:
    async def handler(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            getattr(ns, gate)()
        except FeatureDisabled:
            return error(cmd, ResponseCode.SYSTEM_ERROR, "disable")
        return ok(cmd, body=dumps_legacy({"topicList": await fetch(ns)}))
    return handler


async def get_topics_by_cluster(ns: NameServer, cmd: RemotingCommand,
                                conn: Connection) -> RemotingCommand:
    try:
        ns.check_topic_list()
    except FeatureDisabled:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "disable")
    cluster = ext(cmd, "cluster")
    topics = await ns.store.topics_by_cluster(cluster) if cluster else []
    return ok(cmd, body=dumps_legacy({"topicList": topics}))


async def get_system_topic_list(ns: NameServer, cmd: RemotingCommand,
                                conn: Connection) -> RemotingCommand:
    topics, addr = await ns.store.system_topic_list()
    body: dict[str, object] = {"topicList": topics}
    if addr is not None:
        body["brokerAddr"] = addr
    return ok(cmd, body=dumps_legacy(body))


async def delete_topic(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    topic, cluster = ext(cmd, "topic"), ext(cmd, "clusterName")
    # A topic or cluster that cannot exist has nothing to delete. Always SUCCESS.
    with contextlib.suppress(ValidationError):
        await ns.store.delete_topic(validation.topic(topic), cluster or None)
    return ok(cmd)


async def register_topic(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    route = loads_lenient(cmd.body) if cmd.body else None
    if route is None:
        return ok(cmd)
    if not isinstance(route, dict):
        raise ValidationError("body", "must be a TopicRouteData JSON object")
    raw = route.get("queueDatas") or []
    if not isinstance(raw, list):
        raise ValidationError("body", "queueDatas must be a list")
    if not raw:
        return ok(cmd)  # ignored whatever the topic, always SUCCESS
    topic = validation.topic(ext(cmd, "topic"))
    qds: list[QueueData] = []
    for q in raw:
        if not isinstance(q, dict):
            raise ValidationError("body", "queueDatas must hold QueueData objects")
        if _valid_name(q.get("brokerName")) is None:
            # A broker name that cannot be registered is an unknown broker: Java ignores the
            # whole request for a new topic and stops at it for an existing one.
            if not await ns.store.topic_exists(topic):
                return ok(cmd)
            break
        qds.append(QueueData.from_dict(q))
    if qds:
        await ns.store.register_topic(topic, qds)
    return ok(cmd)


# --- NameServer config ---------------------------------------------------------------------------

async def update_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    if not cmd.body:
        return ok(cmd)
    try:
        props = parse_properties(cmd.body.decode("utf-8", errors="replace"))
    except ValueError:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "string2Properties error")
    try:
        await ns.config.update(props)
    except BlacklistedKey:
        return error(cmd, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    return ok(cmd)


async def get_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    return ok(cmd, body=ns.config.properties_text().encode())


HANDLERS: dict[int, Handler] = {
    RequestCode.PUT_KV_CONFIG: put_kv_config,
    RequestCode.GET_KV_CONFIG: get_kv_config,
    RequestCode.DELETE_KV_CONFIG: delete_kv_config,
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: unregister_broker,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: get_route,
    RequestCode.GET_BROKER_CLUSTER_INFO: get_cluster_info,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _topic_list(
        lambda ns: ns.store.all_topics(), "check_all_topic_list"),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: delete_topic,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: register_topic,
    RequestCode.GET_KVLIST_BY_NAMESPACE: get_kv_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: get_system_topic_list,
    RequestCode.GET_UNIT_TOPIC_LIST: _topic_list(lambda ns: ns.store.unit_topics(),
                                                 "check_topic_list"),
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: _topic_list(
        lambda ns: ns.store.has_unit_sub_topics(), "check_topic_list"),
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: _topic_list(
        lambda ns: ns.store.has_unit_sub_ununit_topics(), "check_topic_list"),
    RequestCode.UPDATE_NAMESRV_CONFIG: update_config,
    RequestCode.GET_NAMESRV_CONFIG: get_config,
    RequestCode.QUERY_DATA_VERSION: query_data_version,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: add_write_perm,
    RequestCode.GET_BROKER_MEMBER_GROUP: get_broker_member_group,
    RequestCode.BROKER_HEARTBEAT: broker_heartbeat,
}
