"""A production-sized fleet registered over HTTP in a few seconds, for the console's browser test
and bench/console_bench.py: 10,000 topics and 500 brokers by default (250 master/slave groups in
5 clusters, each topic served by 2 groups), one topic in ten a ``%RETRY%`` one, plus RocketMQ's
own system topics on every group."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tests.support.workers import request

SYSTEM_TOPICS = ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC",
                 "OFFSET_MOVED_EVENT")
HEARTBEAT_TIMEOUT_MS = 600_000  # alive for the whole test or bench, with no heartbeats


@dataclass(frozen=True, slots=True)
class BigFleet:
    topics: list[str]  # every topic registered, system topics included
    groups: list[str]
    clusters: list[str]

    def group_of(self, index: int) -> str:
        return self.groups[index % len(self.groups)]

    def cluster_of(self, group: str) -> str:
        return self.clusters[self.groups.index(group) % len(self.clusters)]

    def addr(self, group: str, broker_id: int) -> str:
        n = self.groups.index(group)
        return f"10.{broker_id}.{n // 250}.{n % 250}:10911"


def topic_name(i: int) -> str:
    return f"%RETRY%GID_Orders-{i:05d}" if i % 10 == 9 else f"Orders-{i:05d}"


def layout(topics: int = 10_000, brokers: int = 500, clusters: int = 5) -> BigFleet:
    app_topics = topics - len(SYSTEM_TOPICS)
    return BigFleet([topic_name(i) for i in range(app_topics)] + list(SYSTEM_TOPICS),
                    [f"broker-{g:03d}" for g in range(brokers // 2)],
                    [f"Cluster-{c}" for c in range(clusters)])


def register(url: str, fleet: BigFleet) -> None:
    """Register every broker of ``fleet`` with the worker at ``url`` (master and slave of each
    group; topic i on groups i and i+1)."""
    tables: dict[str, dict[str, Any]] = {g: {} for g in fleet.groups}
    app_topics = [t for t in fleet.topics if t not in SYSTEM_TOPICS]
    for i, topic in enumerate(app_topics):
        for group in (fleet.group_of(i), fleet.group_of(i + 1)):
            tables[group][topic] = {"readQueueNums": 8, "writeQueueNums": 8,
                                    "perm": 4 if i % 20 == 0 else 6}
    for group in fleet.groups:
        for topic in SYSTEM_TOPICS:
            tables[group][topic] = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 7}

    def one(args: tuple[str, int]) -> None:
        group, broker_id = args
        status, body = request("POST", f"{url}/v1/brokers/register", {
            "clusterName": fleet.cluster_of(group), "brokerName": group, "brokerId": broker_id,
            "brokerAddr": fleet.addr(group, broker_id),
            "heartbeatTimeoutMillis": HEARTBEAT_TIMEOUT_MS,
            "dataVersion": {"counter": 1, "timestamp": 1_764_000_000_000},
            "topicConfigTable": tables[group]}, timeout=30)
        if status != 200:
            raise RuntimeError(f"registering {group}/{broker_id}: {status} {body}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, [(g, b) for b in (0, 1) for g in fleet.groups]))
