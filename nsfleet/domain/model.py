"""RocketMQ's route objects, with the Java field names used on the wire.

``to_dict`` produces plain dicts whose ``brokerAddrs`` keys are ``int`` (Java ``Long``): the
standard encoder quotes them, the fastjson-legacy encoder writes them bare.

The values a worker keeps by the hundred thousand (topic configs in the registration memos,
queue and broker data in cached routes) are ``msgspec.Struct``s with ``gc=False``: the cyclic
garbage collector does not track them, so its full collections, which stop the event loop for as
long as they take, do not grow with the cache (measured: 100 ms pauses with 9,000 cached routes
as dataclasses). They hold no reference that could close a cycle back to themselves. Copy one
changed with ``msgspec.structs.replace``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

import msgspec

from nsfleet.domain import validation
from nsfleet.domain.errors import ValidationError
from nsfleet.domain.java import to_bool, to_int, to_object

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2
MASTER_ID = 0
DEFAULT_HEARTBEAT_TIMEOUT_MS = 120_000
MAX_HEARTBEAT_TIMEOUT_MS = 86_400_000
# TopicConfig's field initialisers: what a topic missing a value gets, whichever protocol.
DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16
DEFAULT_PERM = PERM_READ | PERM_WRITE
SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
# The KV namespace whose table is served as routes' orderTopicConf (NamesrvUtil).
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


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
    def from_json(cls, value: Any, field: str = "dataVersion") -> DataVersion:
        """A DataVersion JSON object; missing fields (and a null object) read as 0. Java would
        default a missing timestamp to "now", which nothing depends on."""
        d = to_object(value, field)
        return cls(to_int(d.get("counter"), f"{field}.counter"),
                   to_int(d.get("timestamp"), f"{field}.timestamp"),
                   to_int(d.get("stateVersion"), f"{field}.stateVersion"))


# A number msgspec decodes into a TopicConfig only when Java's int can hold it.
JavaInt = Annotated[int, msgspec.Meta(ge=validation.JAVA_INT_MIN, le=validation.JAVA_INT_MAX)]


class TopicConfig(msgspec.Struct, gc=False, rename="camel"):
    """One topic of a broker's table. Its field names and bounds are fastjson's TopicConfig
    (camelCase, Java ints): ``nsfleet.domain.topic_tables`` decodes the common shape of a
    table straight into these; constructed in Python, the numbers are not checked (the
    registration drops a topic whose number is out of range, ``check_topics``)."""

    topic_name: str
    read_queue_nums: JavaInt = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: JavaInt = DEFAULT_WRITE_QUEUE_NUMS
    perm: JavaInt = DEFAULT_PERM
    topic_sys_flag: JavaInt = 0
    order: bool = False

    @classmethod
    def from_json(cls, key: str, value: Any, field: str = "topicConfigTable") -> TopicConfig:
        """One topicConfigTable entry. Java keys the route by the TopicConfig's own topicName;
        a body that leaves it out (hand-written JSON) falls back on the map key."""
        what = f"{field}.{key}"
        obj = to_object(value, what)
        name = obj.get("topicName")
        return cls(
            topic_name=str(name) if name is not None else key,
            read_queue_nums=to_int(obj.get("readQueueNums"), f"{what}.readQueueNums",
                                   DEFAULT_READ_QUEUE_NUMS),
            write_queue_nums=to_int(obj.get("writeQueueNums"), f"{what}.writeQueueNums",
                                    DEFAULT_WRITE_QUEUE_NUMS),
            perm=to_int(obj.get("perm"), f"{what}.perm", DEFAULT_PERM),
            topic_sys_flag=to_int(obj.get("topicSysFlag"), f"{what}.topicSysFlag"),
            order=to_bool(obj.get("order"), f"{what}.order"))


class QueueData(msgspec.Struct, gc=False):
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

    @classmethod
    def from_json(cls, value: Any, field: str) -> QueueData:
        """A QueueData JSON object from a request, with TopicConfig's defaults for missing
        values (``topicSynFlag`` is the field's old, misspelt name)."""
        obj = to_object(value, field)
        name = obj.get("brokerName")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{field}.brokerName", "is required")
        sys_flag = obj.get("topicSysFlag", obj.get("topicSynFlag"))
        return cls(name,
                   to_int(obj.get("readQueueNums"), f"{field}.readQueueNums",
                          DEFAULT_READ_QUEUE_NUMS),
                   to_int(obj.get("writeQueueNums"), f"{field}.writeQueueNums",
                          DEFAULT_WRITE_QUEUE_NUMS),
                   to_int(obj.get("perm"), f"{field}.perm", DEFAULT_PERM),
                   to_int(sys_flag, f"{field}.topicSysFlag"))


class BrokerData(msgspec.Struct, gc=False):
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = msgspec.field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_dict(self, *, acting_master: bool = True) -> dict[str, Any]:
        """``acting_master=False``: as a 4.x NameServer writes it, without 5.0's field."""
        d: dict[str, Any] = {"brokerAddrs": dict(sorted(self.broker_addrs.items())),
                             "brokerName": self.broker_name, "cluster": self.cluster}
        if acting_master:
            d["enableActingMaster"] = self.enable_acting_master
        if self.zone_name:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (d.get("brokerAddrs") or {}).items()}
        return cls(str(d.get("cluster", "")), str(d["brokerName"]), addrs,
                   bool(d.get("enableActingMaster", False)), d.get("zoneName"))


class SharedDicts:
    """The dicts of BrokerData and QueueData that many routes share (nsfleet.store.route_parts
    makes one per distinct group entry and queue row): written once, not per route encoded.
    Found by identity; each entry holds its object, so no other object can take its id while the
    entry lasts. Bounded: past ``limit`` entries it is emptied, and a part left out has its dict
    written as any other's. The dicts handed out are shared: they are for encoding only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_id: dict[int, tuple[object, dict[bool, dict[str, Any]]]] = {}

    def add(self, part: BrokerData | QueueData) -> None:
        if len(self._by_id) >= self.limit:
            self._by_id.clear()
        self._by_id[id(part)] = (part, {})

    def broker(self, b: BrokerData, acting_master: bool) -> dict[str, Any]:
        hit = self._by_id.get(id(b))
        if hit is None or hit[0] is not b:
            return b.to_dict(acting_master=acting_master)
        d = hit[1].get(acting_master)
        if d is None:
            d = hit[1][acting_master] = b.to_dict(acting_master=acting_master)
        return d

    def queue(self, q: QueueData) -> dict[str, Any]:
        hit = self._by_id.get(id(q))
        if hit is None or hit[0] is not q:
            return q.to_dict()
        d = hit[1].get(True)
        if d is None:
            d = hit[1][True] = q.to_dict()
        return d


# Twice nsfleet.store.route_parts.MAX_PARTS: its groups and its queue rows.
SHARED_DICTS: Final = SharedDicts(32_768)


class TopicRouteData(msgspec.Struct, gc=False):
    queue_datas: list[QueueData] = msgspec.field(default_factory=list)
    broker_datas: list[BrokerData] = msgspec.field(default_factory=list)
    filter_server_table: dict[str, list[str]] = msgspec.field(default_factory=dict)
    order_topic_conf: str | None = None
    # Static topics: brokerName -> TopicQueueMappingInfo, as the broker registered it.
    topic_queue_mapping_by_broker: dict[str, dict[str, Any]] | None = None

    def to_dict(self, *, acting_master: bool = True) -> dict[str, Any]:
        # Their dicts shared with every route that lists the same parts: see SharedDicts.
        broker, queue = SHARED_DICTS.broker, SHARED_DICTS.queue
        d: dict[str, Any] = {"brokerDatas": [broker(b, acting_master) for b in self.broker_datas],
                             "filterServerTable": dict(sorted(self.filter_server_table.items()))}
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [queue(q) for q in self.queue_datas]
        if self.topic_queue_mapping_by_broker is not None:
            d["topicQueueMappingByBroker"] = dict(sorted(
                self.topic_queue_mapping_by_broker.items()))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicRouteData:
        return cls([QueueData.from_dict(q) for q in d.get("queueDatas") or []],
                   [BrokerData.from_dict(b) for b in d.get("brokerDatas") or []],
                   {k: list(v) for k, v in (d.get("filterServerTable") or {}).items()},
                   d.get("orderTopicConf"), d.get("topicQueueMappingByBroker"))


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self, *, acting_master: bool = True) -> dict[str, Any]:
        return {"brokerAddrTable": {n: b.to_dict(acting_master=acting_master)
                                    for n, b in sorted(self.broker_addr_table.items())},
                "clusterAddrTable": {c: sorted(ns)
                                     for c, ns in sorted(self.cluster_addr_table.items())}}


@dataclass(slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers. ``fenced`` is the stateVersion early return of
    RouteInfoManager.registerBroker."""

    master_addr: str | None = None
    ha_server_addr: str | None = None
    kv_table: dict[str, str] | None = None
    generation: int = 0
    fenced: bool = False
    dropped_topics: list[DroppedTopic] = field(default_factory=list)
    changed: bool = False  # the registration changed the tables (new broker, topic or value)
    # Answered from the worker's memo of unchanged registrations: nothing written yet, its
    # DataVersion pending (nsfleet/store/unchanged_chunks.py).
    remembered: bool = False


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


def topic_queue_mapping_info(raw: dict[str, Any], bname: str) -> dict[str, Any]:
    """A TopicQueueMappingInfo as Java holds it once fastjson filled the object: every field,
    with the class's defaults for those the broker left out (``currIdMap`` keyed by int)."""
    ids = raw.get("currIdMap") or {}
    return {"bname": str(raw.get("bname") or bname),
            "currIdMap": {int(k): v for k, v in ids.items()} if isinstance(ids, dict) else {},
            "dirty": to_bool(raw.get("dirty"), "dirty"),
            "epoch": to_int(raw.get("epoch"), "epoch"),
            "scope": str(raw.get("scope") or "__global__"),
            "topic": raw.get("topic"),
            "totalQueues": to_int(raw.get("totalQueues"), "totalQueues")}


@dataclass(frozen=True, slots=True)
class DroppedTopic:
    """A topic of a registration that could not be stored, and why."""

    topic: str
    reason: str

    def describe(self) -> str:
        return f"{self.topic[:200]!r}: {self.reason}"


@dataclass(frozen=True, slots=True)
class CheckedTopics:
    """A topic table as registration stores it: how many topics were sent, the storable ones
    (a topic listed twice keeps its last entry) and the dropped ones with why."""

    sent: int
    kept: Sequence[TopicConfig]
    dropped: Sequence[DroppedTopic]


def check_topics(configs: Sequence[TopicConfig], *,
                 numbers_checked: bool = False) -> CheckedTopics:
    """Keep every topic that can be stored, as the Java NameServer keeps every topic: a topic
    that cannot be stored (``validation.registered_topic``, values outside Java's int) is
    dropped alone. ``numbers_checked``: the decoder proved every number within Java's int."""
    if _storable_as_sent(configs, numbers_checked):
        return CheckedTopics(len(configs), list(configs), [])
    return _check_each(configs)


def _check_each(configs: Sequence[TopicConfig]) -> CheckedTopics:
    """``check_topics`` topic by topic."""
    kept: dict[str, TopicConfig] = {}
    dropped: list[DroppedTopic] = []
    lo, hi = validation.JAVA_INT_MIN, validation.JAVA_INT_MAX
    for tc in configs:
        reason = validation.registered_topic(tc.topic_name)
        # One chained comparison for the usual case (60,000 topics: this loop is most of
        # a big registration's Python time); the field is named only when one is out.
        if reason is None and not (lo <= tc.read_queue_nums <= hi and lo <= tc.write_queue_nums
                                   <= hi and lo <= tc.perm <= hi and lo <= tc.topic_sys_flag
                                   <= hi):
            for value, what in ((tc.read_queue_nums, "readQueueNums"),
                                (tc.write_queue_nums, "writeQueueNums"),
                                (tc.perm, "perm"), (tc.topic_sys_flag, "topicSysFlag")):
                if not lo <= value <= hi:
                    reason = f"{what} {value} is outside Java's int"
        if reason is None:
            if tc.topic_name in kept:
                del kept[tc.topic_name]
            kept[tc.topic_name] = tc
        else:
            dropped.append(DroppedTopic(tc.topic_name, reason))
    return CheckedTopics(len(configs), list(kept.values()), dropped)


def _storable_as_sent(configs: Sequence[TopicConfig], numbers_checked: bool) -> bool:
    """Whether ``check_topics`` would keep every topic as sent: each storable, none listed
    twice. The names are checked a whole table at a time (a registration storm's workers spent
    ~4 ms per 10,000-topic table checking them one by one, delaying the first write to Redis)."""
    names = [tc.topic_name for tc in configs]
    if not names:
        return True
    lengths = list(map(len, names))
    # A space is storable, so the joined names hold an unstorable character only in a name;
    # " @" may also be inside a name, which then takes the topic-by-topic path.
    joined = " ".join(names)
    if (min(lengths) == 0 or max(lengths) > validation.REGISTERED_TOPIC_MAX_LEN
            or len(set(names)) != len(names) or "*" in names or joined.startswith("@")
            or " @" in joined or validation.unstorable_character(joined)):
        return False
    if numbers_checked:
        return True
    lo, hi = validation.JAVA_INT_MIN, validation.JAVA_INT_MAX
    return all(lo <= tc.read_queue_nums <= hi and lo <= tc.write_queue_nums <= hi
               and lo <= tc.perm <= hi and lo <= tc.topic_sys_flag <= hi for tc in configs)


@dataclass(slots=True)
class BrokerRegistration:
    """One REGISTER_BROKER call, whichever protocol it came in on."""

    cluster: str | None
    addr: str | None
    name: str | None
    broker_id: int | None
    ha_server_addr: str | None = None
    zone_name: str | None = None
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None  # None: an old-version broker (no header field)
    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: Sequence[TopicConfig] = ()
    filter_server_list: Sequence[str] | None = None
    # Static topics: topic -> TopicQueueMappingInfo as sent (topicQueueMappingInfoMap). Their
    # presence turns deleteTopicWithBrokerRegistration off for this call, as in Java.
    topic_queue_mappings: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Filled by ``validated``: how many topics the table held as sent (the single-topic guard
    # counts those), and the ones that could not be stored.
    topics_sent: int = 0
    dropped_topics: list[DroppedTopic] = field(default_factory=list)
    # Every number of topic_configs proven within Java's int by the decoder (the common shape
    # of a remoting body, nsfleet.domain.topic_tables): validation checks only the names.
    numbers_checked: bool = False
    # Where the store keeps its checks and encoding of topic_configs for as long as the decoded
    # body is kept (a remoting connection's last, ``RegisterBody.table_memo``): a worker's
    # bounded memo of tables cannot hold every broker's when it sees more topics than its
    # bound, and its brokers, re-registering in turn, would evict each other every round.
    table_memo: dict[Any, Any] | None = None

    def validated(self, topics: CheckedTopics | None = None) -> BrokerRegistration:
        """Check what identifies the broker (ValidationError naming the field) and keep every
        topic that can be stored, as the Java NameServer keeps every topic: a topic that cannot
        be stored (``validation.registered_topic``, values outside Java's int) is dropped alone
        and listed in ``dropped_topics``. A topic listed twice keeps its last entry.
        ``topics``: ``check_topics(self.topic_configs)`` when the caller already has it."""
        validation.name(self.cluster, "clusterName")
        validation.addr(self.addr, "brokerAddr")
        validation.name(self.name, "brokerName")
        validation.integer(self.broker_id, "brokerId", validation.JAVA_LONG_MIN,
                           validation.JAVA_LONG_MAX)
        if self.ha_server_addr:
            validation.stored_text(self.ha_server_addr, "haServerAddr")
        if self.zone_name:
            validation.stored_text(self.zone_name, "zoneName")
        if self.heartbeat_timeout_millis is not None:
            # Java takes any long; a value past these bounds would expire at once or never.
            self.heartbeat_timeout_millis = min(max(self.heartbeat_timeout_millis, 1),
                                                MAX_HEARTBEAT_TIMEOUT_MS)
        for f in ("counter", "timestamp", "state_version"):
            validation.integer(getattr(self.data_version, f), f"dataVersion.{f}",
                               validation.JAVA_LONG_MIN, validation.JAVA_LONG_MAX)
        for i, f in enumerate(self.filter_server_list or ()):
            validation.stored_text(f, f"filterServerList[{i}]")
        checked = (topics if topics is not None else
                   check_topics(self.topic_configs, numbers_checked=self.numbers_checked))
        self.topics_sent = checked.sent
        self.dropped_topics = list(checked.dropped)
        self.topic_configs = checked.kept
        return self
