"""``nsfleet admin controller-import --from HOST:PORT``: broker sets copied from another
controller into the fleet, between real ``nsfleet serve`` processes on a real redis-server.

The source plays the Java controller: an nsfleet worker in its own namespace, whose remoting
port answers GET_SYNC_STATE_DATA (1006) as Java's does, its broker sets made in its namespace
through ``store.controller`` as a broker's start-up makes them, then moved past their first
epochs (a designated election, the SyncStateSet grown again). The target is another worker in
a namespace of its own, fresh for each test. tests/java/test_controller.py moves a set from a
real Java controller; this checks the command's every answer quickly."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.store import RouteStore
from tests.support.controller_sets import heartbeat, make_broker_set, replica_address
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

COMMAND = "controller-import"
MOVED, SMALL = "mv-a", "mv-b"  # on the source; MOVED is past its first epochs
NAMED = "mv-c"  # on the source, its broker in the source's routes too
A1, A2, A3 = (replica_address(MOVED, i) for i in (1, 2, 3))
LONG_MS = 600_000  # the source's replicas stay alive for the whole module


class Node:
    """A worker process and its namespace on the session's redis-server."""

    def __init__(self, redis_server: RedisServer, log_dir: Path, role: str) -> None:
        self.redis_url = redis_server.url
        self.namespace = f"imp-{role}-{uuid.uuid4().hex[:8]}"
        self.worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                                     "NSFLEET_NAMESPACE": self.namespace},
                                    log_dir / f"{role}.log")

    @property
    def url(self) -> str:
        return self.worker.url

    @property
    def remoting(self) -> str:
        return f"127.0.0.1:{self.worker.remoting_port}"

    def in_store(self, action: Callable[[RouteStore], Awaitable[Any]]) -> Any:
        async def go() -> Any:
            redis = aioredis.Redis.from_url(self.redis_url, decode_responses=True)
            store = RouteStore(redis, self.namespace)
            await store.load_scripts()
            try:
                return await action(store)
            finally:
                await redis.aclose()

        return asyncio.run(go())

    def get(self, path: str) -> tuple[int, Any]:
        return http("GET", f"{self.url}{path}")

    def broker_set(self, name: str) -> dict[str, Any]:
        status, body = self.get(f"/v1/controller/broker-sets/{name}")
        assert status == 200, body
        return dict(body)

    def knows(self, name: str) -> bool:
        return self.get(f"/v1/controller/broker-sets/{name}")[0] == 200

    def register(self, cluster: str, name: str) -> None:
        """A broker of the set in this worker's routes: where the command reads clusters."""
        status, body = http("POST", f"{self.url}/v1/brokers/register", {
            "clusterName": cluster, "brokerName": name, "brokerId": 0,
            "brokerAddr": replica_address(name, 1), "topicConfigTable": {}})
        assert status == 200, body


async def _moved_sets(store: RouteStore) -> None:
    """MOVED: replicas 1, 2 alive and 3 never alive; 2 designated master (masterEpoch 2), then
    1 back in sync (syncStateSetEpoch 4). SMALL: replica 1 alone, master at masterEpoch 1."""
    ct = store.controller
    await make_broker_set(store, MOVED, "SourceCluster", ids=(1, 2))
    assert await ct.apply_broker_id("SourceCluster", MOVED, 3, f"{A3};1") == "ok"
    assert (await ct.elect(MOVED, 2, designate=True, unclean=False)).master_epoch == 2
    assert (await ct.alter_sync_state_set(MOVED, 2, 2, 3, [1, 2]))[0] == "ok"
    await make_broker_set(store, SMALL, "SourceCluster", ids=(1,))
    await make_broker_set(store, NAMED, "SourceCluster", ids=(1,))
    for name, i in ((MOVED, 1), (MOVED, 2), (SMALL, 1), (NAMED, 1)):
        await heartbeat(store, "SourceCluster", name, i, timeout_ms=LONG_MS)


@pytest.fixture(scope="module")
def source(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Node]:
    node = Node(redis_server, tmp_path_factory.mktemp("import-source"), "source")
    node.in_store(_moved_sets)
    node.worker.start()
    try:
        yield node
    finally:
        node.worker.stop()


@pytest.fixture
def target(redis_server: RedisServer, tmp_path: Path) -> Iterator[Node]:
    node = Node(redis_server, tmp_path, "target")
    node.worker.start()
    try:
        yield node
    finally:
        node.worker.stop()


def _import(capsys: pytest.CaptureFixture[str], target: Node, source: Node,
            *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["admin", "--server", target.url, COMMAND, "--from", source.remoting, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _import_json(capsys: pytest.CaptureFixture[str], target: Node, source: Node,
                 *argv: str) -> tuple[int, Any, str]:
    code, out, err = _import(capsys, target, source, *argv, "--json")
    return code, json.loads(out), err


def _expected(source: Node, name: str, cluster: str) -> dict[str, Any]:
    """The set as the source holds it, in the target's cluster."""
    return {**source.broker_set(name), "clusterName": cluster}


def test_the_source_is_past_its_first_epochs(source: Node) -> None:
    """What the other tests copy: the fixture's set, as the source's HTTP API shows it."""
    assert source.broker_set(MOVED) == {
        "brokerName": MOVED, "clusterName": "SourceCluster", "masterBrokerId": 2,
        "masterAddress": A2, "masterEpoch": 2, "syncStateSet": [1, 2], "syncStateSetEpoch": 4,
        "replicas": [{"brokerId": 1, "brokerAddress": A1, "alive": True, "inSync": True},
                     {"brokerId": 2, "brokerAddress": A2, "alive": True, "inSync": True},
                     {"brokerId": 3, "brokerAddress": A3, "alive": False, "inSync": False}]}


def test_import_copies_ids_addresses_master_and_epochs(
        source: Node, target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    target.register("MoveCluster", MOVED)
    started = time.time() * 1000
    code, out, err = _import(capsys, target, source, "--grace", "30", MOVED)
    assert (code, err) == (0, ""), err
    expected = _expected(source, MOVED, "MoveCluster")
    assert target.broker_set(MOVED) == expected
    assert expected["masterEpoch"] == 2 and expected["syncStateSetEpoch"] == 4
    lines = out.splitlines()
    assert lines[0] == f"{MOVED}: imported"
    assert "Broker sets (1)" in out and "Replicas (3)" in out and A3 in out and "MoveCluster" in out
    assert not target.knows(SMALL)  # only the set named

    # Java's live replicas count alive for --grace (30 s), the dead one not at all.
    async def deadlines(store: RouteStore) -> dict[str, float]:
        return dict(await store.redis.zrange(store.keys.ctl_deadlines, 0, -1, withscores=True))

    found = target.in_store(deadlines)
    assert sorted(found) == [f"{MOVED}\t1", f"{MOVED}\t2"], found
    for deadline in found.values():
        assert started + 29_000 < deadline < time.time() * 1000 + 30_000, found
    # A broker of the set asking for a new id gets one past the imported ones.
    assert target.in_store(lambda store: store.controller.next_broker_id(MOVED)) == 4
    status, changes = target.get("/v1/changes")
    assert status == 200
    assert [c["action"] for c in changes["changes"]][:1] == ["broker set imported"]
    assert changes["changes"][0]["detail"]["master_epoch"] == 2


def test_json_output_then_a_repeat_is_held(source: Node, target: Node,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, first, err = _import_json(capsys, target, source, "--cluster", "GivenCluster",
                                    MOVED, SMALL)
    assert (code, err) == (0, "")
    moved, small = (_expected(source, n, "GivenCluster") for n in (MOVED, SMALL))
    assert first == {"imported": [moved, small], "held": [], "refused": []}
    assert target.broker_set(SMALL) == small
    code, again, err = _import_json(capsys, target, source, "--cluster", "GivenCluster",
                                    SMALL, MOVED)
    assert (code, err) == (0, "")
    assert again == {"imported": [], "held": [small, moved], "refused": []}
    code, out, _ = _import(capsys, target, source, "--cluster", "GivenCluster", SMALL)
    assert code == 0 and out.splitlines()[0] == f"{SMALL}: the fleet holds it already"


def test_every_set_in_the_routes_by_default_and_their_clusters(
        source: Node, target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    """No names: every brokerName of the target's routes, each in its own cluster (the routes'
    cluster before --cluster); one the source does not know is a warning."""
    target.register("ClusterA", MOVED)
    target.register("ClusterB", SMALL)
    target.register("ClusterB", "not-on-source")
    code, out, err = _import_json(capsys, target, source, "--cluster", "Ignored")
    assert code == 0
    assert err == (f"nsfleet admin {COMMAND}: warning: {source.remoting} knows no broker set "
                   "not-on-source\n")
    assert out == {"imported": [_expected(source, MOVED, "ClusterA"),
                                _expected(source, SMALL, "ClusterB")],
                   "held": [], "refused": []}
    assert target.broker_set(SMALL)["clusterName"] == "ClusterB"
    assert not target.knows("not-on-source")


def test_the_sources_own_cluster_comes_first(source: Node, target: Node,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A controller embedded in a NameServer answers the cluster info (106) too: the cluster its
    routes give a set is taken before the target's routes and --cluster."""
    source.register("SourceRoutes", NAMED)
    target.register("TargetRoutes", NAMED)
    code, out, err = _import_json(capsys, target, source, "--cluster", "Given", NAMED)
    assert (code, err) == (0, "")
    assert out["imported"] == [_expected(source, NAMED, "SourceRoutes")]
    assert target.broker_set(NAMED)["clusterName"] == "SourceRoutes"


def test_a_set_the_source_does_not_know_is_a_warning(source: Node, target: Node,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _import_json(capsys, target, source, "--cluster", "C", "nope", "nope2")
    assert code == 0
    assert err == (f"nsfleet admin {COMMAND}: warning: {source.remoting} knows no broker set "
                   "nope, nope2\n")
    assert out == {"imported": [], "held": [], "refused": []}
    assert target.get("/v1/controller/broker-sets")[1] == {"brokerSets": []}


async def _fleet_past_the_source(store: RouteStore) -> None:
    """MOVED on the target at masterEpoch 3 (three elections of its own)."""
    await make_broker_set(store, MOVED, "TargetCluster", ids=(1, 2))
    ct = store.controller
    assert (await ct.elect(MOVED, 2, designate=True, unclean=False)).master_epoch == 2
    assert (await ct.alter_sync_state_set(MOVED, 2, 2, 3, [1, 2]))[0] == "ok"
    assert (await ct.elect(MOVED, 1, designate=True, unclean=False)).master_epoch == 3


def test_a_refused_set_is_exit_1_and_the_others_are_imported(
        source: Node, target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    target.in_store(_fleet_past_the_source)
    held = target.broker_set(MOVED)
    code, out, err = _import_json(capsys, target, source, "--cluster", "C", MOVED, SMALL)
    assert code == 1
    error = f"the fleet's masterEpoch of {MOVED} is 3, newer than the imported 2: nothing written"
    assert err == f"nsfleet admin {COMMAND}: warning: {MOVED} not imported: {error}\n"
    assert out == {"imported": [_expected(source, SMALL, "C")], "held": [],
                   "refused": [{"brokerName": MOVED, "error": error}]}
    assert target.broker_set(MOVED) == held
    # Without --json: the same exit status, the imported set shown.
    target.in_store(lambda store: store.controller.clean(SMALL, [], living=True))
    code, text, err = _import(capsys, target, source, "--cluster", "C", MOVED, SMALL)
    assert code == 1 and err.endswith(f"{MOVED} not imported: {error}\n")
    assert text.splitlines()[0] == f"{SMALL}: imported"
    assert target.knows(SMALL)


def test_a_remoting_target_is_refused_in_one_line(source: Node, target: Node,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["admin", "-n", target.remoting, COMMAND, "--from", source.remoting,
                 "--cluster", "C", MOVED])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (f"nsfleet admin {COMMAND}: no remoting request writes a whole broker set: "
                   "import through an nsfleet worker's HTTP API (--server URL)\n")
    assert not target.knows(MOVED)


def test_a_remoting_target_is_refused_whatever_the_source_holds(
        source: Node, target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["admin", "-n", target.remoting, COMMAND, "--from", source.remoting,
                 "--cluster", "C", "nope"])
    _, err = capsys.readouterr()
    assert code == 1 and "HTTP API (--server URL)" in err, err


@pytest.mark.parametrize(("grace", "error"), [
    ("0", "argument --grace: '0': give 1-3600 seconds"),
    ("3601", "argument --grace: '3601': give 1-3600 seconds"),
    ("-5", "argument --grace: '-5': give 1-3600 seconds"),
    ("nan", "argument --grace: 'nan': give 1-3600 seconds"),
    ("soon", "argument --grace: 'soon' is not a number of seconds"),
])
def test_a_bad_grace_is_a_usage_error(grace: str, error: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing is asked: argparse refuses first
    with pytest.raises(SystemExit) as usage:
        main(["admin", "--server", f"http://{dead}", COMMAND, "--from", dead,
              f"--grace={grace}", MOVED])
    assert usage.value.code == 2
    assert error in capsys.readouterr().err


def test_from_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["admin", COMMAND, MOVED])
    assert usage.value.code == 2
    assert "the following arguments are required: --from" in capsys.readouterr().err


def test_no_set_in_the_routes_and_none_named_is_an_error(
        source: Node, target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _import(capsys, target, source)
    assert (code, out) == (1, "")
    assert err == (f"nsfleet admin {COMMAND}: the fleet's routes name no broker set: name the "
                   "sets to import\n")


def test_a_set_with_no_cluster_known_is_an_error(source: Node, target: Node,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _import(capsys, target, source, MOVED)
    assert (code, out) == (1, "")
    assert err == (f"nsfleet admin {COMMAND}: no cluster known for {MOVED}: give --cluster "
                   "(nothing imported)\n")
    assert not target.knows(MOVED)


def test_an_unreachable_source_is_one_line_and_exit_1(
        target: Node, capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    capsys.readouterr()
    code = main(["admin", "--server", target.url, "--timeout", "2", COMMAND, "--from", dead,
                 "--cluster", "C", MOVED])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(f"nsfleet admin {COMMAND}: ") and err.count("\n") == 1, err
    assert dead in err, err
    assert target.get("/v1/controller/broker-sets")[1] == {"brokerSets": []}
