"""The memos of unchanged registrations (nsfleet/runtime/memo.py) never serve an old answer for
a changed input: the store remembers a table's checks and encoding by the identity of the
immutable tuple sent (never a list a caller could change), both protocols a decoded topic table
by its bytes (nsfleet/domain/topic_tables.py), a remoting connection its last decoded body."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from nsfleet.domain import model
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.http import parse
from nsfleet.remoting.handlers import Connection
from nsfleet.runtime.memo import BoundedMemo
from nsfleet.store import RouteStore
from nsfleet.wire.bodies import RegisterBody, decode_register_body
from nsfleet.wire.codec import V5_0_0
from tests.support.invariants import orphans
from tests.support.register_bodies import encode_register_body


def _reg(topics: object, counter: int = 1) -> BrokerRegistration:
    return BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, data_version=DataVersion(counter, 1),
                              topic_configs=topics)  # type: ignore[arg-type]


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = model.check_topics

    def counting(configs: object, *, numbers_checked: bool = False) -> model.CheckedTopics:
        calls.append(1)
        return original(configs, numbers_checked=numbers_checked)  # type: ignore[arg-type]

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


async def test_a_decoded_body_keeps_its_table_checked_and_encoded_past_the_memos_bound(
        any_redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker seeing more topics than its memo holds (150 brokers of 10,000 topics of their
    own) had its brokers evict each other's tables: every unchanged round checked and encoded
    them all again. The table's checks and encoding are kept with the decoded body too (its
    ``table_memo``, which a connection keeps with its last body)."""
    store = RouteStore(any_redis, "memo-body")
    await store.load_scripts()
    store.registration._tables = BoundedMemo(max_topics=150)  # one of the two tables at a time
    checks = _counting_checks(monkeypatch)
    tables = [tuple(TopicConfig(f"T{i}", 8, 8, perm) for i in range(100)) for perm in (6, 4)]
    kept: list[dict[object, object]] = [{}, {}]
    for counter in range(1, 4):  # the two brokers in turn, three rounds
        for b, (table, memo) in enumerate(zip(tables, kept, strict=True)):
            await store.register_broker(BrokerRegistration(
                "c1", f"10.0.0.{b}:10911", f"g{b}", 0, data_version=DataVersion(counter, 1),
                topic_configs=table, table_memo=memo))
    assert len(checks) == 2
    # Without it, the two evict each other from the bounded memo every time.
    for b, table in enumerate(tables):
        await store.register_broker(BrokerRegistration(
            "c1", f"10.0.0.{b}:10911", f"g{b}", 0, data_version=DataVersion(9, 1),
            topic_configs=table))
    assert len(checks) == 4


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


def test_http_tables_are_decoded_once_per_bytes() -> None:
    body = (b'{"clusterName":"c1","brokerAddr":"10.0.0.1:10911","brokerName":"g","brokerId":0,'
            b'"dataVersion":{"counter":1},"topicConfigTable":{"T1":{"perm":6},"T2":{}}}')
    first, second = parse.registration_bytes(body), parse.registration_bytes(body)
    assert first is not second  # each request validates its own registration
    assert first.topic_configs is second.topic_configs  # the decoded table is shared
    # A new DataVersion alone: the same table object.
    next_dv = parse.registration_bytes(body.replace(b'"counter":1', b'"counter":2'))
    assert next_dv.topic_configs is first.topic_configs and next_dv.data_version.counter == 2
    changed = parse.registration_bytes(body.replace(b'"perm":6', b'"perm":4'))
    assert changed.topic_configs is not first.topic_configs
    assert changed.topic_configs[0].perm == 4 and first.topic_configs[0].perm == 6
    first.validated()
    assert second.dropped_topics == [] and second.topics_sent == 0  # untouched by first's


@pytest.mark.parametrize("body", [
    b'{"brokerName":"g","brokerId":"0","topicConfigTable":{"T1":{"perm":"6"}}}',  # quoted
    b'{"brokerName":"g","topicConfigTable":{"T1":{"perm":6.0,"order":1}}}',  # coerced
    b'{"brokerName":"g","topicConfigTable":{"T1":{"topicName":7}}}',  # a number as a name
    b'{"brokerName":"g","enableActingMaster":"true","topicConfigTable":{"T1":{},"T1":{}}}',
    b'{"brokerName":"g","topicConfigTable":null,"filterServerList":null,"dataVersion":null}',
    b'{"brokerName":"g","topicConfigTable":{"T1":{"readQueueNums":null,"order":true}}}',
    b'{"brokerName":"g","topicConfigTable":{"T1":null}}',  # null reads as {}
])
def test_http_typed_reading_equals_the_generic_one(body: bytes) -> None:
    """Whatever the fast path reads, it reads as the generic path does; what it cannot read
    goes the generic way."""
    assert parse.registration_bytes(body) == parse.registration(parse.json_object(body))


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"topicConfigTable":[1]}',
                                  b'{"topicConfigTable":{"T1":{"perm":"x"}}}'])
def test_http_bad_bodies_fail_as_the_generic_path_does(body: bytes) -> None:
    with pytest.raises(Exception) as fast:
        parse.registration_bytes(body)
    with pytest.raises(Exception) as generic:
        parse.registration(parse.json_object(body))
    assert type(fast.value) is type(generic.value) and str(fast.value) == str(generic.value)


# A 5.x body of the common shape (test_bodies.SAMPLE_5X has fastjson's unquoted keys, which
# go the generic way).
PLAIN_5X = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,'
            b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,'
            b'"perm":6,"readQueueNums":8,"topicName":"TopicTest","writeQueueNums":8},'
            b'"Other":{"perm":6,"topicName":"Other"}}}}')


async def test_a_new_data_version_alone_decodes_to_the_same_remoting_table() -> None:
    conn = Connection(peer="p")
    body = await conn.register_body(PLAIN_5X, False, V5_0_0)
    assert isinstance(body.topic_configs, tuple)
    assert body.topic_configs == tuple(body.topic_config_table.values())
    again = await conn.register_body(bytes(PLAIN_5X), False, V5_0_0)
    assert again is body  # the connection's memo: the same bytes
    changed = PLAIN_5X.replace(b'"counter":5', b'"counter":6')
    other = await conn.register_body(changed, False, V5_0_0)
    assert other.topic_configs is body.topic_configs and other.data_version.counter == 6
    table = PLAIN_5X.replace(b'"perm":6', b'"perm":2', 1)
    assert table != PLAIN_5X
    assert decode_register_body(table, False, V5_0_0).topic_configs is not body.topic_configs


def test_the_memo_is_bounded_by_topics_oldest_out() -> None:
    memo: BoundedMemo[str] = BoundedMemo(max_topics=10)
    memo.put("a", "A", 4)
    memo.put("b", "B", 4)
    assert memo.get("a") == "A"  # now the most recent
    memo.put("c", "C", 4)  # over 10: the oldest ("b") goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == ("A", None, "C")
    memo.put("huge", "H", 11)  # bigger than the bound: not kept at all
    assert memo.get("huge") is None and len(memo) == 2


def test_a_new_data_version_alone_decodes_to_the_same_compressed_table() -> None:
    topics = {f"T{i}": TopicConfig(f"T{i}", 8, 8, 6) for i in range(5)}
    def body(dv: DataVersion, table: dict[str, TopicConfig]) -> bytes:
        return encode_register_body(RegisterBody(dv, table), compressed=True, version=V5_0_0)

    first = decode_register_body(body(DataVersion(1, 1), topics), True, V5_0_0)
    next_dv = decode_register_body(body(DataVersion(2, 2), topics), True, V5_0_0)
    assert next_dv.data_version == DataVersion(2, 2)
    assert next_dv.topic_configs is first.topic_configs
    assert next_dv.topic_config_table is first.topic_config_table
    other = decode_register_body(
        body(DataVersion(2, 2), {**topics, "T0": TopicConfig("T0", 4, 4, 6)}), True, V5_0_0)
    assert other.topic_configs is not first.topic_configs
    assert other.topic_config_table["T0"].read_queue_nums == 4
