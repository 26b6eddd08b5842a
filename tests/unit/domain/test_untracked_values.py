"""What a worker keeps by the hundred thousand is not tracked by the cyclic garbage collector,
whose full collections stop the event loop for as long as they take to scan what it tracks
(nsfleet.domain.model's docstring has the measurement). A dataclass here would be tracked again."""

from __future__ import annotations

import gc

from nsfleet.domain.model import BrokerData, QueueData, TopicConfig, TopicRouteData
from nsfleet.domain.topic_tables import api_table, fastjson_table
from nsfleet.service.route_cache import Entry
from nsfleet.store import RouteRead


def test_route_values_are_untracked() -> None:
    route = TopicRouteData([QueueData("b", 8, 8, 6)], [BrokerData("c", "b", {0: "10.0.0.1:1"})])
    entry = Entry(RouteRead(route, 1000), 0.0)
    encodings = entry.encoded.setdefault("plain", {})
    encodings["json"] = b"{}"
    # Tracked per entry: the route's two lists and the variant dict (a dict holding a dict).
    for value in (TopicConfig("T"), route.queue_datas[0], route.broker_datas[0],
                  route.broker_datas[0].broker_addrs, route, entry.read, entry, encodings):
        assert not gc.is_tracked(value), type(value).__name__


def test_decoded_tables_are_untracked_once_collected() -> None:
    """Tuples of untracked values leave the collector's lists at the next collection."""
    configs = api_table(b'{"A":{"perm":6},"B":{}}')
    table, by_name, _ = fastjson_table(b'{"C":{"perm":6}}')
    # the shape brokers send, decoded straight into TopicConfigs
    sent, sent_by_name, numbers_checked = fastjson_table(b'{"D":{"topicName":"D","perm":6}}')
    assert numbers_checked
    gc.collect()
    for value in (configs, by_name, sent_by_name):
        assert not gc.is_tracked(value)
    assert all(not gc.is_tracked(tc) for tc in (*configs, *table.values(), *sent.values()))
