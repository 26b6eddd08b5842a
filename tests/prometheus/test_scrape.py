"""A real Prometheus (Debian's prometheus package) scrapes two real workers, and every query of
the chart's Grafana dashboard returns series: brokers registered over HTTP and remoting, reads
over both, a broker that expires, a refused request, a controller broker set whose master a
worker elects, then a Redis outage."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from nsfleet.client.broker_loop import BrokerIdentity
from nsfleet.client.remoting import NamesrvClient
from nsfleet.client.remoting_broker import RemotingBrokerAgent
from nsfleet.domain.model import TopicConfig
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.store import RouteStore
from nsfleet.wire.codec import RequestCode
from tests.support.controller_sets import make_broker_set
from tests.support.workers import WorkerProcess, request

pytestmark = pytest.mark.redis
PROMETHEUS = shutil.which("prometheus")
DASHBOARD = Path(__file__).parents[2] / "helm" / "nsfleet" / "files" / "dashboard.json"
WAIT = 60.0  # seconds any one condition may take (scrapes every second)
NAMESPACE = "scrape"


def dashboard_queries() -> list[str]:
    """The dashboard's PromQL as Grafana sends it: every job, a 15 s rate window."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"].replace('"$job"', '".+"').replace("$__rate_interval", "15s")
            for p in panels for t in p.get("targets", [])]


class Prometheus:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "nsfleet", "scrape_timeout": "1s",
                                "static_configs": [{"targets": targets}]}]}))
        assert PROMETHEUS is not None
        self.log = workdir / "prometheus.log"
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def query(self, promql: str) -> list[dict]:
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_for(what: str, check: Callable[[], object], log: Path) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:  # Prometheus still starting
            pass
        time.sleep(0.5)
    raise AssertionError(f"{what} within {WAIT} s; prometheus log: {log.read_text()[-2000:]}")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=tmp_path / "redis", appendonly=False).start()
    yield server
    server.stop()


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus (Debian package) missing")
def test_prometheus_scrapes_two_workers_and_every_dashboard_query_has_series(
        tmp_path: Path, redis: RedisServer) -> None:
    token = tmp_path / "write.token"
    token.write_text("s3cret-write-token\n")
    env = {"NSFLEET_REDIS_URL": redis.url, "NSFLEET_NAMESPACE": NAMESPACE,
           "NSFLEET_SWEEP_INTERVAL": "1", "NSFLEET_LOG_FORMAT": "json"}
    open_worker = WorkerProcess(env, tmp_path / "w1.log").start()
    tokened = WorkerProcess({**env, "NSFLEET_WRITE_TOKEN_FILE": str(token)},
                            tmp_path / "w2.log").start()
    prometheus = Prometheus(tmp_path, [f"127.0.0.1:{w.http_port}"
                                       for w in (open_worker, tokened)])
    loop = asyncio.new_event_loop()  # the broker agent beats on it while the test waits
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    agent: RemotingBrokerAgent | None = None
    try:
        agent = asyncio.run_coroutine_threadsafe(_traffic(open_worker), loop).result(30)
        # A refused write (no token): an access denial.
        assert request("POST", f"{tokened.url}/v1/brokers/unregister", {})[0] == 401
        # The controller: a broker set (master 1, both replicas in sync) and a worker's
        # election (the admin's electMaster) for the elections panel; every worker's scan
        # (after its start-up grace) reports the set's SyncStateSet size.
        asyncio.run_coroutine_threadsafe(_broker_set(redis.url), loop).result(30)
        status, elected = request("POST", f"{open_worker.url}/v1/controller/broker-sets/"
                                  "ctl-a/elect", {"brokerId": 2})
        assert status == 200 and elected["masterBrokerId"] == 2, elected
        queries = [q for q in dashboard_queries() if "nsfleet_redis_errors_total" not in q]
        wait_for("both workers scraped",
                 lambda: len(prometheus.query('up{job="nsfleet"} == 1')) == 2, prometheus.log)
        wait_for("the expired broker's cluster at 0", lambda: prometheus.query(
            'nsfleet_cluster_brokers_alive{cluster="ShortLived"} == 0'), prometheus.log)
        missing: list[str] = []

        def all_answer() -> bool:
            missing[:] = [q for q in queries if not prometheus.query(q)]
            return not missing

        try:
            wait_for("every dashboard query answered", all_answer, prometheus.log)
        except AssertionError:
            raise AssertionError(f"dashboard queries without series: {missing}") from None

        # A Redis outage: store availability drops and the Redis errors panel fills.
        redis.stop()
        assert request("GET", f"{open_worker.url}/readyz")[0] == 503
        outage = [q for q in dashboard_queries() if "nsfleet_redis_errors_total" in q]
        assert outage
        wait_for("the outage in the Redis errors and store panels", lambda: all(
            prometheus.query(q) for q in outage) and prometheus.query(
            "nsfleet_store_up == 0"), prometheus.log)
    finally:
        if agent is not None:
            asyncio.run_coroutine_threadsafe(agent.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        prometheus.stop()
        for worker in (open_worker, tokened):
            worker.stop()


async def _broker_set(redis_url: str) -> None:
    """A controller broker set in the workers' namespace, as a broker's start-up makes it."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        store = RouteStore(client, NAMESPACE)
        await store.load_scripts()
        await make_broker_set(store, "ctl-a", "DefaultCluster", (1, 2))
    finally:
        await client.aclose()


async def _traffic(worker: WorkerProcess) -> RemotingBrokerAgent:
    """Registrations and reads over both protocols; returns the remoting broker, still live."""
    remoting = f"127.0.0.1:{worker.remoting_port}"
    agent = RemotingBrokerAgent(remoting, BrokerIdentity(
        "DefaultCluster", "broker-a", "10.0.0.1:10911", ha_server_addr="10.0.0.1:10912"),
        [TopicConfig("TopicTest"), TopicConfig("TBW102")], heartbeat_interval=1.0)
    await agent.start()  # REGISTER_BROKER over remoting, its connection kept open
    body = {"clusterName": "ShortLived", "brokerAddr": "10.0.0.9:10911", "brokerName": "brief",
            "brokerId": 0, "heartbeatTimeoutMillis": 1000,
            "topicConfigTable": {"Brief": {}, "Brief2": {}}}
    assert (await asyncio.to_thread(
        request, "POST", f"{worker.url}/v1/brokers/register", body))[0] == 200
    client = NamesrvClient(remoting)
    for _ in range(20):
        assert (await asyncio.to_thread(
            request, "GET", f"{worker.url}/v1/routes/TopicTest"))[0] == 200
        resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert resp.code == 0
    return agent
