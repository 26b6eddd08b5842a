"""apply_acting_master: the supportActingMaster route rewrite of Java's
RouteInfoManager.pickupTopicRouteData, a pure function."""

from __future__ import annotations

import copy

from nsfleet.domain.model import BrokerData, QueueData, TopicRouteData
from nsfleet.service.acting_master import apply_acting_master


def route(*groups: tuple[str, dict[int, str], bool, int]) -> TopicRouteData:
    """groups: (brokerName, brokerAddrs, enableActingMaster, perm of its queue data)."""
    return TopicRouteData(
        [QueueData(name, 8, 8, perm) for name, _, _, perm in groups],
        [BrokerData("c", name, dict(addrs), acting) for name, addrs, acting, _ in groups])


def addrs(r: TopicRouteData) -> dict[str, dict[int, str]]:
    return {b.broker_name: b.broker_addrs for b in r.broker_datas}


def test_masterless_read_only_group_presents_its_lowest_id_as_master() -> None:
    r = route(("a", {2: "h2:1", 1: "h1:1"}, True, 4))
    out = apply_acting_master(r, "T")
    assert addrs(out) == {"a": {0: "h1:1", 2: "h2:1"}}
    assert out.queue_datas[0].perm == 4  # stays read-only


def test_input_is_not_modified() -> None:
    r = route(("a", {1: "h1:1"}, True, 4), ("b", {0: "m:1", 1: "s:1"}, True, 6))
    before = copy.deepcopy(r)
    out = apply_acting_master(r, "T")
    assert r == before
    assert addrs(out) == {"a": {0: "h1:1"}, "b": {0: "m:1", 1: "s:1"}}


def test_nothing_to_do_returns_the_route_itself() -> None:
    r = route(("a", {0: "m:1", 1: "s:1"}, True, 4))
    assert apply_acting_master(r, "T") is r


def test_writable_queue_is_not_rewritten() -> None:
    r = route(("a", {1: "h1:1"}, True, 6))
    assert addrs(apply_acting_master(r, "T")) == {"a": {1: "h1:1"}}


def test_group_without_acting_master_is_not_rewritten() -> None:
    r = route(("a", {1: "h1:1"}, False, 4))
    assert addrs(apply_acting_master(r, "T")) == {"a": {1: "h1:1"}}


def test_only_masterless_groups_change() -> None:
    r = route(("a", {1: "h1:1"}, True, 4), ("b", {0: "m:1", 2: "s:1"}, True, 4),
              ("c", {3: "x:1", 5: "y:1"}, True, 1), ("d", {1: "w:1"}, True, 2))
    assert addrs(apply_acting_master(r, "T")) == {
        "a": {0: "h1:1"}, "b": {0: "m:1", 2: "s:1"}, "c": {0: "x:1", 5: "y:1"}, "d": {1: "w:1"}}


def test_sync_broker_member_topics_are_skipped() -> None:
    r = route(("a", {1: "h1:1"}, True, 4))
    topic = "rmq_sys_SYNC_BROKER_MEMBER_a"
    assert apply_acting_master(r, topic) is r
    assert addrs(apply_acting_master(r, topic)) == {"a": {1: "h1:1"}}


def test_empty_routes_and_groups_without_queue_data() -> None:
    assert apply_acting_master(TopicRouteData(), "T") == TopicRouteData()
    # A BrokerData whose group has no QueueData in the route is left as it is (Java loops over
    # the queue datas and finds none).
    r = TopicRouteData([QueueData("b", 8, 8, 4)], [BrokerData("c", "a", {1: "h:1"}, True),
                                                   BrokerData("c", "b", {2: "k:1"}, True)])
    assert addrs(apply_acting_master(r, "T")) == {"a": {1: "h:1"}, "b": {0: "k:1"}}
