"""Issue 23, ``nsfleet admin diff`` and ``copy-config``: two independent fleets (each on its own
redis-server) fed the same brokers compare equal; each planted difference is reported once,
naming its topic, broker group and field; an unreachable side exits 2; a broker registering
during the run is no difference; copy-config's dry run changes nothing and ``--apply`` makes the
KV and config equal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsfleet.admin.diff import run_diff
from nsfleet.cli import main
from nsfleet.client.http import FleetHttp
from nsfleet.client.http_name_service import HttpNameService
from nsfleet.client.name_service import NameService
from nsfleet.redis_server import RedisServer, free_port
from tests.support.fleet import Fleet

pytestmark = pytest.mark.redis

TOPICS = {"T1": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
          "T2": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6},
          "TBW102": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 7}}


def registration(name: str, broker_id: int, addr: str, topics: dict[str, Any],
                 cluster: str = "c1") -> dict[str, Any]:
    return {"clusterName": cluster, "brokerName": name, "brokerId": broker_id,
            "brokerAddr": addr, "haServerAddr": addr.replace("10911", "10912"),
            "dataVersion": {"counter": 1, "timestamp": 1700000000000},
            "topicConfigTable": topics}


BROKERS = [registration("broker-a", 0, "10.0.0.1:10911", TOPICS),
           registration("broker-a", 1, "10.0.0.2:10911", TOPICS),
           registration("broker-b", 0, "10.0.1.1:10911", {"T1": TOPICS["T1"],
                                                          "OnlyB": TOPICS["T1"]})]


@pytest.fixture(scope="module")
def other_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=Path(tmp_path_factory.mktemp("redis-b")), appendonly=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fleets(redis_server: RedisServer, other_redis: RedisServer) -> Iterator[tuple[Fleet, Fleet]]:
    """Two independent fleets, one worker each, fed the same brokers."""
    with Fleet(redis_server.url, workers=1) as a, Fleet(other_redis.url, workers=1) as b:
        for fleet in (a, b):
            for body in BROKERS:
                fleet.post("/v1/brokers/register", body)
        yield a, b


def remoting(fleet: Fleet) -> str:
    return f"127.0.0.1:{fleet.settings[0].remoting_port}"


def diff_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["admin", "diff", "--json", "--settle", "0.2", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def test_two_fleets_fed_the_same_brokers_are_equal(fleets: tuple[Fleet, Fleet],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    for sides in ((a.urls[0], b.urls[0]), (remoting(a), b.urls[0]), (remoting(a), remoting(b))):
        code, data = diff_json(capsys, *sides)
        assert code == 0, data
        assert data["equal"] and data["differences"] == []
        assert data["compared"]["topics"] == 4 and data["compared"]["brokerGroups"] == 2
    capsys.readouterr()
    assert main(["admin", "diff", "--settle", "0", "-n", remoting(a), "--server", b.urls[0]]) == 0
    assert "equal: 4 topics, 2 broker groups" in capsys.readouterr().out


def only(data: dict[str, Any]) -> dict[str, Any]:
    assert not data["equal"]
    assert len(data["differences"]) == 1, data["differences"]
    return data["differences"][0]


@pytest.mark.parametrize("protocol", ["http", "remoting"])
def test_a_missing_broker_group_is_one_difference(fleets: tuple[Fleet, Fleet], protocol: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    b.post("/v1/brokers/unregister", {k: BROKERS[2][k] for k in
                                      ("clusterName", "brokerAddr", "brokerName", "brokerId")})
    side_a, side_b = ((a.urls[0], b.urls[0]) if protocol == "http"
                      else (remoting(a), remoting(b)))
    code, data = diff_json(capsys, side_a, side_b)
    assert code == 1
    d = only(data)
    assert (d["kind"], d["group"], d["field"], d["a"], d["b"]) == (
        "broker", "broker-b", "present", True, None)
    assert d["topics"] == ["OnlyB", "T1"]


def test_a_missing_slave_is_one_difference(fleets: tuple[Fleet, Fleet],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    b.post("/v1/brokers/unregister", {k: BROKERS[1][k] for k in
                                      ("clusterName", "brokerAddr", "brokerName", "brokerId")})
    d = only(diff_json(capsys, a.urls[0], b.urls[0])[1])
    assert (d["kind"], d["group"], d["field"], d["a"], d["b"]) == (
        "broker", "broker-a", "brokerAddrs[1]", "10.0.0.2:10911", None)


def test_a_wiped_write_perm_is_one_difference(fleets: tuple[Fleet, Fleet],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    b.post("/v1/brokers/broker-a/wipe-write-perm")
    code, data = diff_json(capsys, remoting(a), b.urls[0])
    assert code == 1
    d = only(data)
    assert (d["kind"], d["group"], d["field"]) == ("queue", "broker-a", "perm")
    assert d["topics"] == ["T1", "T2", "TBW102"]
    assert {(v["a"], v["b"]) for v in d["values"]} == {(6, 4), (7, 5)}


def test_a_different_queue_count_names_the_topic(fleets: tuple[Fleet, Fleet],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    changed = {**TOPICS, "T2": {**TOPICS["T2"], "writeQueueNums": 16}}
    b.post("/v1/brokers/register", {**BROKERS[0], "topicConfigTable": changed,
                                    "dataVersion": {"counter": 2, "timestamp": 1700000000001}})
    d = only(diff_json(capsys, a.urls[0], b.urls[0])[1])
    assert (d["kind"], d["group"], d["field"], d["a"], d["b"], d["topics"]) == (
        "queue", "broker-a", "readQueueNums/writeQueueNums", "8/8", "8/16", ["T2"])
    # Both counts changed (the topic re-created with more queues): still one difference.
    both = {**TOPICS, "T1": {**TOPICS["T1"], "readQueueNums": 16, "writeQueueNums": 16}}
    a.post("/v1/brokers/register", {**BROKERS[0], "topicConfigTable": {**both, "T2": changed["T2"]},
                                    "dataVersion": {"counter": 2, "timestamp": 1700000000001}})
    d = only(diff_json(capsys, a.urls[0], b.urls[0])[1])
    assert (d["field"], d["a"], d["b"], d["topics"]) == (
        "readQueueNums/writeQueueNums", "16/16", "4/4", ["T1"])


def test_an_extra_topic_is_one_difference(fleets: tuple[Fleet, Fleet],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    a.post("/v1/brokers/register", {**BROKERS[0], "topicConfigTable": {**TOPICS, "Extra": {}},
                                    "dataVersion": {"counter": 2, "timestamp": 1700000000001}})
    d = only(diff_json(capsys, a.urls[0], remoting(b))[1])
    assert (d["kind"], d["field"], d["a"], d["b"], d["topics"]) == (
        "topic", "present", True, False, ["Extra"])


def test_a_kv_value_and_order_message_enable_are_reported(
        fleets: tuple[Fleet, Fleet], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fleets
    assert main(["admin", "--server", a.urls[0], "kv", "put", "ORDER_TOPIC_CONFIG", "T1",
                 "broker-a:4"]) == 0
    d = only(diff_json(capsys, a.urls[0], b.urls[0])[1])
    assert (d["kind"], d["group"], d["field"], d["a"], d["b"]) == (
        "kv", "ORDER_TOPIC_CONFIG", "T1", "broker-a:4", None)
    # Over remoting too: ORDER_TOPIC_CONFIG is always read (a remoting side lists none).
    d = only(diff_json(capsys, remoting(a), remoting(b))[1])
    assert (d["kind"], d["field"]) == ("kv", "T1")
    assert main(["admin", "--server", a.urls[0], "kv", "delete", "ORDER_TOPIC_CONFIG", "T1"]) == 0
    b.update_config({"orderMessageEnable": "true"})
    d = only(diff_json(capsys, remoting(a), b.urls[0])[1])
    assert (d["kind"], d["field"], d["a"], d["b"]) == (
        "config", "orderMessageEnable", "false", "true")


def test_an_unreachable_side_exits_2_with_one_line(fleets: tuple[Fleet, Fleet],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = fleets
    for dead in (f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"):
        capsys.readouterr()
        assert main(["admin", "diff", "--timeout", "2", a.urls[0], dead]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith("nsfleet admin diff: could not compare:") and dead in err
    assert main(["admin", "diff", a.urls[0]]) == 2  # one side only
    assert main(["admin", "diff", "-n", remoting(a), a.urls[0], a.urls[0]]) == 2  # three
    assert "not 3" in capsys.readouterr().err


class RegisteringOnFirstRead:
    """Side B, which a broker joins right after diff's first read of it (mid-run)."""

    def __init__(self, inner: NameService, join: Any) -> None:
        self.inner, self.join, self.label = inner, join, inner.label
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def config(self) -> dict[str, str]:  # the last read of a snapshot
        self.reads += 1
        if self.reads == 1:
            await asyncio.to_thread(self.join)
        return await self.inner.config()


async def test_a_broker_registering_during_the_run_is_no_difference(
        fleets: tuple[Fleet, Fleet]) -> None:
    a, b = fleets
    late = registration("broker-c", 0, "10.0.2.1:10911", {"T1": {}, "Late": {}})
    await asyncio.to_thread(a.post, "/v1/brokers/register", late)
    side_a = HttpNameService(FleetHttp(a.urls[0]))
    side_b = RegisteringOnFirstRead(HttpNameService(FleetHttp(b.urls[0])),
                                    lambda: b.post("/v1/brokers/register", late))
    try:
        result = await run_diff(side_a, side_b, settle=0.2)  # type: ignore[arg-type]
    finally:
        await side_a.close()
        await side_b.close()
    assert side_b.reads == 2  # read again after --settle
    assert result.differences == [] and result.settled == 1  # the first read saw broker-c


def test_copy_config_dry_run_then_apply(fleets: tuple[Fleet, Fleet],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    java, fleet = fleets  # the source plays the Java NameServer, reached over remoting
    java.update_config({"orderMessageEnable": "true"})
    for key, value in (("T1", "broker-a:4"), ("T2", "broker-a:8")):
        assert main(["admin", "--server", java.urls[0], "kv", "put", "ORDER_TOPIC_CONFIG", key,
                     value]) == 0
    assert main(["admin", "--server", fleet.urls[0], "kv", "put", "ORDER_TOPIC_CONFIG", "Gone",
                 "broker-a:1"]) == 0
    before = diff_json(capsys, "--kv-namespace", "ORDER_TOPIC_CONFIG", remoting(java),
                       fleet.urls[0])[1]
    kv_and_config = [d for d in before["differences"] if d["kind"] in ("kv", "config")]
    assert len(kv_and_config) == 4

    capsys.readouterr()
    argv = ["admin", "copy-config", "--from", "-n", remoting(java), "--server", fleet.urls[0]]
    assert main([*argv, "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert not dry["applied"]
    assert {(c["action"], c["key"]) for c in dry["changes"]} == {
        ("put", "T1"), ("put", "T2"), ("delete", "Gone"), ("set", "orderMessageEnable")}
    # The dry run wrote nothing.
    assert fleet.get("/v1/kv/ORDER_TOPIC_CONFIG")["table"] == {"Gone": "broker-a:1"}
    assert fleet.get("/v1/namesrv-config")["config"]["orderMessageEnable"] == "false"

    assert main([*argv, "--apply"]) == 0
    assert "4 changes applied" in capsys.readouterr().out
    after = diff_json(capsys, remoting(java), fleet.urls[0])[1]
    assert [d for d in after["differences"] if d["kind"] in ("kv", "config")] == []
    assert fleet.get("/v1/namesrv-config")["config"]["orderMessageEnable"] == "true"
    capsys.readouterr()
    assert main([*argv]) == 0
    assert "nothing to copy" in capsys.readouterr().out
