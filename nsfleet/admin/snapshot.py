"""What a name service answers, read whole and flattened into comparable fields, and the
comparison of two such snapshots (``nsfleet admin diff``).

Every answer is reduced to ``(kind, group, field) -> value`` facts; a difference is a fact whose
values differ. The same difference in many topics (a broker group's wiped write perm, a missing
member) is one difference listing the topics. Normalised, and nothing else: the orderings the
README lists as deliberate (topic lists, ``brokerDatas`` and ``queueDatas`` order) and
``filterServerTable`` entries without filter servers (Java maps them to null, fastjson omits
them); a KV namespace that does not exist reads as an empty one."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nsfleet.client.name_service import NameService, Progress, kv_tables

# The NamesrvConfig keys that change what a NameServer answers, with Java's defaults (a key a
# side does not report, e.g. an older version's, counts as its default).
ANSWER_CONFIG: dict[str, str] = {
    "orderMessageEnable": "false",
    "returnOrderTopicConfigToBroker": "true",
    "supportActingMaster": "false",
    "deleteTopicWithBrokerRegistration": "false",
    "enableAllTopicList": "true",
    "enableTopicList": "true",
    "notifyMinBrokerIdChanged": "false",
    "clusterTest": "false",
    "productEnvName": "center",
    "needWaitForService": "false",  # routes answer "not ready" for a while after a start
    "waitSecondsForService": "45",
}
MISSING = None
QUEUE_NUMS = "readQueueNums/writeQueueNums"


def _canonical(value: Any) -> Any:
    """Hashable and printable: containers as sorted JSON text."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


@dataclass
class Snapshot:
    """One side's answers."""

    cluster_info: dict[str, Any]
    topics: set[str]
    routes: dict[str, dict[str, Any] | None]
    kv: dict[str, dict[str, str] | None]
    config: dict[str, str]


async def read_snapshot(side: NameService, namespaces: Iterable[str], progress: Progress,
                        topics: Iterable[str] | None = None,
                        on_total: Progress | None = None) -> Snapshot:
    """Read a side whole; ``topics``: read only these routes (and still the whole topic
    list). ``on_total`` is told how many routes will be read, ``progress`` each one read."""
    info = await side.cluster_info()
    listed = set(await side.topics())
    wanted = sorted(listed if topics is None else set(topics))
    if on_total is not None:
        on_total(len(wanted))
    routes = await side.routes(wanted, progress)
    kv = await kv_tables(side, namespaces)
    config = await side.config()
    return Snapshot(info, listed, routes, kv, config)


@dataclass
class Variant:
    """One pair of differing values, and the topics it is seen in (none: cluster info, KV,
    config)."""

    left: Any
    right: Any
    topics: list[str] = field(default_factory=list)


@dataclass
class Difference:
    """One field that differs (kind, broker group, field), with each pair of values it has:
    a wiped write perm is one difference, perm 6 / 4 in some topics and 7 / 5 in others."""

    kind: str  # broker, queue, route, topic, kv, config
    group: str  # broker group, filter-server broker address, KV namespace, or ""
    field: str
    variants: list[Variant]

    @property
    def identity(self) -> tuple[str, str, str]:
        return self.kind, self.group, self.field

    @property
    def topics(self) -> list[str]:
        return sorted({t for v in self.variants for t in v.topics})

    def to_json(self) -> dict[str, Any]:
        first = self.variants[0]
        return {"kind": self.kind, "group": self.group, "field": self.field, "a": first.left,
                "b": first.right, "topics": self.topics,
                "values": [{"a": v.left, "b": v.right, "topics": v.topics}
                           for v in self.variants]}


Facts = dict[tuple[str, str, str], Any]  # (kind, group, field) -> value


def group_facts(info: dict[str, Any]) -> Facts:
    """ClusterInfo as broker-group facts: present, cluster, each brokerAddrs entry, zoneName,
    enableActingMaster, and the clusters listing the group."""
    facts: Facts = {}
    for name, data in (info.get("brokerAddrTable") or {}).items():
        facts.update(broker_data_facts(name, data))
    listing: dict[str, list[str]] = {}
    for cluster, names in (info.get("clusterAddrTable") or {}).items():
        for name in names or []:
            listing.setdefault(name, []).append(cluster)
    for name, clusters in listing.items():
        facts[("broker", name, "clusterAddrTable")] = ",".join(sorted(clusters))
    return facts


def broker_data_facts(name: str, data: dict[str, Any]) -> Facts:
    facts: Facts = {
        ("broker", name, "present"): True,
        ("broker", name, "cluster"): data.get("cluster"),
        ("broker", name, "zoneName"): data.get("zoneName"),
        ("broker", name, "enableActingMaster"): bool(data.get("enableActingMaster", False)),
    }
    for broker_id, addr in (data.get("brokerAddrs") or {}).items():
        facts[("broker", name, f"brokerAddrs[{int(broker_id)}]")] = addr
    return facts


def route_facts(route: dict[str, Any]) -> Facts:
    """A TopicRouteData as facts: its BrokerDatas, QueueDatas, orderTopicConf, filter servers
    and static-topic mappings."""
    facts: Facts = {}
    for data in route.get("brokerDatas") or []:
        facts.update(broker_data_facts(data.get("brokerName"), data))
    for queue in route.get("queueDatas") or []:
        name = queue.get("brokerName")
        facts[("queue", name, "present")] = True
        # One queue count, read/write: a topic re-created with more queues is one difference.
        facts[("queue", name, QUEUE_NUMS)] = (f"{queue.get('readQueueNums')}/"
                                              f"{queue.get('writeQueueNums')}")
        facts[("queue", name, "perm")] = queue.get("perm")
        # RocketMQ 4.x spells it topicSynFlag.
        facts[("queue", name, "topicSysFlag")] = queue.get("topicSysFlag",
                                                           queue.get("topicSynFlag", 0))
    facts[("route", "", "orderTopicConf")] = route.get("orderTopicConf")
    for addr, servers in (route.get("filterServerTable") or {}).items():
        if servers:  # Java maps members without filter servers to null
            facts[("route", addr, "filterServerTable")] = _canonical(servers)
    for bname, mapping in (route.get("topicQueueMappingByBroker") or {}).items():
        facts[("route", bname, "topicQueueMapping")] = _canonical(_string_keys(mapping))
    return facts


def absent_groups(left: Facts, right: Facts, kind: str = "broker") -> set[str]:
    """Groups present on one side only."""
    return {g for (k, g, f) in left.keys() ^ right.keys() if k == kind and f == "present"}


def fold_absent(left: Facts, right: Facts) -> set[str]:
    """A group on one side only is one difference, its presence: drop its other facts (and a
    missing BrokerData's queue data) from both. The groups missing whole."""
    gone = absent_groups(left, right)
    gone_queues = absent_groups(left, right, "queue")

    def folded(kind: str, group: str, name: str) -> bool:
        if kind == "broker":
            return group in gone and name != "present"
        if kind == "queue":
            return group in gone or (group in gone_queues and name != "present")
        return False

    for facts in (left, right):
        for fact in [f for f in facts if folded(*f)]:
            del facts[fact]
    return gone


def _string_keys(value: Any) -> Any:
    """fastjson's bare numeric map keys (currIdMap) read as the standard form's strings."""
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


class _Collector:
    """Differences by (kind, group, field), each with its pairs of values and their topics."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, str], dict[tuple[Any, Any], Variant]] = {}

    def add(self, kind: str, group: str, name: str, left: Any, right: Any,
            topic: str | None = None) -> None:
        pairs = self.found.setdefault((kind, group, name), {})
        a, b = _canonical(left), _canonical(right)
        variant = pairs.setdefault((a, b), Variant(a, b))
        if topic is not None:
            variant.topics.append(topic)

    def compare(self, left: Facts, right: Facts, topic: str | None = None) -> None:
        for fact in sorted(left.keys() | right.keys()):
            a, b = left.get(fact, MISSING), right.get(fact, MISSING)
            if _canonical(a) != _canonical(b):
                self.add(*fact, a, b, topic)

    def differences(self) -> list[Difference]:
        return [Difference(*identity, sorted(pairs.values(), key=lambda v: repr(v.left)))
                for identity, pairs in sorted(self.found.items())]


def compare(a: Snapshot, b: Snapshot, namespaces: Iterable[str],
            topics: Iterable[str] | None = None) -> list[Difference]:
    """Every difference between two snapshots (``topics``: compare only these routes)."""
    out = _Collector()
    ga, gb = group_facts(a.cluster_info), group_facts(b.cluster_info)
    missing_groups = fold_absent(ga, gb)
    out.compare(ga, gb)
    wanted = sorted((a.topics | b.topics) if topics is None else set(topics))
    for topic in wanted:
        ra, rb = a.routes.get(topic), b.routes.get(topic)
        if ra is None or rb is None:
            if ra is None and rb is None and (topic in a.topics) == (topic in b.topics):
                continue
            # A topic on one side only: part of a missing group's difference when every group
            # serving it is one, else its own.
            route = ra or rb or {}
            served = {q.get("brokerName") for q in route.get("queueDatas") or []}
            if served and served <= missing_groups:
                for g in sorted(served):
                    present = ("broker", g, "present")
                    out.add(*present, ga.get(present), gb.get(present), topic)
            else:
                out.add("topic", "", "present", ra is not None, rb is not None, topic)
            continue
        fa, fb = route_facts(ra), route_facts(rb)
        fold_absent(fa, fb)
        out.compare(fa, fb, topic)
    for ns in sorted(set(namespaces)):
        out.compare({("kv", ns, k): v for k, v in (a.kv.get(ns) or {}).items()},
                    {("kv", ns, k): v for k, v in (b.kv.get(ns) or {}).items()})
    out.compare({("config", "", k): a.config.get(k, d) for k, d in ANSWER_CONFIG.items()},
                {("config", "", k): b.config.get(k, d) for k, d in ANSWER_CONFIG.items()})
    return out.differences()


def touched_topics(diffs: Iterable[Difference]) -> set[str]:
    return {t for d in diffs for t in d.topics}
