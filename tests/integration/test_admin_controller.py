"""``nsfleet admin``'s controller commands (controller-metadata, sync-state-set,
controller-config, update-controller-config, elect-master, clean-broker-metadata) against real
workers, over the HTTP API and over the remoting protocol (the controller's request codes): the
same JSON either way, tables, and Java's code and remark with exit status 1 on a refusal. The
broker sets are made in the fleet's namespace through ``store.controller``, as a broker's
start-up makes them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from tests.integration.test_admin_cli import _json, _remoting, _run
from tests.support.controller_sets import make_broker_set, replica_address
from tests.support.fleet import Fleet

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    with Fleet(redis_server.url, workers=2) as f:
        f.redis_url = redis_server.url  # type: ignore[attr-defined]
        yield f


def _in_store(fleet: Fleet, action: Callable[[RouteStore], Awaitable[Any]]) -> None:
    async def go() -> None:
        redis = aioredis.Redis.from_url(fleet.redis_url,  # type: ignore[attr-defined]
                                        decode_responses=True)
        store = RouteStore(redis, fleet.namespace)
        await store.load_scripts()
        try:
            await action(store)
        finally:
            await redis.aclose()

    asyncio.run(go())


def _sets(fleet: Fleet, *sets: tuple[str, str, tuple[int, ...]]) -> None:
    async def make(store: RouteStore) -> None:
        for name, cluster, ids in sets:
            await make_broker_set(store, name, cluster, ids)

    _in_store(fleet, make)


def _register(fleet: Fleet, cluster: str, name: str) -> None:
    """The set's master as the NameServer knows it: where -n reads the set's cluster."""
    fleet.post("/v1/brokers/register", {"clusterName": cluster, "brokerName": name,
                                        "brokerId": 0, "brokerAddr": replica_address(name, 1),
                                        "topicConfigTable": {}})


def _ok_remoting(capsys: pytest.CaptureFixture[str], fleet: Fleet, *argv: str) -> Any:
    code, out, err = _remoting(capsys, fleet, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_metadata_and_config_over_both_protocols(fleet: Fleet,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "controller-metadata")
    assert code == 0 and "controllerLeaderAddress" in out and "isLeader" in out
    over_http = _json(capsys, fleet, "controller-metadata")
    over_remoting = _ok_remoting(capsys, fleet, "controller-metadata")
    assert over_http["isLeader"] is True and over_remoting["isLeader"] is True
    assert set(over_http) == set(over_remoting)
    # Every worker is the leader: the remoting one (worker 2) names its own address.
    port = fleet.settings[1].remoting_port
    assert over_remoting["controllerLeaderAddress"].endswith(f":{port}")
    code, out, _ = _run(capsys, fleet, "controller-config")
    assert code == 0 and "enableElectUncleanMaster" in out
    config = _json(capsys, fleet, "controller-config")
    assert config["config"]["notifyBrokerRoleChanged"] == "true"
    assert _ok_remoting(capsys, fleet, "controller-config") == config


def test_update_controller_config_over_both_protocols(fleet: Fleet,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    over_http = _json(capsys, fleet, "update-controller-config", "notifyBrokerRoleChanged=false")
    assert over_http["config"]["notifyBrokerRoleChanged"] == "false"
    over_remoting = _ok_remoting(capsys, fleet, "update-controller-config",
                                 "notifyBrokerRoleChanged=true")
    assert over_remoting["config"]["notifyBrokerRoleChanged"] == "true"
    code, _, err = _remoting(capsys, fleet, "update-controller-config", "configStorePath=/x")
    assert code == 1 and "Can not update config in black list." in err


def test_sync_state_set_over_both_protocols(fleet: Fleet,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _sets(fleet, ("sss-a", "SssCluster", (1, 2)), ("sss-b", "SssCluster", (1,)))
    _register(fleet, "SssCluster", "sss-a")
    code, out, err = _run(capsys, fleet, "sync-state-set")
    assert code == 0, err
    assert "Broker sets (" in out and "sss-a" in out and replica_address("sss-a", 2) in out
    every = {s["brokerName"]: s for s in _json(capsys, fleet, "sync-state-set")["brokerSets"]}
    assert every["sss-a"] == {
        "brokerName": "sss-a", "clusterName": "SssCluster", "masterBrokerId": 1,
        "masterAddress": replica_address("sss-a", 1), "masterEpoch": 1, "syncStateSet": [1, 2],
        "syncStateSetEpoch": 2,
        "replicas": [{"brokerId": i, "brokerAddress": replica_address("sss-a", i),
                      "alive": True, "inSync": True} for i in (1, 2)]}
    named = _json(capsys, fleet, "sync-state-set", "sss-b", "sss-a")["brokerSets"]
    assert named == [every["sss-b"], every["sss-a"]]
    # Over remoting: GET_SYNC_STATE_DATA (1006), the cluster from the cluster info, where only
    # sss-a's broker registered.
    remote = _ok_remoting(capsys, fleet, "sync-state-set", "sss-b", "sss-a")["brokerSets"]
    assert remote == [{**every["sss-b"], "clusterName": None}, every["sss-a"]]
    code, out, err = _remoting(capsys, fleet, "sync-state-set", "sss-a")
    assert code == 0 and "Replicas (2)" in out and "MASTER" in out and "SLAVE" in out
    code, _, err = _remoting(capsys, fleet, "sync-state-set")
    assert code == 1 and "name the broker sets" in err and "--server" in err
    for run in (_run, _remoting):
        code, out, err = run(capsys, fleet, "sync-state-set", "no-such-set", "sss-b")
        assert code == 0 and "sss-b" in out
        assert err == ("nsfleet admin sync-state-set: warning: the controller knows no broker "
                       "set no-such-set\n")


def test_elect_master_over_both_protocols(fleet: Fleet,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _sets(fleet, ("elect-a", "ElectCluster", (1, 2)))
    _register(fleet, "ElectCluster", "elect-a")
    a1, a2 = replica_address("elect-a", 1), replica_address("elect-a", 2)
    code, out, err = _run(capsys, fleet, "elect-master", "elect-a", "2")
    assert code == 0, err
    assert f"broker 2 ({a2}) is the master of elect-a, masterEpoch 2" in out
    after = _json(capsys, fleet, "sync-state-set", "elect-a")["brokerSets"][0]
    assert (after["masterBrokerId"], after["masterEpoch"], after["syncStateSet"]) == (2, 2, [2])
    code, out, err = _run(capsys, fleet, "elect-master", "elect-a", "2")
    assert (code, out) == (1, "")
    assert err == ("nsfleet admin elect-master: response code 2011: The old master 2 is still "
                   "alive, not need to elect new master for broker elect-a: broker 2 "
                   f"({a2}) stays master, masterEpoch 2\n")
    code, _, err = _remoting(capsys, fleet, "elect-master", "elect-a", "2")
    assert code == 1 and err == ("nsfleet admin elect-master: response code 2011: The old "
                                 "master 2 is still alive, not need to elect new master for "
                                 "broker elect-a\n")
    # Replica 1 left the SyncStateSet with the election: Java's 2012 until it is back in.
    code, _, err = _remoting(capsys, fleet, "elect-master", "elect-a", "1")
    assert code == 1 and "response code 2012: " in err
    _in_store(fleet, lambda store: store.controller.alter_sync_state_set(
        "elect-a", 2, 2, 3, [1, 2]))
    elected = _ok_remoting(capsys, fleet, "elect-master", "elect-a", "1")
    assert elected == _json(capsys, fleet, "sync-state-set", "elect-a")["brokerSets"][0]
    assert (elected["masterBrokerId"], elected["masterAddress"], elected["masterEpoch"],
            elected["clusterName"]) == (1, a1, 3, "ElectCluster")
    code, _, err = _run(capsys, fleet, "elect-master", "no-such-set", "1")
    assert code == 1 and err.endswith("response code 2010: Broker hasn't been registered\n")
    with pytest.raises(SystemExit) as usage:  # argparse's: status 2
        main(["admin", "--server", fleet.servers, "elect-master", "elect-a", "x"])
    assert usage.value.code == 2 and "'x' is not a broker id" in capsys.readouterr().err


def test_clean_broker_metadata_over_both_protocols(fleet: Fleet,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _sets(fleet, ("clean-a", "CleanCluster", (1, 2)), ("clean-b", "CleanCluster", (1,)))
    _in_store(fleet, lambda store: store.controller.apply_broker_id(
        "CleanCluster", "clean-a", 3, f"{replica_address('clean-a', 3)};1"))  # never alive
    code, _, err = _run(capsys, fleet, "clean-broker-metadata", "clean-a", "--broker-ids", "2")
    # Java's remark has two blanks after the comma: one line on stderr has single ones.
    assert code == 1 and err == ("nsfleet admin clean-broker-metadata: response code 2009: "
                                 "Broker [clean-a, 2] is still alive, clean up failure\n")
    code, _, err = _remoting(capsys, fleet, "clean-broker-metadata", "clean-a")
    assert code == 1 and err == ("nsfleet admin clean-broker-metadata: response code 2009: "
                                 "Broker clean-a is still alive, clean up failure\n")
    code, out, err = _run(capsys, fleet, "clean-broker-metadata", "clean-a", "--broker-ids", "3")
    assert code == 0 and "cleaned replica 3 of broker set clean-a from the controller" in out
    # Java's cleanLivingBroker ignores the ids and takes the whole set: refused together.
    code, _, err = _remoting(capsys, fleet, "clean-broker-metadata", "clean-a", "--broker-ids",
                             "2", "--clean-living")
    assert code == 1 and "--clean-living cleans the whole broker set" in err
    left = _json(capsys, fleet, "sync-state-set", "clean-a")["brokerSets"][0]
    assert [r["brokerId"] for r in left["replicas"]] == [1, 2] and left["syncStateSet"] == [1, 2]
    assert _json(capsys, fleet, "clean-broker-metadata", "clean-b", "--clean-living") == {
        "brokerName": "clean-b", "brokerIds": [], "cleanLivingBroker": True}
    code, _, err = _remoting(capsys, fleet, "sync-state-set", "clean-b")
    assert code == 0 and "knows no broker set clean-b" in err
    with pytest.raises(SystemExit) as usage:
        main(["admin", "--server", fleet.servers, "clean-broker-metadata", "clean-a",
              "--broker-ids", "1;x"])
    assert usage.value.code == 2 and "'x' is not a broker id" in capsys.readouterr().err
