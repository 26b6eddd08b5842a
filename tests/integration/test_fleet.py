"""A fleet of real ``nsfleet serve`` processes on one real redis-server (issue 3's done-when)."""

from __future__ import annotations

import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from nsfleet.embedded import running_url
from nsfleet.redis_server import RedisServer
from tests.support.workers import WorkerProcess, started
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

BROKER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
          "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
          "topicConfigTable": {"T1": {"readQueueNums": 4, "writeQueueNums": 4},
                               "T2": {}}}
IDENT = {k: BROKER[k] for k in ("clusterName", "brokerAddr", "brokerName", "brokerId")}


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[list[WorkerProcess]]:
    namespace = "fleet-" + request.node.name.replace("_", "-")[:40]
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": namespace,
           "NSFLEET_SWEEP_INTERVAL": "1", "NSFLEET_DRAIN_TIMEOUT": "2"}
    with started(env, tmp_path) as workers:
        yield workers


def test_every_worker_answers_the_same_at_once(fleet: list[WorkerProcess]) -> None:
    a, b, c = fleet
    assert http("POST", f"{a.url}/v1/brokers/register", BROKER)[0] == 200
    for w in (b, c):
        status, route = http("GET", f"{w.url}/v1/routes/T1")
        assert status == 200, route
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert http("POST", f"{c.url}/v1/brokers/unregister", IDENT)[0] == 200
    with urllib.request.urlopen(f"{a.url}/metrics", timeout=5) as resp:
        metrics = resp.read().decode()
    assert 'nsfleet_lua_call_seconds_count{script="register_broker"} 1.0' in metrics
    for w in (a, b, c):
        status, body = http("GET", f"{w.url}/v1/routes/T1")
        assert status == 404 and body["code"] == 17
        assert http("GET", f"{w.url}/v1/cluster-info")[1]["clusterAddrTable"] == {}


def test_kill_9_of_one_worker_loses_nothing(fleet: list[WorkerProcess]) -> None:
    a, b, c = fleet
    assert http("POST", f"{a.url}/v1/brokers/register", BROKER)[0] == 200
    failures: list[str] = []
    answered = {b.url: 0, c.url: 0}
    stop = threading.Event()

    def traffic(url: str) -> None:
        deadline = time.monotonic() + 10
        while not stop.is_set() and time.monotonic() < deadline:
            status, _ = http("GET", f"{url}/v1/routes/T1")
            if status != 200:
                failures.append(f"{url}: {status}")
            answered[url] += 1

    threads = [threading.Thread(target=traffic, args=(w.url,)) for w in (b, c)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    a.stop(signal.SIGKILL)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(15)
    assert not failures
    assert all(n > 5 for n in answered.values()), answered
    # The killed worker's registration is in Redis, not in the worker: still served.
    assert http("GET", f"{b.url}/v1/cluster-info")[1]["clusterAddrTable"] == {
        "c1": ["broker-a"]}


def test_silent_broker_expires_from_routes_then_tables(fleet: list[WorkerProcess]) -> None:
    a, b, _ = fleet
    short = {**BROKER, "heartbeatTimeoutMillis": 3000}
    registered = time.monotonic()
    assert http("POST", f"{a.url}/v1/brokers/register", short)[0] == 200
    gone_from_routes = gone_from_tables = None
    while time.monotonic() - registered < 8:
        now = time.monotonic() - registered
        if gone_from_routes is None and http("GET", f"{b.url}/v1/routes/T1")[0] == 404:
            gone_from_routes = now
        info = http("GET", f"{b.url}/v1/cluster-info")[1]
        if gone_from_tables is None and info["clusterAddrTable"] == {}:
            gone_from_tables = now
        if gone_from_routes is not None and gone_from_tables is not None:
            break
        time.sleep(0.05)
    # The row's TTL is the deadline; the slack is only the 50 ms polling and HTTP round trips.
    assert gone_from_routes is not None and 2.5 < gone_from_routes <= 3.5, gone_from_routes
    # Deadline plus one sweep interval (1 s here), plus scheduling slack.
    assert gone_from_tables is not None and gone_from_tables <= 3 + 1 + 0.5, gone_from_tables


def test_heartbeats_keep_a_broker_alive(fleet: list[WorkerProcess]) -> None:
    a, b, c = fleet
    short = {**BROKER, "heartbeatTimeoutMillis": 1500}
    assert http("POST", f"{a.url}/v1/brokers/register", short)[0] == 200
    deadline = time.monotonic() + 4
    workers = [b, c, a]
    i = 0
    while time.monotonic() < deadline:
        status, body = http("POST", f"{workers[i % 3].url}/v1/brokers/heartbeat", IDENT)
        assert status == 200 and body["known"], body
        i += 1
        time.sleep(0.5)
    assert http("GET", f"{c.url}/v1/routes/T1")[0] == 200


def test_serve_with_embedded_redis_cleans_up(tmp_path: Path) -> None:
    worker = WorkerProcess({"NSFLEET_DATA_DIR": str(tmp_path / "data"), "NSFLEET_REDIS_URL": ""},
                           tmp_path / "embedded.log")
    worker.start()
    assert worker.process is not None
    children = psutil.Process(worker.process.pid).children(recursive=True)
    assert any(p.name() in ("redis-server", "valkey-server") for p in children)
    assert http("GET", f"{worker.url}/readyz")[0] == 200
    assert http("PUT", f"{worker.url}/v1/kv/ns/k", {"value": "v"})[0] == 200
    # `nsfleet analytics` with no --redis-url finds this Redis through the data directory.
    url = running_url(tmp_path / "data")
    assert url is not None and redis.Redis.from_url(url).ping()
    assert worker.stop(signal.SIGTERM) == 0
    assert running_url(tmp_path / "data") is None
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive
    # Redis 6.2 writes appendonly.aof; Redis 7+ and Valkey a multi-part appendonlydir/.
    assert ((tmp_path / "data" / "appendonly.aof").exists()
            or any((tmp_path / "data" / "appendonlydir").glob("*.aof")))
    # KV config survives a restart (AOF).
    again = WorkerProcess({"NSFLEET_DATA_DIR": str(tmp_path / "data"), "NSFLEET_REDIS_URL": ""},
                          tmp_path / "embedded2.log").start()
    try:
        assert http("GET", f"{again.url}/v1/kv/ns/k") == (200, {"value": "v"})
    finally:
        assert again.stop() == 0


def test_second_worker_on_same_data_dir_joins_the_first(tmp_path: Path) -> None:
    """Issue 40: it uses the first's embedded Redis (tests/integration/test_embedded_redis.py
    covers what each of them may do with it)."""
    env = {"NSFLEET_DATA_DIR": str(tmp_path / "data"), "NSFLEET_REDIS_URL": ""}
    first = WorkerProcess(env, tmp_path / "one.log").start()
    try:
        second = WorkerProcess(env, tmp_path / "two.log").start()
        assert "joined the embedded redis" in (tmp_path / "two.log").read_text()
        assert http("PUT", f"{second.url}/v1/kv/ns/k", {"value": "v"})[0] == 200
        assert http("GET", f"{first.url}/v1/kv/ns/k") == (200, {"value": "v"})
        assert second.stop() == 0
    finally:
        first.stop()


def test_worker_refuses_an_evicting_redis(tmp_path: Path) -> None:
    with RedisServer(data_dir=tmp_path / "r", appendonly=False,
                     extra_args=["--maxmemory", "100mb"]) as server:
        with redis.Redis.from_url(server.url) as client:
            client.config_set("maxmemory-policy", "allkeys-lru")
        worker = WorkerProcess({"NSFLEET_REDIS_URL": server.url}, tmp_path / "w.log")
        with pytest.raises(RuntimeError, match="maxmemory-policy"):
            worker.start()


def test_a_java_namesrv_properties_file(redis_server: RedisServer, tmp_path: Path) -> None:
    """nsfleet serve -c namesrv.properties: NamesrvConfig keys apply fleet-wide at start, the
    keys nsfleet does not implement are named in the log."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("orderMessageEnable=true\nwaitSecondsForService=abc\n"
                    "kvConfigPath=/opt/kv.json\nclientCallbackExecutorThreads=4\n")
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "javaconf",
                            "NSFLEET_NAMESRV_CONFIG_FILE": str(conf)}, tmp_path / "w.log").start()
    try:
        config = http("GET", f"{worker.url}/v1/namesrv-config")[1]["config"]
        assert config["orderMessageEnable"] == "true" and config["waitSecondsForService"] == "45"
    finally:
        assert worker.stop() == 0
    log = (tmp_path / "w.log").read_text()
    assert "namesrv config file keys ignored" in log and "clientCallbackExecutorThreads" in log
