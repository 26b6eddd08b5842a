"""``nsfleet admin``: every command's table and --json output against real workers, failover
across --server, and one-line errors with a non-zero exit status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer, free_port
from tests.support.fleet import Fleet

pytestmark = pytest.mark.redis

TOPICS = {"TopicTest": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
          "%RETRY%GID_test": {"readQueueNums": 1, "writeQueueNums": 1, "perm": 6},
          "TBW102": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 7}}
BROKERS = [("DefaultCluster", "broker-a", 0, "10.0.0.1:10911"),
           ("DefaultCluster", "broker-a", 1, "10.0.0.2:10911"),
           ("OtherCluster", "broker-b", 0, "10.0.0.3:10911")]


@pytest.fixture(scope="module")
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    """Two workers and three registered brokers; tests that write use their own names."""
    with Fleet(redis_server.url, workers=2) as f:
        for cluster, name, broker_id, addr in BROKERS:
            f.post("/v1/brokers/register", {
                "clusterName": cluster, "brokerName": name, "brokerId": broker_id,
                "brokerAddr": addr, "haServerAddr": addr.replace("10911", "10912"),
                "topicConfigTable": TOPICS if name == "broker-a" else {
                    "TopicTest": TOPICS["TopicTest"], "OnlyB": TOPICS["TopicTest"]}})
        yield f


def _run(capsys: pytest.CaptureFixture[str], fleet: Fleet, *argv: str) -> tuple[int, str, str]:
    code = main(["admin", "--server", fleet.servers, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], fleet: Fleet, *argv: str) -> Any:
    code, out, err = _run(capsys, fleet, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_cluster_list(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "cluster-list")
    assert code == 0
    for text in ("DefaultCluster", "OtherCluster", "broker-a", "broker-b", "MASTER", "SLAVE",
                 "10.0.0.2:10911", "s ago"):
        assert text in out
    data = _json(capsys, fleet, "cluster-list")
    assert data == fleet.get("/v1/cluster-info")
    assert sorted(data["clusterAddrTable"]) == ["DefaultCluster", "OtherCluster"]


def test_broker_list(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "broker-list")
    assert code == 0 and "Live brokers (3)" in out and "Expires In" in out
    assert all(addr in out for *_, addr in BROKERS)
    brokers = _json(capsys, fleet, "broker-list")["brokers"]
    assert [b["brokerAddr"] for b in brokers] == [addr for *_, addr in BROKERS]
    assert all(b["deadline"] - b["lastUpdateTimestamp"] == 120_000 for b in brokers)


def test_topic_route_and_topic_cluster_list(fleet: Fleet,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "topic-route", "TopicTest")
    assert code == 0 and "Route of TopicTest" in out
    assert "0=10.0.0.1:10911, 1=10.0.0.2:10911" in out and "RW-" in out
    route = _json(capsys, fleet, "topic-route", "TopicTest")
    assert {q["brokerName"] for q in route["queueDatas"]} == {"broker-a", "broker-b"}
    retry = _json(capsys, fleet, "topic-route", "%RETRY%GID_test")  # '%' is URL-encoded
    assert retry["queueDatas"][0]["writeQueueNums"] == 1
    code, out, _ = _run(capsys, fleet, "topic-route", "TBW102")
    assert "RWX" in out
    code, out, _ = _run(capsys, fleet, "topic-cluster-list", "TopicTest")
    assert code == 0 and "DefaultCluster" in out and "OtherCluster" in out
    assert _json(capsys, fleet, "topic-cluster-list", "OnlyB") == {"clusterList": ["OtherCluster"]}


def test_topic_list(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "topic-list")
    assert code == 0 and "TopicTest" in out and "%RETRY%GID_test" in out
    assert set(_json(capsys, fleet, "topic-list")["topicList"]) >= {"TopicTest", "OnlyB",
                                                                   "TBW102"}
    code, out, _ = _run(capsys, fleet, "topic-list", "--cluster", "OtherCluster")
    assert code == 0 and "Topics of cluster OtherCluster (2)" in out
    assert _json(capsys, fleet, "topic-list", "-c", "OtherCluster") == {
        "topicList": ["OnlyB", "TopicTest"]}


def test_delete_topic(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    broker = {"clusterName": "DelCluster", "brokerName": "broker-del", "brokerId": 0,
              "brokerAddr": "10.9.0.1:10911"}
    fleet.post("/v1/brokers/register", {**broker, "topicConfigTable": {
        "DelA": TOPICS["TopicTest"], "DelB": TOPICS["TopicTest"]}})
    code, out, _ = _run(capsys, fleet, "delete-topic", "DelA", "--cluster", "DelCluster")
    assert code == 0 and "deleted topic DelA in cluster DelCluster: 1 queue data removed" in out
    assert _json(capsys, fleet, "delete-topic", "DelB") == {"removedQueueDatas": 1}
    assert _json(capsys, fleet, "delete-topic", "DelA") == {"removedQueueDatas": 0}
    code, _, err = _run(capsys, fleet, "topic-route", "DelA")
    assert code == 1 and "No topic route info" in err
    fleet.post("/v1/brokers/unregister", broker)


def test_kv(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "kv", "put", "cli-ns", "k1", "v[1] x")
    assert code == 0 and "put cli-ns k1 = v[1] x" in out
    assert _json(capsys, fleet, "kv", "put", "cli-ns", "k2", "two") == {"changed": True}
    code, out, _ = _run(capsys, fleet, "kv", "get", "cli-ns", "k1")
    assert (code, out) == (0, "v[1] x\n")  # values are never read as rich markup
    assert _json(capsys, fleet, "kv", "get", "cli-ns", "k2") == {"value": "two"}
    code, out, _ = _run(capsys, fleet, "kv", "list", "cli-ns")
    assert code == 0 and "v[1] x" in out and "two" in out
    assert _json(capsys, fleet, "kv", "list", "cli-ns") == {"table": {"k1": "v[1] x",
                                                                      "k2": "two"}}
    code, out, _ = _run(capsys, fleet, "kv", "delete", "cli-ns", "k1")
    assert code == 0 and "deleted cli-ns k1" in out
    assert _json(capsys, fleet, "kv", "delete", "cli-ns", "k1") == {"deleted": False}
    code, out, err = _run(capsys, fleet, "kv", "get", "cli-ns", "k1")
    assert code == 1 and out == ""
    assert err == "nsfleet admin kv: No config item, Namespace: cli-ns Key: k1\n"


def test_order_conf(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "order-conf", "put", "TopicTest", "broker-a:4;broker-b:4")
    assert code == 0 and "ORDER_TOPIC_CONFIG TopicTest" in out
    assert _json(capsys, fleet, "order-conf", "get", "TopicTest") == {
        "value": "broker-a:4;broker-b:4"}
    assert fleet.get("/v1/kv/ORDER_TOPIC_CONFIG/TopicTest") == {"value": "broker-a:4;broker-b:4"}
    code, _, err = _run(capsys, fleet, "order-conf", "put", "TopicTest", "broker-a")
    assert code == 1 and "not brokerName:queueNums" in err
    assert "warning" not in err


def test_order_conf_naming_a_group_without_the_topic_warns_and_stores(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """Java's NameServer and mqadmin store any orderConf; the CLI stores it too, and warns on
    stderr (also with --json) when a named group does not serve the topic."""
    code, out, err = _run(capsys, fleet, "order-conf", "put", "OnlyB", "broker-a:8", "--json")
    assert code == 0 and json.loads(out)
    assert ("warning: broker-a does not serve topic OnlyB now (it is on broker-b)" in err)
    assert fleet.get("/v1/kv/ORDER_TOPIC_CONFIG/OnlyB") == {"value": "broker-a:8"}
    code, _, err = _run(capsys, fleet, "order-conf", "put", "NoSuchTopic", "broker-a:8")
    assert code == 0 and "(it is on no broker group)" in err
    code, _, err = _run(capsys, fleet, "order-conf", "put", "OnlyB", "broker-b:8")
    assert code == 0 and err == ""
    for topic in ("OnlyB", "NoSuchTopic"):
        assert _run(capsys, fleet, "order-conf", "delete", topic)[0] == 0
    code, out, _ = _run(capsys, fleet, "order-conf", "delete", "TopicTest")
    assert code == 0 and "deleted ORDER_TOPIC_CONFIG TopicTest" in out
    code, _, err = _run(capsys, fleet, "order-conf", "get", "TopicTest")
    assert code == 1 and "No config item" in err


def test_write_perm(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, fleet, "wipe-write-perm", "broker-b")
    assert code == 0 and "wiped the write perm of broker broker-b in 2 topics" in out
    route = _json(capsys, fleet, "topic-route", "OnlyB")
    assert route["queueDatas"][0]["perm"] == 4
    assert _json(capsys, fleet, "add-write-perm", "broker-b") == {"addTopicCount": 2}
    code, out, _ = _run(capsys, fleet, "add-write-perm", "broker-b")
    assert code == 0 and "added the write perm of broker broker-b in 2 topics" in out
    # A group no broker registered: Java answers a count of 0; a person is told (exit 1).
    for action in ("wipe-write-perm", "add-write-perm"):
        code, out, err = _run(capsys, fleet, action, "no-such-broker")
        assert code == 1 and out == ""
        assert err == (f"nsfleet admin {action}: no broker group no-such-broker is registered: "
                       "nothing changed (check the name: nsfleet admin cluster-list)\n")


def test_changes_show_the_fleets_history_from_any_worker(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet.post("/v1/brokers/broker-b/add-write-perm", {}) == {"addTopicCount": 2}
    per_worker = []
    for url in fleet.urls:
        code = main(["admin", "--server", url, "changes", "--json", "--limit", "1000"])
        out, err = capsys.readouterr()
        assert code == 0, err
        per_worker.append(json.loads(out)["changes"])
    assert per_worker[0] == per_worker[1]  # one history, whichever worker answers
    changes = per_worker[0]
    assert changes[0]["action"] == "write perm added"
    assert changes[0]["detail"]["broker_name"] == "broker-b"
    registered = {c["detail"]["broker_addr"] for c in changes if c["action"] == "broker registered"}
    assert {addr for *_, addr in BROKERS} <= registered
    # The fixture registered through the last worker, the wipe above too; other tests of this
    # module wrote through either worker.
    last = fleet.get("/v1/status")["workerId"]
    assert changes[0]["worker"] == last
    assert {c["worker"] for c in changes if c["action"] == "broker registered"} == {last}
    assert {c["worker"] for c in changes} <= {fleet.get("/v1/status", i)["workerId"]
                                              for i in range(len(fleet.urls))}
    code, out, _ = _run(capsys, fleet, "changes", "--limit", "2")
    assert code == 0 and "Recent changes (2)" in out and "write perm added" in out
    with pytest.raises(SystemExit) as info:  # usage errors are argparse's: status 2
        main(["admin", "--server", fleet.servers, "changes", "--limit", "0"])
    assert info.value.code == 2 and "between 1 and 1000" in capsys.readouterr().err
    code, _, err = _remoting(capsys, fleet, "changes")
    assert code == 1 and "HTTP API only" in err


def test_options_after_the_command_and_failover(fleet: Fleet,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    code = main(["admin", "topic-list", "--json", "--server", f"{dead},{fleet.urls[1]}"])
    out, _ = capsys.readouterr()
    assert code == 0 and "TopicTest" in json.loads(out)["topicList"]
    code = main(["admin", "--json", "kv", "get", "--server", f"{dead},{fleet.urls[0]}", "cli-ns",
                 "k2"])
    assert code == 0 and json.loads(capsys.readouterr().out) == {"value": "two"}


def _remoting(capsys: pytest.CaptureFixture[str], fleet: Fleet, *argv: str) -> tuple[int, str,
                                                                                        str]:
    dead = f"127.0.0.1:{free_port()}"
    addrs = f"{dead};127.0.0.1:{fleet.settings[1].remoting_port}"  # mqadmin's -n, failing over
    code = main(["admin", "-n", addrs, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_remoting_tables_say_why_heartbeats_are_missing(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("cluster-list", "broker-list"):
        code, out, err = _remoting(capsys, fleet, command)
        assert code == 0, err
        assert "no NameServer request over remoting carries it" in " ".join(out.split())
        code, out, err = _run(capsys, fleet, command)
        assert code == 0 and "over remoting" not in out and " ago" in out


def test_every_command_over_the_remoting_protocol(fleet: Fleet,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """nsfleet admin -n host:9876 speaks RocketMQ remoting, as mqadmin does, with the same JSON
    as over HTTP where the remoting answer carries it."""
    def ok(*argv: str) -> Any:
        code, out, err = _remoting(capsys, fleet, *argv, "--json")
        assert code == 0, err
        return json.loads(out)

    http_info = _json(capsys, fleet, "cluster-list")
    assert ok("cluster-list") == {k: http_info[k] for k in ("brokerAddrTable",
                                                            "clusterAddrTable")}
    assert ok("topic-route", "TopicTest") == _json(capsys, fleet, "topic-route", "TopicTest")
    assert "TopicTest" in ok("topic-list")["topicList"]
    assert ok("topic-cluster-list", "TopicTest") == _json(capsys, fleet, "topic-cluster-list",
                                                          "TopicTest")
    ok("kv", "put", "rem-ns", "k", "v")
    assert ok("kv", "get", "rem-ns", "k") == {"value": "v"}
    assert ok("kv", "list", "rem-ns") == {"table": {"k": "v"}}
    ok("kv", "delete", "rem-ns", "k")
    assert len(ok("namesrv-config", "get")["config"]) == 40
    # Unknown targets: the remoting answers are Java's (SUCCESS, count 0; unknown keys
    # ignored), so the CLI checks the cluster info and the config listing itself.
    code, _, err = _remoting(capsys, fleet, "wipe-write-perm", "no-such-broker")
    assert code == 1 and "no broker group no-such-broker is registered" in err
    code, _, err = _remoting(capsys, fleet, "namesrv-config", "set", "noSuchKey=1",
                             "orderMessageEnable=false")
    assert code == 1 and err == ("nsfleet admin namesrv-config: unknown keys: noSuchKey (the "
                                 "NameServer's config lists no such key); nothing sent\n")
    code, _, err = _remoting(capsys, fleet, "topic-route", "NoSuchTopic")
    assert code == 1 and "No topic route info in name server for the topic: NoSuchTopic" in err
    brokers = ok("broker-list")["brokers"]
    http_brokers = _json(capsys, fleet, "broker-list")["brokers"]
    assert sorted((b["brokerName"], b["brokerAddr"]) for b in brokers) == sorted(
        (b["brokerName"], b["brokerAddr"]) for b in http_brokers)


def test_wrong_port_errors_name_the_protocol_and_the_other_option(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    remoting = f"127.0.0.1:{fleet.settings[0].remoting_port}"
    http_port = fleet.urls[0].rsplit(":", 1)[1]
    code = main(["admin", "--server", f"http://{remoting}", "--timeout", "2", "cluster-list"])
    err = capsys.readouterr().err
    assert code == 1 and "over HTTP" in err and "-n HOST:9876" in err and err.count("\n") == 1
    code = main(["admin", "-n", f"127.0.0.1:{http_port}", "--timeout", "2", "cluster-list"])
    err = capsys.readouterr().err
    assert code == 1 and "remoting protocol" in err and "--server" in err


class _Unavailable(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"code": 503, "error": "draining"}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_errors_are_one_line_on_stderr(fleet: Fleet, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _run(capsys, fleet, "topic-route", "NoSuchTopic")
    assert code == 1 and out == ""
    assert err == ("nsfleet admin topic-route: No topic route info in name server for the "
                   "topic: NoSuchTopic\n")
    code, _, err = _run(capsys, fleet, "topic-route", "bad,topic")
    assert code == 1 and err.count("\n") == 1 and "topic: 'bad,topic' is a topic name with" in err
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dead = f"http://127.0.0.1:{free_port()}"
        monkeypatch.setenv("NSFLEET_SERVER", f"{dead},http://127.0.0.1:{server.server_port}")
        code = main(["admin", "cluster-list"])
        _, err = capsys.readouterr()
        assert code == 1 and err.count("\n") == 1
        assert err.startswith("nsfleet admin cluster-list: over HTTP, no nsfleet worker answered")
        assert "answered 503 draining" in err and "-n HOST:9876" in err  # for the dead one
        # Every worker answered: reported as such, without the remoting-port hint.
        unavailable = f"http://127.0.0.1:{server.server_port}"
        monkeypatch.setenv("NSFLEET_SERVER", unavailable)
        code = main(["admin", "cluster-list"])
        err = capsys.readouterr().err
        assert code == 1 and err == ("nsfleet admin cluster-list: the worker answered: draining "
                                     f"(HTTP 503 from {unavailable})\n")
        monkeypatch.setenv("NSFLEET_SERVER", f"{unavailable},http://localhost:{server.server_port}")
        code = main(["admin", "cluster-list"])
        err = capsys.readouterr().err
        assert code == 1 and err == (
            f"nsfleet admin cluster-list: every worker answered with an error: {unavailable}: "
            f"draining (HTTP 503); http://localhost:{server.server_port}: draining (HTTP 503)\n")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(SystemExit) as info:  # usage errors are argparse's: status 2
        main(["admin", "kv", "put", "only-namespace"])
    assert info.value.code == 2


def test_namesrv_config_shows_the_sweep_period_the_worker_uses(
        redis_server: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    """scanNotActiveBrokerInterval is what the worker does (its --sweep-interval, in ms), over
    HTTP and remoting alike."""
    with Fleet(redis_server.url, workers=1, sweep_interval=2.5) as slow:
        assert _json(capsys, slow, "namesrv-config", "get")["config"][
            "scanNotActiveBrokerInterval"] == "2500"
        code = main(["admin", "-n", f"127.0.0.1:{slow.settings[0].remoting_port}", "--json",
                     "namesrv-config", "get"])
        out = capsys.readouterr().out
        assert code == 0 and json.loads(out)["config"]["scanNotActiveBrokerInterval"] == "2500"


def test_namesrv_config_get_and_set(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """getNamesrvConfig / updateNamesrvConfig from the CLI, fleet-wide, with 318's parsing and
    blacklist."""
    config = _json(capsys, fleet, "namesrv-config", "get")["config"]
    assert config["orderMessageEnable"] == "false" and len(config) == 40
    out = _json(capsys, fleet, "namesrv-config", "set", "orderMessageEnable=TRUE",
                "waitSecondsForService=abc")
    assert out == {"applied": {"orderMessageEnable": "true"}}
    code, out_text, err = _run(capsys, fleet, "namesrv-config", "set", "waitSecondsForService=x")
    assert code == 0 and err == ("nsfleet admin namesrv-config: warning: not applied, as Java "
                                 "does not apply a value it cannot parse (the key keeps its "
                                 "value): waitSecondsForService=x\n")
    # An unknown key (Java ignores it silently): exit 1, named, nothing applied.
    code, out_text, err = _run(capsys, fleet, "namesrv-config", "set", "noSuchKey=1",
                               "orderMessageEnable=false")
    assert code == 1 and out_text == ""
    assert err == ("nsfleet admin namesrv-config: not a fleet-wide NameServer config key: "
                   "unknown keys: noSuchKey; nothing applied\n")
    code, _, err = _run(capsys, fleet, "namesrv-config", "set", "kvConfigPath=/tmp/x")
    assert code == 1 and "Can not update config in black list." in err
    code, out_text, _ = _run(capsys, fleet, "namesrv-config", "get")
    assert code == 0 and "orderMessageEnable" in out_text
    assert _json(capsys, fleet, "namesrv-config", "get")["config"]["orderMessageEnable"] == "true"
    _json(capsys, fleet, "namesrv-config", "set", "orderMessageEnable=false")
