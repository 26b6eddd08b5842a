"""One handler per NameServer request code, over the NameServer service API.

Handlers answer what Java's DefaultRequestProcessor / ClientRequestProcessor answer: the same
response codes, remarks, extFields and body encodings. Each takes its typed request header
(``headers.py``, decoded once, leniently), calls one NameServer method and encodes the answer; a
refusal is a domain error that ``error_response`` maps to its code and remark.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from nsfleet.domain.errors import (
    FAQ,
    BadRequest,
    BodyDecodeError,
    Crc32Mismatch,
    NameServerError,
    ValidationError,
)
from nsfleet.domain.model import (
    BrokerRegistration,
    DataVersion,
    QueueData,
    TopicRouteData,
)
from nsfleet.remoting.zone import filter_by_zone
from nsfleet.runtime.table_thread import OFF_LOOP_BODY_BYTES, in_table_thread
from nsfleet.service.nameserver import NameServer
from nsfleet.service.route_reads import RouteAnswer
from nsfleet.wire.bodies import RegisterBody, crc32, decode_register_body
from nsfleet.wire.codec import (
    V4_9_4,
    V5_0_0,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
    encode_plain_response,
    make_response,
)
from nsfleet.wire.fastjson import (
    dumps_legacy,
    dumps_standard,
    dumps_standard_in_order,
    loads_lenient,
)
from nsfleet.wire.headers import (
    BrokerIdentityHeader,
    BrokerMemberGroupHeader,
    BrokerNameHeader,
    EmptyHeader,
    GetRouteInfoHeader,
    KvHeader,
    RegisterBrokerHeader,
    RequestHeader,
    TopicHeader,
    TopicsByClusterHeader,
)

# Request bodies other than a registration's are small (a DataVersion, one topic's route): read
# leniently up to this much only, since that reader runs at Python speed (~4 s for 16 MiB).
LENIENT_BODY_MAX = 1024 * 1024


async def json_body(body: bytes) -> Any:
    """``loads_lenient(body)``, off the event loop for a big body; BodyDecodeError (Java's
    decode exception escaping the processor) for one it cannot read."""
    try:
        if len(body) > OFF_LOOP_BODY_BYTES:
            return await in_table_thread(loads_lenient, body, lenient_max=LENIENT_BODY_MAX)
        return loads_lenient(body)
    except ValueError as exc:
        raise BodyDecodeError(str(exc)) from None


@dataclass
class Connection:
    """What a handler may know about the connection a request came in on."""

    peer: str
    id: str = ""  # fleet-wide name, NameServer.connection_id
    closed: bool = False  # set when the connection is lost
    # (cluster, addr) -> brokerName: brokers registered through this connection; when it closes,
    # each goes unless another connection it registered over is still open.
    registrations: dict[tuple[str, str], str] = field(default_factory=dict)
    # (brokerName, brokerId) of the controller replicas whose heartbeats came over this
    # connection: when it closes, each stops being alive unless it moved (controller.py).
    controller_replicas: set[tuple[str, int]] = field(default_factory=set)
    # The last REGISTER_BROKER body decoded here: (compressed, version, its length, a digest of
    # its bytes, decoded). A digest, not the bytes: a 10,000-topic broker's are 1.7 MB, which
    # 150 such connections kept at ~250 MB of a worker (its Helm limit is 512 MiB). Every body
    # is hashed, a first one too: an unknown digest made the first unchanged round after a
    # storm decode and encode every table again, and grow the worker by ~100 MB.
    last_register_body: tuple[bool, int, int, bytes, RegisterBody] | None = None
    # Told when a request's body has been read (decoded): the server then lets the next big
    # frame in (nsfleet.remoting.big_frames).
    body_read: Callable[[bytes], None] = field(default=lambda body: None, repr=False,
                                               compare=False)

    async def register_body(self, body: bytes | None, compressed: bool,
                            version: int) -> RegisterBody:
        """``decode_register_body``, remembered for the last body. A broker re-sends the same
        bytes every 30 s while nothing changed, and decoding is a pure function of them (the
        result is only read), so an unchanged re-registration skips ~60 % of its worker time.
        The body is known again by its length and a digest of its bytes. A big body is hashed
        and decoded off the event loop, so reads are not held behind it."""
        if not body:
            self.last_register_body = None
            return decode_register_body(body, compressed, version)
        last = self.last_register_body
        known = (last[3:] if last is not None and last[:3] == (compressed, version, len(body))
                 else None)
        if len(body) > OFF_LOOP_BODY_BYTES:
            digest, decoded = await in_table_thread(
                _digest_and_decode, body, compressed, version, known)
        else:
            digest, decoded = _digest_and_decode(body, compressed, version, known)
        self.last_register_body = (compressed, version, len(body), digest, decoded)
        self.body_read(body)
        return decoded


def _digest_and_decode(body: bytes, compressed: bool, version: int,
                       last: tuple[bytes, RegisterBody] | None) -> tuple[bytes, RegisterBody]:
    """The body's digest, and ``last``'s decoded body when its digest is the same (bytes of the
    same length, compression and version) else the body decoded."""
    digest = hashlib.sha256(body).digest()  # 1 ms for 1.7 MB, the GIL released meanwhile
    if last is not None and last[0] == digest:
        return digest, last[1]
    return digest, decode_register_body(body, compressed, version)


# FAQUrl.suggestTodo(APPLY_TOPIC_URL) of 4.9.8 (5.x moved the page: errors.FAQ).
FAQ_4X = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# The remark of a response created with a header class (RemotingCommand.createResponseCommand)
# that the processor never resets: 5.x's GET_BROKER_MEMBER_GROUP answers with it.
UNSET_REMARK = "not set any response code"


def ok(cmd: RemotingCommand, ext_fields: dict[str, str] | None = None,
       body: bytes | None = None) -> RemotingCommand:
    return make_response(cmd, ResponseCode.SUCCESS, ext_fields=ext_fields, body=body)


def error_response(cmd: RemotingCommand, exc: NameServerError,
                   response_header: bool = False) -> RemotingCommand:
    """A refusal as Java answers it. A processor that creates its response with a response
    header class first answers even its refusals with ``"extFields":{}``; a malformed request
    (BadRequest) is an exception escaping the processor, answered without one."""
    ext = {} if response_header and not isinstance(exc, BadRequest) else None
    remark = exc.remark
    if cmd.version < V5_0_0 and remark.endswith(FAQ):  # a 4.x NameServer's FAQ address
        remark = remark.removesuffix(FAQ) + FAQ_4X
    return make_response(cmd, exc.code, remark=remark, ext_fields=ext)


# --- KV config -----------------------------------------------------------------------------------

async def put_kv_config(ns: NameServer, h: KvHeader, cmd: RemotingCommand,
                        conn: Connection) -> RemotingCommand:
    await ns.kv_put(h.namespace, h.key, h.value)
    return ok(cmd)


async def get_kv_config(ns: NameServer, h: KvHeader, cmd: RemotingCommand,
                        conn: Connection) -> RemotingCommand:
    return ok(cmd, {"value": await ns.kv_get(h.namespace, h.key)})


async def delete_kv_config(ns: NameServer, h: KvHeader, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    await ns.kv_delete(h.namespace, h.key)
    return ok(cmd)  # always SUCCESS


async def get_kv_list(ns: NameServer, h: KvHeader, cmd: RemotingCommand,
                      conn: Connection) -> RemotingCommand:
    return ok(cmd, body=dumps_legacy({"table": await ns.kv_list(h.namespace)}))


# --- brokers -------------------------------------------------------------------------------------

async def register_broker(ns: NameServer, h: RegisterBrokerHeader, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    if h.body_crc32 != 0 and crc32(cmd.body) != h.body_crc32:
        raise Crc32Mismatch
    body = await conn.register_body(cmd.body, h.compressed, cmd.version)
    # Read: the bytes (1.7 MB for 10,000 topics) need not wait for Redis with the request. In a
    # storm they did: a worker given 150 such tables peaked at 575 MiB (bench/scale.py).
    cmd.body = None
    reg = BrokerRegistration(
        h.cluster_name, h.broker_addr, h.broker_name, h.broker_id,
        ha_server_addr=h.ha_server_addr or None,
        zone_name=h.zone_name or None,
        heartbeat_timeout_millis=h.heartbeat_timeout_millis,
        enable_acting_master=h.enable_acting_master,
        data_version=body.data_version,
        topic_configs=body.topic_configs,
        numbers_checked=body.numbers_checked, table_memo=body.table_memo,
        filter_server_list=body.filter_server_list,
        topic_queue_mappings=body.topic_queue_mapping_info)
    result = await ns.register_broker(reg, connection=conn.id)
    if not result.fenced:
        assert reg.cluster and reg.addr and reg.name  # validated by the registration
        if conn.closed:
            # The connection closed while this registration ran, after its close was handled:
            # handle it for this broker now, or its record would keep the broker registered.
            await ns.connection_closed(reg.cluster, reg.addr, reg.name, conn.id)
        else:
            conn.registrations[(reg.cluster, reg.addr)] = reg.name
    header: dict[str, str] = {}
    if result.master_addr:
        header["masterAddr"] = result.master_addr
    if result.ha_server_addr:
        header["haServerAddr"] = result.ha_server_addr
    kv = result.kv_table
    response = ok(cmd, header, dumps_legacy({"table": kv}) if kv is not None else None)
    if result.dropped_topics:  # SUCCESS for the rest; a client reading the remark learns why
        response.remark = "topics not stored: " + "; ".join(
            d.describe() for d in result.dropped_topics[:20])
    return response


async def unregister_broker(ns: NameServer, h: BrokerIdentityHeader, cmd: RemotingCommand,
                            conn: Connection) -> RemotingCommand:
    await ns.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name)
    conn.registrations.pop((h.cluster_name or "", h.broker_addr or ""), None)
    return ok(cmd)


async def broker_heartbeat(ns: NameServer, h: BrokerIdentityHeader, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    await ns.heartbeat(h.cluster_name, h.broker_addr)
    return ok(cmd)  # always SUCCESS, known broker or not


# QueryDataVersionRequestHeader's @CFNotNull fields in declaration order: with extFields present,
# Java's header decoding refuses the first one missing (RemotingCommandException).
_QUERY_DATA_VERSION_NOT_NULL = ("brokerName", "brokerAddr", "clusterName", "brokerId")


async def query_data_version(ns: NameServer, h: BrokerIdentityHeader, cmd: RemotingCommand,
                             conn: Connection) -> RemotingCommand:
    if cmd.ext_fields is not None:
        missing = [f for f in _QUERY_DATA_VERSION_NOT_NULL if cmd.ext_fields.get(f) is None]
        if missing:
            raise BadRequest(f"the custom field <{missing[0]}> is null")
    parsed = await json_body(cmd.body) if cmd.body else None
    if parsed is not None and not isinstance(parsed, dict):
        raise ValidationError("body", "must be a DataVersion JSON object")
    dv = DataVersion.from_json(parsed) if parsed is not None else None
    changed, stored = await ns.query_data_version(h.cluster_name, h.broker_addr, dv)
    body = dumps_legacy(stored.to_dict()) if stored is not None else None
    return ok(cmd, {"changed": "true" if changed else "false"}, body)


async def wipe_write_perm(ns: NameServer, h: BrokerNameHeader, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    return ok(cmd, {"wipeTopicCount": str(await ns.wipe_write_perm(h.broker_name))})


async def add_write_perm(ns: NameServer, h: BrokerNameHeader, cmd: RemotingCommand,
                         conn: Connection) -> RemotingCommand:
    return ok(cmd, {"addTopicCount": str(await ns.add_write_perm(h.broker_name))})


async def get_broker_member_group(ns: NameServer, h: BrokerMemberGroupHeader,
                                  cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
    addrs = await ns.broker_member_group(h.broker_name)  # always SUCCESS, maybe empty
    group = {"brokerAddrs": addrs, "brokerName": h.broker_name, "cluster": h.cluster_name}
    body = dumps_legacy({"brokerMemberGroup": {k: v for k, v in group.items() if v is not None}})
    return make_response(cmd, ResponseCode.SUCCESS, remark=UNSET_REMARK, body=body)


async def get_cluster_info(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    info = (await ns.cluster_info()).to_dict(acting_master=cmd.version >= V5_0_0)
    return ok(cmd, body=dumps_legacy(info))


# --- routes and topics ---------------------------------------------------------------------------

# A client older than 5.0 is answered as a 4.x NameServer answers it: BrokerData without 5.0's
# enableActingMaster (its client ignores the field; docs/compatibility.md).
def _standard_route(route: TopicRouteData, acting_master: bool = True) -> bytes:
    # to_dict writes its keys sorted; a static topic's mappings are the broker's JSON, unsorted.
    dumps = dumps_standard if route.topic_queue_mapping_by_broker else dumps_standard_in_order
    return dumps(route.to_dict(acting_master=acting_master))


def _standard_route_4x(route: TopicRouteData) -> bytes:
    return _standard_route(route, acting_master=False)


def _legacy_route(route: TopicRouteData) -> bytes:
    return dumps_legacy(route.to_dict(acting_master=False))


def _route_encoding(cmd: RemotingCommand,
                    h: GetRouteInfoHeader) -> tuple[str, Callable[[TopicRouteData], bytes]]:
    if cmd.version >= V5_0_0:
        return "standard", _standard_route
    if cmd.version >= V4_9_4 or h.accept_standard_json_only:
        return "standard-4x", _standard_route_4x
    return "legacy", _legacy_route


def _route_response(cmd: RemotingCommand, h: GetRouteInfoHeader,
                    answer: RouteAnswer) -> RemotingCommand:
    zone = h.zone_name
    if h.zone_mode and zone and zone.strip():
        # Java's ZoneRouteRPCHook re-encodes the filtered route with the default encoder.
        return ok(cmd, body=dumps_legacy(filter_by_zone(answer.route, zone).to_dict()))
    name, encode = _route_encoding(cmd, h)
    return ok(cmd, body=answer.encoded(name, encode))


async def get_route(ns: NameServer, h: GetRouteInfoHeader, cmd: RemotingCommand,
                    conn: Connection) -> RemotingCommand:
    return _route_response(cmd, h, await ns.route(h.topic))


def get_route_cached(ns: NameServer, cmd: RemotingCommand) -> tuple[int, bytes] | None:
    """GET_ROUTEINFO_BY_TOPIC answered without a Redis round trip: (response code, encoded
    frame), or None when it needs one.

    The server calls this inline for every route request, so a cache hit costs no task; the
    common request (a JSON header whose only extField is the topic) is read and answered
    without the generic header and response objects."""
    ext = cmd.ext_fields
    h = None
    if ext is not None and len(ext) == 1 and "topic" in ext:  # what clients send
        topic = ext["topic"]
    else:
        h = GetRouteInfoHeader.decode(ext)
        topic = h.topic
    try:
        answer = ns.cached_route(topic)
    except NameServerError as exc:
        response = error_response(cmd, exc)
        return response.code, encode_frame(response)
    if answer is None:
        return None
    if h is not None or cmd.serialize_type != SerializeType.JSON:
        response = _route_response(cmd, h or GetRouteInfoHeader.decode(ext), answer)
        return response.code, encode_frame(response)
    version = cmd.version
    if version >= V5_0_0:
        body = answer.encoded("standard", _standard_route)
    elif version >= V4_9_4:
        body = answer.encoded("standard-4x", _standard_route_4x)
    else:
        body = answer.encoded("legacy", _legacy_route)
    return ResponseCode.SUCCESS, encode_plain_response(cmd, ResponseCode.SUCCESS, body)


def _topic_list(fetch: Callable[[NameServer], Awaitable[list[str]]]) -> Handler:
    async def handler(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                      conn: Connection) -> RemotingCommand:
        return ok(cmd, body=dumps_legacy({"topicList": await fetch(ns)}))
    return handler


async def get_topics_by_cluster(ns: NameServer, h: TopicsByClusterHeader, cmd: RemotingCommand,
                                conn: Connection) -> RemotingCommand:
    return ok(cmd, body=dumps_legacy({"topicList": await ns.topics_by_cluster(h.cluster)}))


async def get_system_topic_list(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                                conn: Connection) -> RemotingCommand:
    topics, addr = await ns.system_topic_list()
    body: dict[str, object] = {"topicList": topics}
    if addr is not None:
        body["brokerAddr"] = addr
    return ok(cmd, body=dumps_legacy(body))


async def delete_topic(ns: NameServer, h: TopicHeader, cmd: RemotingCommand,
                       conn: Connection) -> RemotingCommand:
    await ns.delete_topic(h.topic, h.cluster_name)
    return ok(cmd)  # always SUCCESS


async def register_topic(ns: NameServer, h: TopicHeader, cmd: RemotingCommand,
                         conn: Connection) -> RemotingCommand:
    route = await json_body(cmd.body) if cmd.body else None
    if route is None:
        return ok(cmd)
    if not isinstance(route, dict):
        raise ValidationError("body", "must be a TopicRouteData JSON object")
    raw = route.get("queueDatas") or []
    if not isinstance(raw, list):
        raise ValidationError("body", "queueDatas must be a list")
    qds = [QueueData.from_json(q, f"queueDatas[{i}]") for i, q in enumerate(raw)]
    await ns.register_topic(h.topic, qds)
    return ok(cmd)  # always SUCCESS


# --- NameServer config ---------------------------------------------------------------------------

async def update_config(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                        conn: Connection) -> RemotingCommand:
    await ns.update_config(cmd.body.decode("utf-8", errors="replace") if cmd.body else None)
    return ok(cmd)


async def get_config(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                     conn: Connection) -> RemotingCommand:
    return ok(cmd, body=ns.config_text().encode())


Handler = Callable[[NameServer, Any, RemotingCommand, Connection], Awaitable[RemotingCommand]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How one request code is served: its header class, its handler, and whether Java builds
    its response from a response header class first (so even refusals carry extFields)."""

    header: type[RequestHeader]
    handle: Handler
    response_header: bool = False


HANDLERS: dict[int, Endpoint] = {
    RequestCode.PUT_KV_CONFIG: Endpoint(KvHeader, put_kv_config),
    RequestCode.GET_KV_CONFIG: Endpoint(KvHeader, get_kv_config, response_header=True),
    RequestCode.DELETE_KV_CONFIG: Endpoint(KvHeader, delete_kv_config),
    RequestCode.REGISTER_BROKER: Endpoint(RegisterBrokerHeader, register_broker,
                                          response_header=True),
    RequestCode.UNREGISTER_BROKER: Endpoint(BrokerIdentityHeader, unregister_broker),
    RequestCode.GET_ROUTEINFO_BY_TOPIC: Endpoint(GetRouteInfoHeader, get_route),
    RequestCode.GET_BROKER_CLUSTER_INFO: Endpoint(EmptyHeader, get_cluster_info),
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: Endpoint(BrokerNameHeader, wipe_write_perm),
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: Endpoint(
        EmptyHeader, _topic_list(NameServer.all_topics)),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: Endpoint(TopicHeader, delete_topic),
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: Endpoint(TopicHeader, register_topic),
    RequestCode.GET_KVLIST_BY_NAMESPACE: Endpoint(KvHeader, get_kv_list),
    RequestCode.GET_TOPICS_BY_CLUSTER: Endpoint(TopicsByClusterHeader, get_topics_by_cluster),
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: Endpoint(EmptyHeader, get_system_topic_list),
    RequestCode.GET_UNIT_TOPIC_LIST: Endpoint(EmptyHeader, _topic_list(NameServer.unit_topics)),
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: Endpoint(
        EmptyHeader, _topic_list(NameServer.has_unit_sub_topics)),
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: Endpoint(
        EmptyHeader, _topic_list(NameServer.has_unit_sub_ununit_topics)),
    RequestCode.UPDATE_NAMESRV_CONFIG: Endpoint(EmptyHeader, update_config),
    RequestCode.GET_NAMESRV_CONFIG: Endpoint(EmptyHeader, get_config),
    RequestCode.QUERY_DATA_VERSION: Endpoint(BrokerIdentityHeader, query_data_version),
    RequestCode.ADD_WRITE_PERM_OF_BROKER: Endpoint(BrokerNameHeader, add_write_perm),
    RequestCode.GET_BROKER_MEMBER_GROUP: Endpoint(BrokerMemberGroupHeader,
                                                  get_broker_member_group),
    RequestCode.BROKER_HEARTBEAT: Endpoint(BrokerIdentityHeader, broker_heartbeat),
}
