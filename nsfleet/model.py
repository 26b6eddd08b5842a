"""RocketMQ's route objects, with the Java field names used on the wire.

``to_dict`` produces plain dicts whose ``brokerAddrs`` keys are ``int`` (Java ``Long``): the
standard encoder quotes them, the fastjson-legacy encoder writes them bare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2
MASTER_ID = 0
DEFAULT_HEARTBEAT_TIMEOUT_MS = 120_000
SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


@dataclass(slots=True)
class DataVersion:
    counter: int = 0
    timestamp: int = 0
    state_version: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version,
                "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> DataVersion:
        d = d or {}
        return cls(int(d.get("counter") or 0), int(d.get("timestamp") or 0),
                   int(d.get("stateVersion") or 0))


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm,
                "readQueueNums": self.read_queue_nums, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QueueData:
        return cls(str(d["brokerName"]), int(d.get("readQueueNums", 0)),
                   int(d.get("writeQueueNums", 0)), int(d.get("perm", 0)),
                   int(d.get("topicSysFlag", d.get("topicSynFlag", 0)) or 0))


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"brokerAddrs": dict(sorted(self.broker_addrs.items())),
                             "brokerName": self.broker_name, "cluster": self.cluster,
                             "enableActingMaster": self.enable_acting_master}
        if self.zone_name:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (d.get("brokerAddrs") or {}).items()}
        return cls(str(d.get("cluster", "")), str(d["brokerName"]), addrs,
                   bool(d.get("enableActingMaster", False)), d.get("zoneName"))


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"brokerDatas": [b.to_dict() for b in self.broker_datas],
                             "filterServerTable": dict(sorted(self.filter_server_table.items()))}
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [q.to_dict() for q in self.queue_datas]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicRouteData:
        return cls([QueueData.from_dict(q) for q in d.get("queueDatas") or []],
                   [BrokerData.from_dict(b) for b in d.get("brokerDatas") or []],
                   {k: list(v) for k, v in (d.get("filterServerTable") or {}).items()},
                   d.get("orderTopicConf"))


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"brokerAddrTable": {n: b.to_dict()
                                    for n, b in sorted(self.broker_addr_table.items())},
                "clusterAddrTable": {c: sorted(ns)
                                     for c, ns in sorted(self.cluster_addr_table.items())}}


@dataclass(slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers. ``fenced`` is the stateVersion early return (§3.2 step 6)."""

    master_addr: str | None = None
    ha_server_addr: str | None = None
    kv_table: dict[str, str] | None = None
    generation: int = 0
    fenced: bool = False


@dataclass(slots=True)
class LiveBroker:
    """One row of the brokers table (brokerLiveTable) as admin tools list it."""

    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    zone_name: str | None

    @property
    def deadline(self) -> int:
        return self.last_update_timestamp + self.heartbeat_timeout_millis

    def to_dict(self) -> dict[str, Any]:
        return {"clusterName": self.cluster, "brokerAddr": self.broker_addr,
                "brokerName": self.broker_name, "brokerId": self.broker_id,
                "haServerAddr": self.ha_server_addr,
                "lastUpdateTimestamp": self.last_update_timestamp,
                "heartbeatTimeoutMillis": self.heartbeat_timeout_millis,
                "deadline": self.deadline, "dataVersion": self.data_version.to_dict(),
                "zoneName": self.zone_name}
