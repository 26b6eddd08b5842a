"""Workers on unix:// and redis+sentinel:// Redis, and draining on SIGTERM."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer, free_port
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

BROKER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
          "brokerId": 0, "topicConfigTable": {"T1": {}, "T2": {}}}


def _round_trip(worker: WorkerProcess) -> None:
    assert http("POST", f"{worker.url}/v1/brokers/register", BROKER)[0] == 200
    status, route = http("GET", f"{worker.url}/v1/routes/T1")
    assert status == 200 and route["brokerDatas"][0]["brokerName"] == "broker-a"


def test_unix_socket_url(tmp_path: Path) -> None:
    sock = Path("/tmp") / f"nsfleet-test-{free_port()}.sock"  # short: sun_path is 108 bytes
    with RedisServer(data_dir=tmp_path / "r", appendonly=False,
                     extra_args=["--unixsocket", str(sock), "--unixsocketperm", "700"]):
        worker = WorkerProcess({"NSFLEET_REDIS_URL": f"unix://{sock}?db=0"},
                               tmp_path / "w.log").start()
        try:
            _round_trip(worker)
        finally:
            assert worker.stop() == 0


def test_sentinel_url(tmp_path: Path) -> None:
    with RedisServer(data_dir=tmp_path / "master", appendonly=False) as master:
        sentinel_port = free_port()
        conf = tmp_path / "sentinel" / "sentinel.conf"
        conf.parent.mkdir()
        conf.write_text(f"port {sentinel_port}\nbind 127.0.0.1\n"
                        f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n")
        sentinel = RedisServer(data_dir=conf.parent, port=sentinel_port, appendonly=False,
                               config_file=conf, extra_args=["--sentinel"])
        with sentinel:
            url = f"redis+sentinel://127.0.0.1:{sentinel_port}/mymaster/0"
            worker = WorkerProcess({"NSFLEET_REDIS_URL": url}, tmp_path / "w.log").start()
            try:
                _round_trip(worker)
            finally:
                assert worker.stop() == 0


def test_sigterm_lets_in_flight_long_polls_finish(redis_server: RedisServer,
                                                  tmp_path: Path) -> None:
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "drain",
                            "NSFLEET_DRAIN_TIMEOUT": "5"}, tmp_path / "w.log").start()
    _round_trip(worker)
    results: list[int] = []

    def poll() -> None:
        import urllib.error
        import urllib.request
        req = urllib.request.Request(f"{worker.url}/v1/routes/T2?wait=20",
                                     headers={"If-None-Match": '"0"'})
        first = urllib.request.urlopen(req, timeout=10)
        etag = first.headers["ETag"]
        req = urllib.request.Request(f"{worker.url}/v1/routes/T2?wait=20",
                                     headers={"If-None-Match": etag})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                results.append(resp.status)
        except urllib.error.HTTPError as exc:
            results.append(exc.code)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(1.0)
    started = time.monotonic()
    assert worker.stop(signal.SIGTERM) == 0
    t.join(10)
    assert results == [304]  # answered (not cut off) as soon as the drain began
    assert time.monotonic() - started < 5


def test_worker_rides_out_a_redis_restart(tmp_path: Path) -> None:
    """Redis goes away and comes back empty on the same port (no persistence): with stale
    serving off the worker answers 503 / not ready meanwhile (the behaviour before stale views,
    tests/integration/test_store_outage*.py cover them), then serves again by itself (scripts
    reloaded after NOSCRIPT, change feed resubscribed) — no restart of the worker needed."""
    port = free_port()
    server = RedisServer(data_dir=tmp_path / "r", port=port, appendonly=False).start()
    worker = WorkerProcess({"NSFLEET_REDIS_URL": server.url, "NSFLEET_STALE_SERVE_MAX": "0"},
                           tmp_path / "w.log").start()
    try:
        _round_trip(worker)
        server.stop()
        status, body = http("GET", f"{worker.url}/v1/routes/T1")
        assert status == 503, body
        assert http("GET", f"{worker.url}/v1/cluster-info")[0] == 503
        assert http("GET", f"{worker.url}/readyz")[0] == 503
        assert http("GET", f"{worker.url}/livez")[0] == 200
        server = RedisServer(data_dir=tmp_path / "r2", port=port, appendonly=False).start()
        deadline = time.monotonic() + 15
        while http("GET", f"{worker.url}/readyz")[0] != 200:
            assert time.monotonic() < deadline, "worker never became ready again"
            time.sleep(0.2)
        assert http("GET", f"{worker.url}/v1/routes/T1")[0] == 404  # the new Redis is empty
        _round_trip(worker)  # scripts are loaded again on first use
    finally:
        assert worker.stop() == 0
        server.stop()
