"""Issue 30: a real RocketMQ 4.9.8 broker registers with a fleet of two workers (and, in another
case, finds a worker through the address server); every worker answers routes, cluster info and
topic lists as the Java NameServer the same broker registered with, as the 4.9.8 client decodes
them; ``nsfleet admin diff`` finds them equal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer
from tests.java.answers import by_ns
from tests.java.conftest import fleet_env, remoting
from tests.support import java_rocketmq as jr
from tests.support.workers import started

READS = ("route|TBW102", "route|broker-a", "route|DefaultCluster", "route|NoSuchTopic",
         "cluster", "topics", "bycluster|DefaultCluster")


def test_every_worker_answers_as_the_java_namesrv(broker_a: jr.Broker, every_ns: list[str],
                                                  nsadmin: Path) -> None:
    answers = by_ns(jr.admin(nsadmin, every_ns, *READS))
    java = answers[every_ns[-1]]
    assert java["route|TBW102"]["brokerDatas"][0]["brokerAddrs"] == {"0": broker_a.addr}
    assert java["route|NoSuchTopic"] == ("error", 17)
    for worker in every_ns[:-1]:
        assert answers[worker] == java, worker


def test_every_worker_routes_what_the_broker_holds(broker_a: jr.Broker, every_ns: list[str],
                                                   nsadmin: Path) -> None:
    """Each topic config the broker holds (its own answer to GET_ALL_TOPIC_CONFIG) is in every
    worker's topic list and route, with the broker's queue counts, perm and sysflag."""
    op = f"brokertopics|{broker_a.addr}"
    held = jr.admin(nsadmin, [every_ns[-1]], op)[every_ns[-1]][op]["ok"]
    assert "TBW102" in held and len(held) >= 5
    answers = jr.admin(nsadmin, every_ns[:-1], "topics", *(f"route|{t}" for t in held))
    for worker, ops in answers.items():
        assert set(held) <= set(ops["topics"]["ok"]), worker
        for topic, conf in held.items():
            (queue,) = [q for q in ops[f"route|{topic}"]["ok"]["queueDatas"]
                        if q["brokerName"] == "broker-a"]
            assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"],
                    queue["topicSysFlag"]) == (conf["readQueueNums"], conf["writeQueueNums"],
                                               conf["perm"], conf["topicSysFlag"]), (worker, topic)


def test_e2e_route_mode_decodes_the_same(broker_a: jr.Broker, every_ns: list[str]) -> None:
    """e2e.sh --route (the shared tool's own reader) on a worker and on the Java NameServer."""
    worker, java = jr.route_as_decoded(every_ns[0], "TBW102"), jr.route_as_decoded(every_ns[-1],
                                                                                 "TBW102")
    assert worker["ROUTE"] == java["ROUTE"]
    assert worker["CLUSTER"] == java["CLUSTER"]
    assert sorted(worker["TOPICS"]["topicList"]) == sorted(java["TOPICS"]["topicList"])


def test_admin_diff_finds_them_equal(broker_a: jr.Broker, every_ns: list[str]) -> None:
    for worker in every_ns[:-1]:
        done = subprocess.run([sys.executable, "-m", "nsfleet", "admin", "diff", "--json",
                               every_ns[-1], worker], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["equal"] is True


@pytest.mark.parametrize("client_version", [409, 479])
def test_admin_diff_bytes_reports_only_the_documented_differences(
        broker_a: jr.Broker, every_ns: list[str], client_version: int) -> None:
    """The raw answers to a 4.9.8 client (409) and to a 5.3.3 one (479): the 4.9.8 NameServer
    and a worker differ only where the README's list of differences says (topic lists in
    sorted instead of HashMap order; for a 5.x client, which 4.9.8 answers as 4.9.8, the
    header version, BrokerData's enableActingMaster and the FAQ address of 5.x)."""
    done = subprocess.run([sys.executable, "-m", "nsfleet", "admin", "diff", "--json", "--bytes",
                           "--client-version", str(client_version), every_ns[-1], every_ns[0]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    raw = json.loads(done.stdout)["bytes"]
    print(json.dumps(raw, indent=1))
    unexplained = [d for d in raw if not (
        d["orderOnly"] and d["request"].split()[0] in ("206", "224", "304"))]
    if client_version < 413:
        assert unexplained == []
    else:
        assert {(d["part"], d["request"].split()[0]) for d in unexplained} <= {
            ("version", c) for c in ("105", "106", "206", "224", "304", "219")} | {
            ("body", "105"), ("body", "106"), ("remark", "105")}


def test_broker_finds_a_worker_through_the_address_server(
        java_home: Path, redis_server: RedisServer, nsadmin: Path,
        tmp_path: Path) -> None:
    """No namesrvAddr: the 4.9.8 broker (fetchNamesrvAddrByAddressServer=true) reads the list
    from http://{rocketmq.namesrv.domain}/rocketmq/{rocketmq.namesrv.domain.subgroup} (MixAll
    .getWSAddr; 4.9.8 takes both as JVM system properties, 5.x as rmqAddressServerDomain and
    rmqAddressServerSubGroup) 10 s after it starts, then registers on its next round."""
    with started(fleet_env(redis_server, "java-address-server"), tmp_path, count=1) as (w,):
        props = ("brokerName=broker-addr", "brokerClusterName=AddrCluster",
                 "fetchNamesrvAddrByAddressServer=true", "registerNameServerPeriod=10000")
        domain = (f"-Drocketmq.namesrv.domain=127.0.0.1:{w.http_port} "
                  "-Drocketmq.namesrv.domain.subgroup=nsaddr")
        with jr.broker(None, tmp_path / "broker-addr", *props,
                       env={"JAVA_TOOL_OPTIONS": domain}) as b:
            jr.wait_registered(remoting(w), "broker-addr", b.addr, timeout=90)
            answers = jr.admin(nsadmin, [remoting(w)], "route|TBW102", "cluster")[remoting(w)]
    route = answers["route|TBW102"]["ok"]
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": b.addr}, "brokerName": "broker-addr",
                                     "cluster": "AddrCluster"}]
    assert answers["cluster"]["ok"]["clusterAddrTable"] == {"AddrCluster": ["broker-addr"]}


pytestmark = pytest.mark.timeout(600)
