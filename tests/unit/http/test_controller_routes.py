"""The controller's HTTP endpoints (/v1/controller/...) through aiohttp's test client on fakeredis
(the HTTP tests' fixtures), the broker sets made through ``store.controller``: what they read,
the admin's elections and cleaning with Java's refusals, bad bodies refused with nothing
written, and the token scopes they need."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from nsfleet.security.accounts import Scope
from nsfleet.security.http_auth import required_scope
from nsfleet.store import RouteStore
from tests.support.controller_sets import heartbeat, make_broker_set, replica_address
from tests.unit.http.test_api import _json
from tests.unit.http.test_api import client as client  # the fixtures
from tests.unit.http.test_api import http_store as http_store
from tests.unit.http.test_api import ns as ns

A1, A2, A3 = (replica_address("broker-a", i) for i in (1, 2, 3))
SETS = "/v1/controller/broker-sets"


def _replica(broker_id: int, addr: str, alive: bool = True, in_sync: bool = True) -> dict[str, Any]:
    return {"brokerId": broker_id, "brokerAddress": addr, "alive": alive, "inSync": in_sync}


async def _state(store: RouteStore) -> dict[str, Any]:
    """Every key with its value: what a refused request must leave as it was."""
    out: dict[str, Any] = {}
    for key in sorted(await store.redis.keys("*")):
        kind = await store.redis.type(key)
        out[key] = (await store.redis.hgetall(key) if kind == "hash" else
                    sorted(await store.redis.smembers(key)) if kind == "set" else
                    await store.redis.zrange(key, 0, -1, withscores=True) if kind == "zset" else
                    kind)
    return out


async def test_metadata_and_config(client: TestClient) -> None:
    meta = await _json(await client.get("/v1/controller/metadata"), 200)
    assert meta["group"] == "nsfleet" and meta["isLeader"] is True
    assert set(meta) == {"group", "controllerLeaderId", "controllerLeaderAddress", "isLeader",
                         "peers"}
    config = (await _json(await client.get("/v1/controller/config"), 200))["config"]
    assert config["enableElectUncleanMaster"] == "false"
    assert config["scanNotActiveBrokerInterval"] == "1000"


async def test_broker_sets_list_masters_epochs_and_replicas(client: TestClient,
                                                            http_store: RouteStore) -> None:
    assert await _json(await client.get(SETS), 200) == {"brokerSets": []}
    await make_broker_set(http_store, ids=(1, 2))
    await http_store.controller.apply_broker_id("c1", "broker-a", 3, f"{A3};1")  # never beat
    await make_broker_set(http_store, "broker-b", "c2", ids=(1,))
    sets = (await _json(await client.get(SETS), 200))["brokerSets"]
    assert [s["brokerName"] for s in sets] == ["broker-a", "broker-b"]
    assert sets[0] == {
        "brokerName": "broker-a", "clusterName": "c1", "masterBrokerId": 1, "masterAddress": A1,
        "masterEpoch": 1, "syncStateSet": [1, 2], "syncStateSetEpoch": 2,
        "replicas": [_replica(1, A1), _replica(2, A2),
                     _replica(3, A3, alive=False, in_sync=False)]}
    assert await _json(await client.get(f"{SETS}/broker-a"), 200) == sets[0]
    assert (await _json(await client.get(f"{SETS}/broker-b"), 200))["syncStateSet"] == [1]


async def test_an_unknown_set_is_a_404_naming_it(client: TestClient) -> None:
    body = await _json(await client.get(f"{SETS}/nope"), 404)
    assert body == {"code": 2008, "error": "Broker metadata is not existed: the controller knows "
                                           "no broker set nope (nsfleet admin sync-state-set "
                                           "lists them)"}


async def test_elect_a_designated_master_and_javas_refusals(client: TestClient,
                                                           http_store: RouteStore) -> None:
    await make_broker_set(http_store, ids=(1, 2))
    out = await _json(await client.post(f"{SETS}/broker-a/elect", json={"brokerId": 2}), 200)
    assert {k: out[k] for k in ("masterBrokerId", "masterAddress", "masterEpoch",
                                "syncStateSet", "syncStateSetEpoch")} == {
        "masterBrokerId": 2, "masterAddress": A2, "masterEpoch": 2, "syncStateSet": [2],
        "syncStateSetEpoch": 3}
    assert out["replicas"] == [_replica(1, A1, in_sync=False), _replica(2, A2)]
    changes = await http_store.history.recent(1)
    assert changes[0].action == "master elected"
    before = await _state(http_store)
    still = await _json(await client.post(f"{SETS}/broker-a/elect", json={"brokerId": 2}), 409)
    assert still == {"code": 2011, "error": "The old master 2 is still alive, not need to elect "
                                            f"new master for broker broker-a: broker 2 ({A2}) "
                                            "stays master, masterEpoch 2"}
    unknown = await _json(await client.post(f"{SETS}/nope/elect", json={"brokerId": "1"}), 409)
    assert unknown == {"code": 2010, "error": "Broker hasn't been registered"}
    failed = await _json(await client.post(f"{SETS}/broker-a/elect", json={"brokerId": 9}), 409)
    assert failed["code"] == 2012
    assert await _state(http_store) == before


async def test_clean_replicas_and_sets(client: TestClient, http_store: RouteStore) -> None:
    await make_broker_set(http_store, ids=(1, 2))
    before = await _state(http_store)
    alive = await _json(await client.post(f"{SETS}/broker-a/clean", json={"brokerIds": [2]}),
                        409)
    assert alive == {"code": 2009, "error": "Broker [broker-a,  2] is still alive, clean up "
                                            "failure"}
    whole = await _json(await client.post(f"{SETS}/broker-a/clean", json={}), 409)
    assert whole == {"code": 2009, "error": "Broker broker-a is still alive, clean up failure"}
    assert await _state(http_store) == before
    # Cleaning living brokers takes the whole set, whatever the list says (Java reads the ids
    # only without it).
    out = await _json(await client.post(f"{SETS}/broker-a/clean", json={
        "brokerIds": [2], "cleanLivingBroker": "true"}), 200)
    assert out == {"brokerName": "broker-a", "brokerIds": [], "cleanLivingBroker": True}
    assert await _json(await client.get(SETS), 200) == {"brokerSets": []}
    gone = await _json(await client.post(f"{SETS}/broker-a/clean", json={}), 409)
    assert gone["error"] == "Broker broker-a is not existed,clean broker data failure."


async def test_a_dead_replica_is_cleaned_without_force(client: TestClient,
                                                       http_store: RouteStore) -> None:
    await make_broker_set(http_store, ids=(1, 2))
    await heartbeat(http_store, "c1", "broker-a", 2, timeout_ms=1)
    await asyncio.sleep(0.01)  # its deadline passed
    await _json(await client.post(f"{SETS}/broker-a/clean", json={"brokerIds": [2]}), 200)
    left = await _json(await client.get(f"{SETS}/broker-a"), 200)
    assert [r["brokerId"] for r in left["replicas"]] == [1]


@pytest.mark.parametrize(("action", "body", "error"), [
    ("elect", b"", "request body is empty: a JSON object is required"),
    ("elect", b"{", "malformed JSON"),
    ("elect", b"[2]", "the body must be a JSON object"),
    ("elect", b"{}", "brokerId: is required"),
    ("elect", b'{"brokerId": "two"}', "brokerId: is not an integer"),
    ("elect", b'{"brokerId": true}', "brokerId: is not a broker id: True"),
    ("elect", b'{"brokerId": -1}', "brokerId: is not a broker id: -1"),
    ("clean", b'{"brokerIds": "1;2"}', "brokerIds: must be a list of broker ids"),
    ("clean", b'{"brokerIds": [1, "x"]}', "brokerIds[1]: is not an integer"),
    ("clean", b'{"brokerIds": [null]}', "brokerIds[0]: is required"),
    ("clean", b'{"cleanLivingBroker": "maybe"}', "cleanLivingBroker: is not a boolean"),
])
async def test_bad_bodies_are_400_and_write_nothing(client: TestClient, http_store: RouteStore,
                                                    action: str, body: bytes,
                                                    error: str) -> None:
    await make_broker_set(http_store, ids=(1, 2))
    before = await _state(http_store)
    answer = await _json(await client.post(f"{SETS}/broker-a/{action}", data=body,
                                           headers={"Content-Type": "application/json"}), 400)
    assert answer["code"] == 400 and answer["error"].startswith(error), answer
    assert await _state(http_store) == before


def test_reads_need_a_read_token_and_writes_a_write_token() -> None:
    for path in ("/v1/controller/metadata", "/v1/controller/config", SETS, f"{SETS}/broker-a"):
        assert required_scope("GET", path) is Scope.READ
    for action in ("elect", "clean"):
        assert required_scope("POST", f"{SETS}/broker-a/{action}") is Scope.WRITE
