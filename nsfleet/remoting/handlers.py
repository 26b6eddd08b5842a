"""One handler per NameServer request code (reference §1.3), over the shared NameServer.

Handlers answer exactly what the Java DefaultRequestProcessor / ClientRequestProcessor answer:
same response codes, remarks, extFields and body encodings. Header fields are read leniently, as
``decodeCommandCustomHeaderDirectly`` does: a missing or unparsable field is null.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nsfleet import validation
from nsfleet.model import DataVersion, QueueData, TopicRouteData
from nsfleet.nameserver import FeatureDisabled, NameServer
from nsfleet.namesrv_config import BlacklistedKey, parse_bool
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


def ext(cmd: RemotingCommand, name: str) -> str | None:
    return (cmd.ext_fields or {}).get(name)


def ext_long(cmd: RemotingCommand, name: str) -> int | None:
    """Long.parseLong, with Java's lenient header decoding: bad numbers become null."""
    raw = ext(cmd, name)
    if raw is None:
        return None
    try:
        return int(raw.strip()) if raw.strip().lstrip("+-").isdigit() else None
    except ValueError:
        return None


def ext_bool(cmd: RemotingCommand, name: str) -> bool | None:
    raw = ext(cmd, name)
    return None if raw is None else parse_bool(raw)


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


# --- KV config -----------------------------------------------------------------------------------

async def put_kv_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace, key = ext(cmd, "namespace"), ext(cmd, "key")
    if namespace is None or key is None:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    await ns.store.kv_put(namespace, key, ext(cmd, "value") or "")
    return ok(cmd)


async def get_kv_config(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace, key = ext(cmd, "namespace"), ext(cmd, "key")
    value = await ns.store.kv_get(namespace, key) if namespace and key else None
    if value is None:
        return error(cmd, ResponseCode.QUERY_NOT_FOUND,
                     f"No config item, Namespace: {namespace} Key: {key}", {})
    return ok(cmd, {"value": value})


async def delete_kv_config(ns: NameServer, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    namespace, key = ext(cmd, "namespace"), ext(cmd, "key")
    if namespace and key:
        await ns.store.kv_delete(namespace, key)
    return ok(cmd)


async def get_kv_list(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    namespace = ext(cmd, "namespace")
    table = await ns.store.kv_list(namespace) if namespace else None
    if table is None:
        return error(cmd, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
    return ok(cmd, body=dumps_legacy({"table": table}))


# --- brokers -------------------------------------------------------------------------------------

async def register_broker(ns: NameServer, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    expected = ext_long(cmd, "bodyCrc32") or 0
    if expected != 0 and crc32(cmd.body) != expected:
        return error(cmd, ResponseCode.SYSTEM_ERROR, "crc32 not match")
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
        return error(cmd, ResponseCode.SYSTEM_ERROR, "register broker failed")
    if not result.fenced:
        conn.registrations[(cluster, addr)] = (name, result.generation)
    header: dict[str, str] = {}
    if result.master_addr:
        header["masterAddr"] = result.master_addr
    if result.ha_server_addr:
        header["haServerAddr"] = result.ha_server_addr
    payload = dumps_legacy({"table": result.kv_table}) if result.kv_table is not None else None
    return ok(cmd, header, payload)


async def unregister_broker(ns: NameServer, cmd: RemotingCommand,
                            conn: Connection) -> RemotingCommand:
    cluster, addr, name = _identity(cmd)
    await ns.store.unregister_broker(cluster, addr, name)
    conn.registrations.pop((cluster, addr), None)
    return ok(cmd)


async def broker_heartbeat(ns: NameServer, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    cluster, addr = ext(cmd, "clusterName"), ext(cmd, "brokerAddr")
    if cluster and addr:
        await ns.store.heartbeat(cluster, addr)
    return ok(cmd)


async def query_data_version(ns: NameServer, cmd: RemotingCommand,
                             conn: Connection) -> RemotingCommand:
    cluster, addr = ext(cmd, "clusterName"), ext(cmd, "brokerAddr")
    dv = DataVersion.from_dict(loads_lenient(cmd.body)) if cmd.body else None
    changed, stored = True, None
    if cluster and addr:
        changed, stored = await ns.store.query_data_version(cluster, addr, dv or DataVersion())
        changed = changed or dv is None
    body = dumps_legacy(stored.to_dict()) if stored is not None else None
    return ok(cmd, {"changed": "true" if changed else "false"}, body)


async def wipe_write_perm(ns: NameServer, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    name = validation.name(ext(cmd, "brokerName"), "brokerName")
    return ok(cmd, {"wipeTopicCount": str(await ns.store.wipe_write_perm(name))})


async def add_write_perm(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    name = validation.name(ext(cmd, "brokerName"), "brokerName")
    return ok(cmd, {"addTopicCount": str(await ns.store.add_write_perm(name))})


async def get_broker_member_group(ns: NameServer, cmd: RemotingCommand,
                                  conn: Connection) -> RemotingCommand:
    cluster, name = ext(cmd, "clusterName"), ext(cmd, "brokerName")
    addrs: dict[int, str] = {}
    if name:
        addrs = (await ns.store.broker_member_group(cluster or "", name)).broker_addrs
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


async def get_route(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    if ns.waiting_for_service():
        return error(cmd, ResponseCode.SYSTEM_ERROR, "name server not ready")
    topic = ext(cmd, "topic")
    answer = None
    if topic is not None and validation.TOPIC_RE.match(topic) \
            and len(topic) <= validation.TOPIC_MAX_LEN:
        answer = await ns.route(topic)
    if answer is None:
        return error(cmd, ResponseCode.TOPIC_NOT_EXIST,
                     f"No topic route info in name server for the topic: {topic}{FAQ}")
    zone = ext(cmd, "__ZONE_NAME")
    if ext_bool(cmd, "__ZONE_MODE") and zone and zone.strip():
        # Java's ZoneRouteRPCHook re-encodes the filtered route with the default encoder.
        return ok(cmd, body=dumps_legacy(filter_by_zone(answer.route, zone).to_dict()))
    name, encode = _route_encoding(cmd)
    return ok(cmd, body=answer.encoded(name, encode))


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
    if topic and validation.TOPIC_RE.match(topic):
        await ns.store.delete_topic(topic, cluster or None)
    return ok(cmd)


async def register_topic(ns: NameServer, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    topic = validation.topic(ext(cmd, "topic"))
    route = loads_lenient(cmd.body) if cmd.body else {}
    if not isinstance(route, dict):
        raise ValidationError("body", "must be a TopicRouteData JSON object")
    qds = [QueueData.from_dict(q) for q in route.get("queueDatas") or []]
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
