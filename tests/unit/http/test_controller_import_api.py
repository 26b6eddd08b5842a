"""``PUT /v1/controller/broker-sets/{brokerName}``: a broker set moved from a Java controller
(docs/controller.md, "Moving a running set"), through aiohttp's test client on fakeredis (the
HTTP tests' fixtures): written as GET then shows it, a repeat left alone, the fencing (409,
nothing written), every malformed body a 400 naming its field with nothing written, the grace
during which a replica Java saw alive counts alive and the election after it, the change
history, and the write token it needs."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from nsfleet.http.app import create_app
from nsfleet.security.accounts import AccessConfig, Scope, Token, add_token
from nsfleet.security.http_auth import make_auth_middleware, required_scope
from nsfleet.service.nameserver import NameServer
from nsfleet.store import RouteStore
from nsfleet.store.keys import replica_member
from tests.support.controller_sets import heartbeat, make_broker_set, replica_address
from tests.unit.http.test_api import OPTIONS, _json
from tests.unit.http.test_api import client as client  # the fixtures
from tests.unit.http.test_api import http_store as http_store
from tests.unit.http.test_api import ns as ns
from tests.unit.http.test_controller_routes import _state

SETS = "/v1/controller/broker-sets"
NAME = "broker-m"
M1, M2, M3 = (replica_address(NAME, i) for i in (1, 2, 3))


def _replica(broker_id: int, addr: str, alive: bool, in_sync: bool) -> dict[str, Any]:
    return {"brokerId": broker_id, "brokerAddress": addr, "alive": alive, "inSync": in_sync}


# As a Java controller's GET_SYNC_STATE_DATA gives it, in GET's shape (what nsfleet admin
# controller-import sends): past its first epochs, replica 3 dead and out of the SyncStateSet.
JAVA_SET: dict[str, Any] = {
    "brokerName": NAME, "clusterName": "JavaCluster", "masterBrokerId": 2, "masterAddress": M2,
    "masterEpoch": 5, "syncStateSet": [1, 2], "syncStateSetEpoch": 7,
    "replicas": [_replica(1, M1, True, True), _replica(2, M2, True, True),
                 _replica(3, M3, False, False)]}


def _body(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(JAVA_SET)
    body.update(changes)
    return body


async def _put(client: TestClient, body: Any, status: int, name: str = NAME) -> Any:
    return await _json(await client.put(f"{SETS}/{name}", json=body), status)


async def _get(client: TestClient, name: str = NAME) -> Any:
    return await _json(await client.get(f"{SETS}/{name}"), 200)


async def _actions(client: TestClient) -> list[str]:
    return [c["action"] for c in (await _json(await client.get("/v1/changes"), 200))["changes"]]


async def test_an_import_is_written_as_get_then_shows_it(client: TestClient,
                                                         http_store: RouteStore) -> None:
    out = await _put(client, {**JAVA_SET, "graceSeconds": 60}, 200)
    assert out == {"imported": True, "brokerSet": JAVA_SET}
    assert await _get(client) == JAVA_SET
    assert (await _json(await client.get(SETS), 200))["brokerSets"] == [JAVA_SET]
    # A broker that asks for a new id gets one past the imported ones.
    assert await http_store.controller.next_broker_id(NAME) == 4
    # Counted alive for the grace: a deadline about 60 s ahead for 1 and 2, none for 3.
    now_ms = time.time() * 1000
    deadlines = dict(await http_store.redis.zrange(http_store.keys.ctl_deadlines, 0, -1,
                                                   withscores=True))
    assert sorted(deadlines) == [replica_member(NAME, 1), replica_member(NAME, 2)], deadlines
    for deadline in deadlines.values():
        assert now_ms + 55_000 < deadline <= now_ms + 61_000, deadlines


async def test_the_grace_defaults_to_150_seconds(client: TestClient,
                                                 http_store: RouteStore) -> None:
    await _put(client, JAVA_SET, 200)
    now_ms = time.time() * 1000
    deadlines = await http_store.redis.zrange(http_store.keys.ctl_deadlines, 0, -1,
                                              withscores=True)
    assert len(deadlines) == 2
    for _, deadline in deadlines:
        assert now_ms + 145_000 < deadline <= now_ms + 151_000, deadlines


async def test_the_change_history_records_the_import(client: TestClient, ns: NameServer) -> None:
    await _put(client, JAVA_SET, 200)
    changes = (await _json(await client.get("/v1/changes"), 200))["changes"]
    assert [c["action"] for c in changes] == ["broker set imported"]
    assert changes[0]["worker"] == ns.worker_id
    detail = changes[0]["detail"]
    assert {k: detail[k] for k in ("broker_name", "master_id", "master_epoch", "sync_state_set",
                                   "sync_state_set_epoch")} == {
        "broker_name": NAME, "master_id": 2, "master_epoch": 5, "sync_state_set": "1;2",
        "sync_state_set_epoch": 7}


async def test_a_repeat_is_imported_false_and_writes_nothing(client: TestClient,
                                                             http_store: RouteStore) -> None:
    await _put(client, JAVA_SET, 200)
    before = await _state(http_store)
    again = await _put(client, {**JAVA_SET, "graceSeconds": 3600}, 200)
    assert again == {"imported": False, "brokerSet": JAVA_SET}
    assert await _state(http_store) == before  # not even the deadlines moved
    assert await _actions(client) == ["broker set imported"]


async def test_an_older_master_epoch_is_409_and_writes_nothing(client: TestClient,
                                                               http_store: RouteStore) -> None:
    await _put(client, JAVA_SET, 200)
    before = await _state(http_store)
    older = _body(masterEpoch=4, syncStateSetEpoch=9, masterBrokerId=1, masterAddress=M1)
    answer = await _put(client, older, 409)
    assert answer == {"code": 409, "error": f"the fleet's masterEpoch of {NAME} is 5, newer than "
                                            "the imported 4: nothing written"}
    assert await _state(http_store) == before
    assert await _get(client) == JAVA_SET
    assert await _actions(client) == ["broker set imported"]


async def test_another_master_at_the_same_epoch_is_409(client: TestClient,
                                                      http_store: RouteStore) -> None:
    await _put(client, JAVA_SET, 200)
    before = await _state(http_store)
    rival = _body(masterBrokerId=1, masterAddress=M1, syncStateSetEpoch=8)
    answer = await _put(client, rival, 409)
    assert answer == {"code": 409, "error": f"the fleet's master of {NAME} at masterEpoch 5 is "
                                            "2, not 1: nothing written"}
    masterless = _body(masterBrokerId=None, masterAddress=None, syncStateSetEpoch=8)
    answer = await _put(client, masterless, 409)
    assert answer["error"].startswith(f"the fleet's master of {NAME} at masterEpoch 5 is 2, ")
    assert await _state(http_store) == before


async def test_a_set_the_fleet_built_itself_is_fenced_the_same_way(
        client: TestClient, http_store: RouteStore) -> None:
    """A set elected on the fleet (masterEpoch 1, master 1, syncStateSetEpoch 2)."""
    await make_broker_set(http_store, NAME, "c1", ids=(1, 2))
    before = await _state(http_store)
    native = await _get(client)
    behind = _body(masterEpoch=0, masterBrokerId=None, masterAddress=None)
    assert (await _put(client, behind, 409))["error"] == (
        f"the fleet's masterEpoch of {NAME} is 1, newer than the imported 0: nothing written")
    rival = _body(masterEpoch=1, syncStateSetEpoch=5)  # master 2 at the fleet's epoch 1
    assert (await _put(client, rival, 409))["error"] == (
        f"the fleet's master of {NAME} at masterEpoch 1 is 1, not 2: nothing written")
    same = _body(masterEpoch=1, masterBrokerId=1, masterAddress=M1, syncStateSetEpoch=2)
    assert await _put(client, same, 200) == {"imported": False, "brokerSet": native}
    assert await _state(http_store) == before


async def test_a_newer_sync_state_set_epoch_of_the_same_master_is_written(
        client: TestClient) -> None:
    await _put(client, JAVA_SET, 200)
    shrunk = _body(syncStateSet=[2], syncStateSetEpoch=8)
    out = await _put(client, shrunk, 200)
    expected = {**JAVA_SET, "syncStateSet": [2], "syncStateSetEpoch": 8,
                "replicas": [_replica(1, M1, True, False), _replica(2, M2, True, True),
                             _replica(3, M3, False, False)]}
    assert out == {"imported": True, "brokerSet": expected}
    assert await _get(client) == expected
    # The same again, or an older syncStateSetEpoch of that master: held, nothing written.
    assert (await _put(client, shrunk, 200))["imported"] is False
    assert (await _put(client, JAVA_SET, 200)) == {"imported": False, "brokerSet": expected}
    assert await _actions(client) == ["broker set imported", "broker set imported"]


async def test_a_masterless_set_is_imported_with_no_master(client: TestClient) -> None:
    masterless = _body(masterBrokerId=None, masterAddress=None, masterEpoch=6,
                       syncStateSet=[2])
    out = await _put(client, masterless, 200)
    assert out["imported"] is True
    got = await _get(client)
    assert (got["masterBrokerId"], got["masterAddress"], got["masterEpoch"],
            got["syncStateSet"]) == (None, None, 6, [2])


async def test_a_replica_java_saw_alive_counts_alive_until_the_grace_ends(
        client: TestClient, ns: NameServer, http_store: RouteStore) -> None:
    """Java's master 1 never heartbeats the fleet; replica 2 does: the controller's scan keeps
    the master through the grace, then elects 2 through the normal path at masterEpoch
    imported + 1."""
    java = _body(masterBrokerId=1, masterAddress=M1, graceSeconds=2)
    started = time.monotonic()
    await _put(client, java, 200)
    await heartbeat(http_store, "JavaCluster", NAME, 2)  # replica 2 moved to the fleet
    await ns.controller.scan_once()  # within the grace: nobody expired, nobody elected
    during = await _get(client)
    assert time.monotonic() - started < 2.0, "too slow to look within the grace"
    assert (during["masterBrokerId"], during["masterEpoch"]) == (1, 5)
    assert [r["alive"] for r in during["replicas"]] == [True, True, False]

    elected: dict[str, Any] = {}
    while time.monotonic() - started < 6.0:
        await asyncio.sleep(0.1)
        await ns.controller.scan_once()
        elected = await _get(client)
        if elected["masterBrokerId"] != 1:
            break
    took = time.monotonic() - started
    assert 2.0 <= took < 3.5, f"replaced {took:.2f} s after the import of a 2 s grace"
    assert elected == {
        **JAVA_SET, "masterBrokerId": 2, "masterAddress": M2, "masterEpoch": 6,
        "syncStateSet": [2], "syncStateSetEpoch": 8,
        "replicas": [_replica(1, M1, False, False), _replica(2, M2, True, True),
                     _replica(3, M3, False, False)]}
    changes = (await _json(await client.get("/v1/changes"), 200))["changes"]
    assert [c["action"] for c in changes] == ["master elected", "broker set imported"]
    assert {k: changes[0]["detail"][k] for k in ("broker_name", "master_id", "master_epoch",
                                                 "reason")} == {
        "broker_name": NAME, "master_id": 2, "master_epoch": 6,
        "reason": "master 1 silent past its deadline"}


async def test_a_replica_that_heartbeats_keeps_its_own_liveness(
        client: TestClient, http_store: RouteStore) -> None:
    """Replica 2 already heartbeats the fleet (60 s timeout) when the set is imported with a 1 s
    grace: it stays alive past the grace; replica 1 (Java saw it alive, never here) does not."""
    await heartbeat(http_store, "JavaCluster", NAME, 2)
    await _put(client, _body(graceSeconds=1), 200)
    await asyncio.sleep(1.2)
    got = await _get(client)
    assert [(r["brokerId"], r["alive"]) for r in got["replicas"]] == [
        (1, False), (2, True), (3, False)]


async def test_the_grace_never_moves_the_deadline_of_a_replica_that_heartbeats(
        client: TestClient, http_store: RouteStore) -> None:
    """The grace is for replicas not heartbeating the fleet yet: one that does keeps its own
    deadline (it must count dead at its own timeout); one that does not gets the grace."""
    redis, deadlines = http_store.calls.redis, http_store.calls.keys.ctl_deadlines
    await heartbeat(http_store, "JavaCluster", NAME, 2)
    own = await redis.zscore(deadlines, replica_member(NAME, 2))
    await _put(client, _body(graceSeconds=3600), 200)
    assert await redis.zscore(deadlines, replica_member(NAME, 2)) == own
    granted = await redis.zscore(deadlines, replica_member(NAME, 1))
    assert granted is not None and granted - time.time() * 1000 > 3500_000


BAD_BODIES: list[tuple[str, dict[str, Any], str]] = [
    ("brokerName", _body(brokerName="broker-x"), "brokerName: 'broker-x' is not 'broker-m'"),
    ("brokerName null", _body(brokerName=None), "brokerName: None is not 'broker-m'"),
    ("clusterName missing", {k: v for k, v in JAVA_SET.items() if k != "clusterName"},
     "clusterName: is required"),
    ("clusterName empty", _body(clusterName=""), "clusterName: is required"),
    ("clusterName with ':'", _body(clusterName="a:b"), "clusterName: 'a:b' must have no ':'"),
    ("replicas empty", _body(replicas=[]), "replicas: must be a non-empty list"),
    ("replicas missing", {k: v for k, v in JAVA_SET.items() if k != "replicas"},
     "replicas: must be a non-empty list"),
    ("replicas not a list", _body(replicas={"1": M1}), "replicas: must be a non-empty list"),
    ("replica not an object", _body(replicas=[1]), "replicas[0]: must be an object"),
    ("replica id 0", _body(replicas=[_replica(0, M1, True, True)]),
     "replicas[0].brokerId: 0 is not a new controller id (1, 2, ...)"),
    ("replica id negative", _body(replicas=[_replica(-1, M1, True, True)]),
     "replicas[0].brokerId: is not a broker id: -1"),
    ("replica id duplicated", _body(replicas=[_replica(1, M1, True, True),
                                              _replica(2, M2, True, True),
                                              _replica(1, M3, True, True)]),
     "replicas[2].brokerId: 1 is not a new controller id"),
    ("replica id boolean", _body(replicas=[{**_replica(1, M1, True, True), "brokerId": True}]),
     "replicas[0].brokerId: is not a broker id: True"),
    ("replica id missing", _body(replicas=[{"brokerAddress": M1, "alive": True}]),
     "replicas[0].brokerId: is required"),
    ("replica id not a number", _body(replicas=[{**_replica(1, M1, True, True),
                                                 "brokerId": "one"}]),
     "replicas[0].brokerId: is not an integer"),
    ("brokerAddress no port", _body(replicas=[_replica(1, M1, True, True),
                                              _replica(2, "nohost", True, True)]),
     "replicas[1].brokerAddress: 'nohost' is not host:port"),
    ("brokerAddress port too big", _body(replicas=[_replica(1, "h:70000", True, True)]),
     "replicas[0].brokerAddress: 'h:70000' is not host:port"),
    ("brokerAddress missing", _body(replicas=[{"brokerId": 1, "alive": True}]),
     "replicas[0].brokerAddress: is required"),
    ("alive not a boolean", _body(replicas=[{**_replica(1, M1, True, True), "alive": "maybe"}]),
     "replicas[0].alive: is not a boolean"),
    ("masterBrokerId not a replica", _body(masterBrokerId=4),
     "masterBrokerId: 4 is not one of the replicas"),
    ("masterBrokerId boolean", _body(masterBrokerId=True),
     "masterBrokerId: is not a broker id: True"),
    ("masterBrokerId negative", _body(masterBrokerId=-1), "masterBrokerId: is not a broker id"),
    ("masterBrokerId not in sync", _body(masterBrokerId=3),
     "masterBrokerId: 3 is not in the syncStateSet [1, 2]"),
    ("masterEpoch 0 with a master", _body(masterEpoch=0),
     "masterEpoch: is 0 with a master: an elected master's epoch is 1 or more"),
    ("syncStateSet names a non-replica", _body(syncStateSet=[1, 2, 9]),
     "syncStateSet: [9] are not replicas"),
    ("syncStateSet missing", {k: v for k, v in JAVA_SET.items() if k != "syncStateSet"},
     "syncStateSet: must be a list of replica ids"),
    ("syncStateSet not a list", _body(syncStateSet="1;2"),
     "syncStateSet: must be a list of replica ids"),
    ("syncStateSet id not a number", _body(syncStateSet=[1, "x"]),
     "syncStateSet[1]: is not an integer"),
    ("masterEpoch negative", _body(masterEpoch=-1), "masterEpoch: is not an epoch: -1"),
    ("masterEpoch missing", {k: v for k, v in JAVA_SET.items() if k != "masterEpoch"},
     "masterEpoch: is required"),
    ("masterEpoch boolean", _body(masterEpoch=True), "masterEpoch: is required"),
    ("masterEpoch not a number", _body(masterEpoch="five"), "masterEpoch: is not an integer"),
    ("syncStateSetEpoch negative", _body(syncStateSetEpoch=-3),
     "syncStateSetEpoch: is not an epoch: -3"),
    ("syncStateSetEpoch missing", {k: v for k, v in JAVA_SET.items()
                                   if k != "syncStateSetEpoch"},
     "syncStateSetEpoch: is required"),
    ("graceSeconds 0", _body(graceSeconds=0), "graceSeconds: must be 1-3600 seconds: 0"),
    ("graceSeconds under 1", _body(graceSeconds=0.5), "graceSeconds: must be 1-3600 seconds"),
    ("graceSeconds 3601", _body(graceSeconds=3601), "graceSeconds: must be 1-3600 seconds: 3601"),
    ("graceSeconds negative", _body(graceSeconds=-10), "graceSeconds: must be 1-3600 seconds"),
    ("graceSeconds boolean", _body(graceSeconds=True),
     "graceSeconds: must be 1-3600 seconds: True"),
    ("graceSeconds a string", _body(graceSeconds="60"),
     "graceSeconds: must be 1-3600 seconds: '60'"),
]


@pytest.mark.parametrize(("body", "error"), [(b, e) for _, b, e in BAD_BODIES],
                         ids=[i for i, _, _ in BAD_BODIES])
async def test_a_malformed_set_is_400_naming_the_field_and_writes_nothing(
        client: TestClient, http_store: RouteStore, body: dict[str, Any], error: str) -> None:
    await make_broker_set(http_store, "broker-a", ids=(1, 2))  # another set, left as it is
    before = await _state(http_store)
    answer = await _put(client, body, 400)
    assert answer["code"] == 400 and answer["error"].startswith(error), answer
    assert await _state(http_store) == before
    await _json(await client.get(f"{SETS}/{NAME}"), 404)


@pytest.mark.parametrize(("raw", "error"), [
    (b"", "request body is empty: a JSON object is required"),
    (b"{", "malformed JSON"),
    (b"[1, 2]", "the body must be a JSON object"),
    (b'"broker-m"', "the body must be a JSON object"),
    (b"null", "the body must be a JSON object"),
])
async def test_a_body_that_is_no_json_object_is_400(client: TestClient, http_store: RouteStore,
                                                    raw: bytes, error: str) -> None:
    before = await _state(http_store)
    answer = await _json(await client.put(f"{SETS}/{NAME}", data=raw,
                                          headers={"Content-Type": "application/json"}), 400)
    assert answer["code"] == 400 and answer["error"].startswith(error), answer
    assert await _state(http_store) == before


async def test_ids_and_epochs_as_fastjson_reads_them(client: TestClient) -> None:
    """Numbers as decimal strings (as the JSON API reads integers elsewhere) are the same set;
    the replicas and the SyncStateSet come back by id, whatever order they were sent in."""
    body = _body(masterBrokerId="2", masterEpoch="5", syncStateSetEpoch=7.0,
                 syncStateSet=[2, "1", 2],
                 replicas=list(reversed(JAVA_SET["replicas"])))
    assert await _put(client, body, 200) == {"imported": True, "brokerSet": JAVA_SET}


def _token_app_config(write: str, read: str) -> AccessConfig:
    tokens: dict[bytes, Token] = {}
    add_token(tokens, write, Token("ci", Scope.WRITE), "write")
    add_token(tokens, read, Token("grafana", Scope.READ), "read")
    return AccessConfig(tokens=tokens)


async def test_an_import_needs_a_write_token(ns: NameServer, http_store: RouteStore,
                                             aiohttp_client: Any) -> None:
    assert required_scope("PUT", f"{SETS}/{NAME}") is Scope.WRITE
    write, read = "write-token-0123456789", "read-token-0123456789"
    config = _token_app_config(write, read)
    denied: list[tuple[str, str, bool]] = []
    app = create_app(ns, options=OPTIONS)
    app.middlewares.append(make_auth_middleware(
        lambda: config, enforcing=True, on_denied=lambda *a: denied.append(a)))
    guarded: TestClient = await aiohttp_client(app)
    before = await _state(http_store)
    data = json.dumps(JAVA_SET)

    async def put(token: str | None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        resp = await guarded.put(f"{SETS}/{NAME}", data=data, headers=headers)
        return resp.status, await resp.json()

    status, error = await put(None)
    assert (status, error["code"]) == (401, 16), error
    status, error = await put(read)
    assert (status, error) == (403, {"code": 16, "error": "token 'grafana' has scope read; this "
                                                          "request needs write"})
    assert await _state(http_store) == before
    assert denied == [("http", "no_token", False), ("http", "scope", False)]
    status, out = await put(write)
    assert (status, out) == (200, {"imported": True, "brokerSet": JAVA_SET})
    resp = await guarded.get(f"{SETS}/{NAME}", headers={"Authorization": f"Bearer {read}"})
    assert resp.status == 200 and await resp.json() == JAVA_SET
