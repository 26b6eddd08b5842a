"""Typed request headers: one small dataclass per request code, decoded once from extFields.

Decoding follows RemotingCommand.decodeCommandCustomHeaderDirectly: a missing or unparsable
field is null (``None``), never an error; a primitive Java field (``boolean compressed``) reads
as its default instead. Integer fields take ``Long.parseLong`` / ``Integer.parseInt`` literals
and booleans ``Boolean.parseBoolean``, through the one set of rules in ``nsfleet.domain.java``.
Which fields a handler requires, and what it answers without them, stays with the handler, as in
Java's processors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, TypeVar

from nsfleet.domain.java import parse_boolean, parse_int, parse_integer

H = TypeVar("H", bound="RequestHeader")

_PARSERS = {
    "str": lambda raw: raw,
    "long": parse_integer,
    "int": parse_int,
    "bool": lambda raw: None if raw is None else parse_boolean(raw),
}


def _ext(java_name: str, kind: str = "str", default: Any = None) -> Any:
    return field(default=default, metadata={"java": java_name, "kind": kind})


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Base of every header class. The zone fields are added by the client's ZoneRouteRPCHook
    to any request, after signing."""

    @classmethod
    def decode(cls: type[H], ext_fields: dict[str, str] | None) -> H:
        ext = ext_fields or {}
        values: dict[str, Any] = {}
        for name, java, parse, default in _plan(cls):
            value = parse(ext.get(java))
            values[name] = default if value is None else value
        return cls(**values)


@cache
def _plan(cls: type[RequestHeader]) -> tuple[tuple[str, str, Any, Any], ...]:
    """(field, extFields key, parser, default) of each field, worked out once per class (every
    route request decodes a header)."""
    return tuple((f.name, f.metadata["java"], _PARSERS[f.metadata["kind"]], f.default)
                 for f in fields(cls))


@dataclass(frozen=True, slots=True)
class EmptyHeader(RequestHeader):
    """Codes whose Java processor reads no header."""


@dataclass(frozen=True, slots=True)
class KvHeader(RequestHeader):
    """PutKVConfigRequestHeader, GetKVConfigRequestHeader, DeleteKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader (the last has no key)."""

    namespace: str | None = _ext("namespace")
    key: str | None = _ext("key")
    value: str | None = _ext("value")


@dataclass(frozen=True, slots=True)
class BrokerIdentityHeader(RequestHeader):
    """UnRegisterBrokerRequestHeader, QueryDataVersionRequestHeader and
    BrokerHeartbeatRequestHeader: who the broker is."""

    cluster_name: str | None = _ext("clusterName")
    broker_addr: str | None = _ext("brokerAddr")
    broker_name: str | None = _ext("brokerName")
    broker_id: int | None = _ext("brokerId", "long")


@dataclass(frozen=True, slots=True)
class RegisterBrokerHeader(RequestHeader):
    """RegisterBrokerRequestHeader."""

    cluster_name: str | None = _ext("clusterName")
    broker_addr: str | None = _ext("brokerAddr")
    broker_name: str | None = _ext("brokerName")
    broker_id: int | None = _ext("brokerId", "long")
    ha_server_addr: str | None = _ext("haServerAddr")
    heartbeat_timeout_millis: int | None = _ext("heartbeatTimeoutMillis", "long")
    enable_acting_master: bool | None = _ext("enableActingMaster", "bool")
    compressed: bool = _ext("compressed", "bool", False)
    body_crc32: int = _ext("bodyCrc32", "int", 0)  # Integer, default 0: 0 skips the check
    zone_name: str | None = _ext("__ZONE_NAME")


@dataclass(frozen=True, slots=True)
class GetRouteInfoHeader(RequestHeader):
    """GetRouteInfoRequestHeader, plus the zone hints ZoneRouteRPCHook reads."""

    topic: str | None = _ext("topic")
    accept_standard_json_only: bool | None = _ext("acceptStandardJsonOnly", "bool")
    zone_name: str | None = _ext("__ZONE_NAME")
    zone_mode: bool | None = _ext("__ZONE_MODE", "bool")


@dataclass(frozen=True, slots=True)
class BrokerNameHeader(RequestHeader):
    """WipeWritePermOfBrokerRequestHeader, AddWritePermOfBrokerRequestHeader."""

    broker_name: str | None = _ext("brokerName")


@dataclass(frozen=True, slots=True)
class BrokerMemberGroupHeader(RequestHeader):
    """GetBrokerMemberGroupRequestHeader."""

    cluster_name: str | None = _ext("clusterName")
    broker_name: str | None = _ext("brokerName")


@dataclass(frozen=True, slots=True)
class TopicHeader(RequestHeader):
    """DeleteTopicFromNamesrvRequestHeader and RegisterTopicRequestHeader (no clusterName)."""

    topic: str | None = _ext("topic")
    cluster_name: str | None = _ext("clusterName")


@dataclass(frozen=True, slots=True)
class TopicsByClusterHeader(RequestHeader):
    """GetTopicsByClusterRequestHeader."""

    cluster: str | None = _ext("cluster")
