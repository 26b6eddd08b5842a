"""Turning JSON request bodies into store calls; every failure names its field."""

from __future__ import annotations

from typing import Any

from nsfleet import validation
from nsfleet.model import DataVersion, QueueData, TopicConfig
from nsfleet.store import BrokerRegistration
from nsfleet.validation import ValidationError


def required(body: dict[str, Any], field: str) -> Any:
    if body.get(field) is None:
        raise ValidationError(field, "is required")
    return body[field]


def string(body: dict[str, Any], field: str, *, optional: bool = False) -> str | None:
    value = body.get(field)
    if value is None:
        if optional:
            return None
        raise ValidationError(field, "is required")
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    return value


def integer(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, "must be an integer")
    return value


def boolean(body: dict[str, Any], field: str) -> bool | None:
    value = body.get(field)
    if value is not None and not isinstance(value, bool):
        raise ValidationError(field, "must be true or false")
    return value


def obj(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(field, "must be an object")
    return value


def broker_identity(body: dict[str, Any]) -> tuple[str, str, str, int]:
    """clusterName, brokerAddr, brokerName, brokerId — validated."""
    cluster = validation.name(string(body, "clusterName"), "clusterName")
    addr = validation.addr(string(body, "brokerAddr"))
    name = validation.name(string(body, "brokerName"), "brokerName")
    broker_id = validation.broker_id(integer(required(body, "brokerId"), "brokerId"))
    return cluster, addr, name, broker_id


def data_version(value: Any, field: str = "dataVersion") -> DataVersion:
    if value is None:
        return DataVersion()
    d = obj(value, field)
    return DataVersion(*(integer(d.get(k, 0), f"{field}.{k}")
                         for k in ("counter", "timestamp", "stateVersion")))


def registration(body: dict[str, Any]) -> BrokerRegistration:
    cluster, addr, name, broker_id = broker_identity(body)
    timeout = body.get("heartbeatTimeoutMillis")
    topics: list[TopicConfig] = []
    for topic, conf in obj(body.get("topicConfigTable") or {}, "topicConfigTable").items():
        f = f"topicConfigTable.{topic}"
        conf = obj(conf, f)
        topics.append(TopicConfig(
            topic, integer(conf.get("readQueueNums", 16), f"{f}.readQueueNums"),
            integer(conf.get("writeQueueNums", 16), f"{f}.writeQueueNums"),
            integer(conf.get("perm", 6), f"{f}.perm"),
            integer(conf.get("topicSysFlag", 0), f"{f}.topicSysFlag"),
            bool(conf.get("order", False))))
    filters = body.get("filterServerList")
    if filters is not None and (not isinstance(filters, list)
                                or not all(isinstance(f, str) for f in filters)):
        raise ValidationError("filterServerList", "must be a list of host:port strings")
    return BrokerRegistration(
        cluster, addr, name, broker_id,
        ha_server_addr=string(body, "haServerAddr", optional=True),
        zone_name=string(body, "zoneName", optional=True),
        heartbeat_timeout_millis=None if timeout is None else integer(timeout,
                                                                      "heartbeatTimeoutMillis"),
        enable_acting_master=boolean(body, "enableActingMaster"),
        data_version=data_version(body.get("dataVersion")),
        topic_configs=topics, filter_server_list=filters)


def queue_datas(body: dict[str, Any]) -> list[QueueData]:
    raw = required(body, "queueDatas")
    if not isinstance(raw, list) or not raw:
        raise ValidationError("queueDatas", "must be a non-empty list")
    out = []
    for i, q in enumerate(raw):
        f = f"queueDatas[{i}]"
        q = obj(q, f)
        out.append(QueueData(
            validation.name(q.get("brokerName"), f"{f}.brokerName"),
            integer(required(q, "readQueueNums"), f"{f}.readQueueNums"),
            integer(required(q, "writeQueueNums"), f"{f}.writeQueueNums"),
            integer(q.get("perm", 6), f"{f}.perm"),
            integer(q.get("topicSysFlag", 0), f"{f}.topicSysFlag")))
    return out
