"""Route → queue derivation (MQClientInstance.topicRouteData2TopicPublishInfo /
topicRouteData2TopicSubscribeInfo), the TBW102 cap, server lists and the simulate layout."""

from __future__ import annotations

import pytest

from nsfleet.client import (
    MessageQueue,
    default_topic_route,
    parse_servers,
    publish_info,
    subscribe_queues,
)
from nsfleet.client.http import path
from nsfleet.client.queues import parse_order_conf
from nsfleet.domain.model import BrokerData, QueueData, TopicRouteData
from nsfleet.simulate.plan import group_name, make_plan


def _route(order: str | None = None) -> TopicRouteData:
    # Deliberately unsorted: the publish list is ordered by brokerName.
    return TopicRouteData(
        queue_datas=[QueueData("broker-c", 2, 2, 6), QueueData("broker-a", 4, 4, 6),
                     QueueData("broker-b", 3, 2, 4), QueueData("broker-d", 1, 1, 2)],
        broker_datas=[BrokerData("c1", "broker-a", {0: "a0", 1: "a1"}),
                      BrokerData("c1", "broker-b", {0: "b0"}),
                      BrokerData("c1", "broker-c", {1: "c1"}),
                      BrokerData("c1", "broker-d", {0: "d0"})],
        order_topic_conf=order)


def _mqs(spec: list[tuple[str, int]], topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, b, i) for b, n in spec for i in range(n)]


def test_publish_needs_write_perm_and_a_master() -> None:
    info = publish_info("T", _route())
    # broker-b read-only, broker-c has no id 0; broker-d is write-only but has a master.
    assert info.message_queues == _mqs([("broker-a", 4), ("broker-d", 1)])
    assert not info.order_topic and info.ok


def test_subscribe_needs_read_perm_and_uses_read_queue_nums() -> None:
    assert subscribe_queues("T", _route()) == _mqs([("broker-a", 4), ("broker-b", 3),
                                                    ("broker-c", 2)])


def test_order_topic_conf_overrides_publish_only() -> None:
    route = _route("broker-b:2;broker-x:1;")
    info = publish_info("T", route)
    assert info.order_topic
    assert info.message_queues == _mqs([("broker-b", 2), ("broker-x", 1)])
    assert subscribe_queues("T", route) == subscribe_queues("T", _route())
    assert not publish_info("T", _route("")).order_topic  # empty: the normal path


def test_parse_order_conf() -> None:
    assert parse_order_conf("a:4; b:8") == [("a", 4), ("b", 8)]
    with pytest.raises(ValueError):
        parse_order_conf("a:x")
    with pytest.raises(ValueError):
        parse_order_conf("a")


def test_default_topic_route_is_capped_copy() -> None:
    tbw = TopicRouteData([QueueData("broker-a", 8, 8, 7), QueueData("broker-b", 2, 6, 7)],
                         [BrokerData("c", "broker-a", {0: "a"}), BrokerData("c", "broker-b",
                                                                             {0: "b"})])
    capped = default_topic_route(tbw)
    assert [(q.read_queue_nums, q.write_queue_nums) for q in capped.queue_datas] == [(4, 4),
                                                                                   (2, 2)]
    assert tbw.queue_datas[0].read_queue_nums == 8  # the original is untouched
    assert publish_info("New", capped).message_queues == _mqs([("broker-a", 4), ("broker-b", 2)],
                                                              "New")


def test_parse_servers_and_path() -> None:
    assert parse_servers("127.0.0.1:8080; http://h:1/ ,") == ["http://127.0.0.1:8080",
                                                            "http://h:1"]
    with pytest.raises(ValueError):
        parse_servers(" , ")
    assert path("v1", "routes", "%RETRY%g") == "/v1/routes/%25RETRY%25g"


def test_simulate_plan() -> None:
    assert [group_name(i) for i in (0, 25, 26, 27, 701, 702)] == [
        "broker-a", "broker-z", "broker-aa", "broker-ab", "broker-zz", "broker-aaa"]
    plan = make_plan(50, 500, 3, slaves_every=3)
    assert len(plan.brokers) == 50
    assert len({b.identity.broker_addr for b in plan.brokers}) == 50
    slaves = [b for b in plan.brokers if b.identity.broker_id == 1]
    assert slaves and plan.groups == 50 - len(slaves)
    assert {b.identity.cluster for b in plan.brokers} == set(plan.clusters) == {
        "DefaultCluster-1", "DefaultCluster-2", "DefaultCluster-3"}
    tables = {b.identity.broker_name: b.topics for b in plan.brokers if b.identity.broker_id == 0}
    for slave in slaves:  # a slave registers its master's table
        assert slave.topics == tables[slave.identity.broker_name]
    for table in tables.values():
        assert {"TBW102", "SELF_TEST_TOPIC"} <= {t.topic_name for t in table}
    assert {f"TopicTest-{i}" for i in range(500)} <= plan.topics
    assert "%RETRY%GID_TopicTest-0" in plan.topics
    assert make_plan(50, 500, 3) == plan  # deterministic for a seed
    assert make_plan(1, 0, slaves_every=1).groups == 1  # no room for a slave
    with pytest.raises(ValueError):
        make_plan(0, 1)
