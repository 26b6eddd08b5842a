"""The memos of unchanged registrations (nsfleet/domain/memo.py) never serve an old answer for
a changed input: the store remembers a table's checks and encoding by the identity of the
immutable tuple sent (never a list a caller could change), the HTTP API a parsed body by its
bytes, a remoting connection its last decoded body and its topic tuple."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from nsfleet.domain import model
from nsfleet.domain.memo import BoundedMemo
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.http import app as http_app
from nsfleet.remoting.codec import V5_0_0
from nsfleet.remoting.handlers import Connection
from nsfleet.store import RouteStore
from tests.support.invariants import orphans
from tests.unit.remoting.test_bodies import SAMPLE_5X


def _reg(topics: object, counter: int = 1) -> BrokerRegistration:
    return BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, data_version=DataVersion(counter, 1),
                              topic_configs=topics)  # type: ignore[arg-type]


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = model.check_topics

    def counting(configs: object) -> model.CheckedTopics:
        calls.append(1)
        return original(configs)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "check_topics", counting)
    return calls


async def test_the_same_table_tuple_is_checked_and_encoded_once(
        any_redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RouteStore(any_redis, "memo")
    await store.load_scripts()
    checks = _counting_checks(monkeypatch)
    table = (*(TopicConfig(f"T{i}", 8, 8, 6) for i in range(100)), TopicConfig("", 1, 1, 6))
    first = await store.register_broker(_reg(table))
    again = _reg(table, counter=2)  # a changed DataVersion, the same table object
    second = await store.register_broker(again)
    assert len(checks) == 1
    assert [d.topic for d in first.dropped_topics] == [d.topic for d in second.dropped_topics]
    assert again.topics_sent == 101 and len(again.topic_configs) == 100
    # A new tuple with one changed topic is another key: checked, encoded and stored anew.
    changed = (*table[:-2], TopicConfig("T99", 8, 8, 4))
    await store.register_broker(_reg(changed, counter=3))
    assert len(checks) == 2
    route = await store.pickup_route("T99")
    assert route is not None and route.route.queue_datas[0].perm == 4
    assert await orphans(store.redis, store.keys) == []


async def test_a_list_is_never_remembered(any_redis: aioredis.Redis,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller may change a list between calls: only tuples are remembered."""
    store = RouteStore(any_redis, "memo-list")
    await store.load_scripts()
    checks = _counting_checks(monkeypatch)
    table = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(100)]
    await store.register_broker(_reg(table))
    table[0] = TopicConfig("T0", 8, 8, 2)
    await store.register_broker(_reg(table, counter=2))
    assert len(checks) == 2
    route = await store.pickup_route("T0")
    assert route is not None and route.route.queue_datas[0].perm == 2


def test_http_bodies_are_parsed_once_per_bytes() -> None:
    body = (b'{"clusterName":"c1","brokerAddr":"10.0.0.1:10911","brokerName":"g","brokerId":0,'
            b'"topicConfigTable":{"T1":{"perm":6},"T2":{}}}')
    first, second = http_app._registration(body), http_app._registration(body)
    assert first is not second  # each request validates its own copy
    assert first.topic_configs is second.topic_configs  # the parsed table is shared
    changed = http_app._registration(body.replace(b'"perm":6', b'"perm":4'))
    assert changed.topic_configs is not first.topic_configs
    assert changed.topic_configs[0].perm == 4 and first.topic_configs[0].perm == 6
    first.validated()
    assert second.dropped_topics == [] and second.topics_sent == 0  # untouched by first's


async def test_a_connection_hands_out_one_tuple_per_remembered_body() -> None:
    conn = Connection(peer="p")
    body = await conn.register_body(SAMPLE_5X, False, V5_0_0)
    topics = conn.topics_of(body)
    assert isinstance(topics, tuple)
    assert conn.topics_of(await conn.register_body(bytes(SAMPLE_5X), False, V5_0_0)) is topics
    changed = SAMPLE_5X.replace(b'"counter":5', b'"counter":6')
    other = await conn.register_body(changed, False, V5_0_0)
    assert conn.topics_of(other) is not topics


def test_the_memo_is_bounded_by_topics_oldest_out() -> None:
    memo: BoundedMemo[str] = BoundedMemo(max_topics=10)
    memo.put("a", "A", 4)
    memo.put("b", "B", 4)
    assert memo.get("a") == "A"  # now the most recent
    memo.put("c", "C", 4)  # over 10: the oldest ("b") goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == ("A", None, "C")
    memo.put("huge", "H", 11)  # bigger than the bound: not kept at all
    assert memo.get("huge") is None and len(memo) == 2
