"""Ports of KVConfigManagerTest, KVConfigSerializeWrapperTest and DataVersionTest's equality rules
(Java KVConfigManager and DataVersion.equals) onto RouteStore and nsfleet.model."""

from __future__ import annotations

import json

from nsfleet.domain.model import DataVersion
from nsfleet.store import RouteStore
from nsfleet.store.keys import ORDER_TOPIC_CONFIG


async def test_put_kv_config(store: RouteStore) -> None:
    await store.kv_put(ORDER_TOPIC_CONFIG, "UnitTest", "test")
    assert await store.kv_list(ORDER_TOPIC_CONFIG) is not None
    assert await store.kv_get(ORDER_TOPIC_CONFIG, "UnitTest") == "test"


async def test_delete_kv_config(store: RouteStore) -> None:
    # On a fresh manager the namespace never existed, so the list is null.
    assert await store.kv_delete(ORDER_TOPIC_CONFIG, "UnitTest") is False
    assert await store.kv_list(ORDER_TOPIC_CONFIG) is None
    assert await store.kv_get(ORDER_TOPIC_CONFIG, "UnitTest") is None


async def test_delete_keeps_the_emptied_namespace(store: RouteStore) -> None:
    await store.kv_put("ns", "k", "v")
    assert await store.kv_delete("ns", "k") is True
    assert await store.kv_list("ns") == {}  # KVTable {"table":{}}, not QUERY_NOT_FOUND
    assert await store.kv_get("ns", "k") is None


async def test_put_is_idempotent_and_overwrites(store: RouteStore) -> None:
    assert await store.kv_put("ns", "k", "v1") is True
    assert await store.kv_put("ns", "k", "v1") is False  # fanned-out duplicate: no change
    assert await store.kv_put("ns", "k", "v2") is True
    assert await store.kv_list("ns") == {"k": "v2"}


async def test_keys_with_separators(store: RouteStore) -> None:
    # Namespaces and keys are free text: ':' and '%' are escaped in the key names.
    await store.kv_put("a:b%", "c:d%3A", "x")
    await store.kv_put("a", "b%:c", "y")
    assert await store.kv_list("a:b%") == {"c:d%3A": "x"}
    assert await store.kv_list("a") == {"b%:c": "y"}


async def test_serialize_wrapper_round_trip(store: RouteStore) -> None:
    """KVConfigSerializeWrapperTest: {configTable:{ORDER_TOPIC_CONFIG:{...}}} survives JSON."""
    table = {"broker-name": "broker-name", "topic-name": "topic-name", "cid": "cid"}
    for k, v in table.items():
        await store.kv_put(ORDER_TOPIC_CONFIG, k, v)
    wrapper = {"configTable": {ORDER_TOPIC_CONFIG: await store.kv_list(ORDER_TOPIC_CONFIG)}}
    assert json.loads(json.dumps(wrapper)) == {"configTable": {ORDER_TOPIC_CONFIG: table}}


def test_data_version_equality() -> None:
    """DataVersion.equals compares stateVersion, timestamp and counter."""
    a = DataVersion(counter=1, timestamp=100, state_version=0)
    assert a == DataVersion(counter=1, timestamp=100, state_version=0)
    assert a != DataVersion(counter=2, timestamp=100, state_version=0)
    assert a != DataVersion(counter=1, timestamp=101, state_version=0)
    assert a != DataVersion(counter=1, timestamp=100, state_version=1)
    # Java's two null counters count as equal; nsfleet has no null counter (a missing one is 0).
    assert DataVersion.from_json({"timestamp": 5}) == DataVersion.from_json(
        {"timestamp": 5, "counter": None})
    assert DataVersion.from_json(a.to_dict()) == a
