"""The simulated deployment of ``nsfleet simulate``: broker groups, members and topic tables that
look like a RocketMQ deployment's (deterministic for a given seed).

* groups broker-a, broker-b, … (then broker-aa, …), round robin over the clusters
  (``DefaultCluster``, or ``DefaultCluster-1`` … when there are several); every
  ``slaves_every``-th group has a slave (brokerId 1), until ``brokers`` members exist;
* addresses 10.0.x.y:10911 with the HA listener on port 10912, as a broker's defaults;
* user topics ``TopicTest-<n>``, each on 1..``spread`` random groups with 4, 8 or 16 queues (one
  in twenty read-only), with a ``%RETRY%GID_TopicTest-<n>`` topic for every fourth one;
* per group the topics a 5.x broker registers on its own: TBW102 (perm 7, 8 queues),
  SELF_TEST_TOPIC, the cluster's and the group's own topic, SCHEDULE_TOPIC_XXXX,
  RMQ_SYS_TRANS_HALF_TOPIC, OFFSET_MOVED_EVENT and rmq_sys_SYNC_BROKER_MEMBER_<group>.
  A slave registers its master's table, as it syncs it from the master.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from nsfleet.client.broker_loop import BrokerIdentity
from nsfleet.domain.model import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SYNC_BROKER_MEMBER_PREFIX,
    TopicConfig,
)

RW = PERM_READ | PERM_WRITE
BROKER_PORT = 10911  # BrokerConfig listenPort
HA_PORT = BROKER_PORT + 1  # MessageStoreConfig haListenPort


@dataclass(frozen=True, slots=True)
class SimBroker:
    identity: BrokerIdentity
    topics: tuple[TopicConfig, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    brokers: list[SimBroker]
    groups: int
    clusters: list[str]
    topics: set[str]  # every topic registered, system and retry topics included
    user_topics: set[str]  # TopicTest-<n>, what --topics counts


def group_name(index: int) -> str:
    """0 → broker-a, 25 → broker-z, 26 → broker-aa (spreadsheet columns)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return f"broker-{letters}"


def cluster_names(count: int) -> list[str]:
    return ["DefaultCluster"] if count == 1 else [f"DefaultCluster-{i + 1}" for i in range(count)]


def _system_topics(cluster: str, group: str) -> list[TopicConfig]:
    return [
        TopicConfig("TBW102", 8, 8, RW | PERM_INHERIT),
        TopicConfig("SELF_TEST_TOPIC", 1, 1, RW),
        TopicConfig(cluster, 16, 16, RW | PERM_INHERIT),
        TopicConfig(group, 1, 1, RW | PERM_INHERIT),
        TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, RW),
        TopicConfig("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1, RW),
        TopicConfig("OFFSET_MOVED_EVENT", 1, 1, RW),
        TopicConfig(SYNC_BROKER_MEMBER_PREFIX + group, 1, 1, PERM_INHERIT),
    ]


def make_plan(brokers: int, topics: int, clusters: int = 1, *, slaves_every: int = 3,
              spread: int = 3, seed: int = 0) -> Plan:
    if brokers < 1 or topics < 0 or clusters < 1 or slaves_every < 0 or spread < 1:
        raise ValueError("need brokers >= 1, topics >= 0, clusters >= 1, slaves-every >= 0 "
                         "and spread >= 1")
    names = cluster_names(clusters)
    members: list[list[int]] = []  # per group: its broker ids
    count = 0
    while count < brokers:
        ids = [0]
        if slaves_every and (len(members) + 1) % slaves_every == 0 and count + 1 < brokers:
            ids.append(1)
        members.append(ids)
        count += len(ids)
    groups = len(members)

    rng = random.Random(seed)
    tables: list[list[TopicConfig]] = [
        _system_topics(names[g % clusters], group_name(g)) for g in range(groups)]
    for t in range(topics):
        chosen = rng.sample(range(groups), rng.randint(1, min(spread, groups)))
        queues = rng.choice((4, 8, 8, 16))
        perm = PERM_READ if t % 20 == 19 else RW
        for g in chosen:
            tables[g].append(TopicConfig(f"TopicTest-{t}", queues, queues, perm))
            if t % 4 == 0:
                tables[g].append(TopicConfig(f"%RETRY%GID_TopicTest-{t}", 1, 1, RW))

    out: list[SimBroker] = []
    for g, ids in enumerate(members):
        for broker_id in ids:
            n = len(out)
            host = f"10.0.{n // 250}.{n % 250 + 1}"
            ident = BrokerIdentity(names[g % clusters], group_name(g), f"{host}:{BROKER_PORT}",
                                   broker_id, ha_server_addr=f"{host}:{HA_PORT}")
            out.append(SimBroker(ident, tuple(tables[g])))
    all_topics = {tc.topic_name for table in tables for tc in table}
    return Plan(out, groups, names, all_topics, {f"TopicTest-{t}" for t in range(topics)})
