"""A fleet of real ``nsfleet serve`` processes on a Redis Cluster started here (3 masters, one
replica each, 1 s cluster-node-timeout): two namespaces whose slots are on different shards, routes
served from both, then SIGKILL of one shard's master. Its replica is promoted; the workers of
that namespace resume serving and registering, what was acknowledged before (made durable with
WAIT 1, as async replication alone promises nothing) is still there, a worker's cache does not
keep a route from before the failover, and the key-schema invariants hold.

Skipped only outside CI when the cluster cannot be started; in CI (``$CI`` set) it must run.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from nsfleet.redis_server import free_port
from nsfleet.store.keys import Keys
from tests.support.invariants import orphans
from tests.support.redis_cluster import RedisClusterNodes, redis_cli, start_cluster
from tests.support.remoting_client import Broker, RemotingClient, TopicConf
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis
SUCCESS = 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisClusterNodes]:
    try:
        started = start_cluster(tmp_path / "cluster", masters=3, replicas=1,
                                node_timeout_ms=1000, full_coverage=False)
    except Exception as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no Redis Cluster here: {exc}")
    yield started
    started.stop()


async def _client(cluster: RedisClusterNodes) -> RedisCluster:
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port)
                                         for n in cluster.running()], decode_responses=True)
    await client.initialize()
    return client


def _namespaces_on_two_shards(client: RedisCluster) -> tuple[str, str]:
    first = "fleet-a"
    node = client.get_node_from_key(Keys(first).prefix)
    for i in range(100):
        candidate = f"fleet-b{i}"
        if client.get_node_from_key(Keys(candidate).prefix) != node:
            return first, candidate
    raise AssertionError("every candidate namespace hashes to one shard")


def _until(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``probe`` until it returns something truthy (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except Exception as exc:  # a worker between two Redis masters may answer an error
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")


def _route_addrs(worker: WorkerProcess, topic: str) -> dict[str, str] | None:
    status, body = http("GET", f"{worker.url}/v1/routes/{topic}")
    if status != 200:
        return None
    return {b["brokerName"]: b["brokerAddrs"]["0"] for b in body["brokerDatas"]}


def _cache_hits(worker: WorkerProcess) -> float:
    with urllib.request.urlopen(f"{worker.url}/metrics", timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rpartition(" ")[2]) for line in lines
               if line.startswith('nsfleet_route_cache_total{result="hit"}'))


async def _register(worker_conn: RemotingClient, broker: Broker, wait: float = 5.0) -> None:
    answer = await worker_conn.call(broker.register_5x(compressed_body=True), wait)
    assert answer.code == SUCCESS, answer.remark


async def _wait_replicated(port: int, namespace: str) -> None:
    """WAIT 1 on the shard's master after a write of our own in the namespace's slot: the
    replication stream is ordered, so every write acknowledged before is on the replica too."""
    direct = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    try:
        await direct.set(f"test-wait-mark:{{{namespace}}}", "1")
        assert await direct.execute_command("WAIT", 1, 10_000) >= 1
    finally:
        await direct.aclose()


def _promoted(cluster: RedisClusterNodes, dead_port: int) -> bool:
    """A surviving node marks the dead master failed (not just suspected) and all slots are
    served again, so its replica took them over."""
    alive = cluster.running()[0]
    nodes = redis_cli("-p", str(alive.port), "cluster", "nodes").splitlines()
    flags = [line.split()[2].split(",") for line in nodes if f":{dead_port}@" in line]
    return bool(flags) and "fail" in flags[0] and "cluster_state:ok" in redis_cli(
        "-p", str(alive.port), "cluster", "info")


async def test_fleet_survives_a_shard_failover(cluster: RedisClusterNodes, tmp_path: Path) -> None:
    client = await _client(cluster)
    try:
        ns_a, ns_b = _namespaces_on_two_shards(client)
        master_a = client.get_node_from_key(Keys(ns_a).prefix)
        master_b = client.get_node_from_key(Keys(ns_b).prefix)
    finally:
        await client.aclose()

    def worker(namespace: str, name: str) -> WorkerProcess:
        env = {"NSFLEET_REDIS_URL": cluster.url, "NSFLEET_NAMESPACE": namespace,
               "NSFLEET_SWEEP_INTERVAL": "1", "NSFLEET_DRAIN_TIMEOUT": "2"}
        return WorkerProcess(env, tmp_path / f"{name}.log")

    workers = {"a1": worker(ns_a, "a1"), "a2": worker(ns_a, "a2"), "b1": worker(ns_b, "b1")}
    conns: list[RemotingClient] = []
    try:
        for w in workers.values():
            w.start(timeout=30)
        a1, a2, b1 = workers["a1"], workers["a2"], workers["b1"]

        async def connect(w: WorkerProcess) -> RemotingClient:
            conns.append(await RemotingClient.connect(w.remoting_port))
            return conns[-1]

        # A broker keeps a connection to every name server: x to both workers of A.
        x = Broker("c1", "10.0.0.1:10911", "broker-x",
                   topics=[TopicConf("TA1"), TopicConf("TA2")])
        y = Broker("c2", "10.0.1.1:10911", "broker-y", topics=[TopicConf("TB1"), TopicConf("TB2")])
        x_a1, x_a2, y_b1 = await connect(a1), await connect(a2), await connect(b1)
        await _register(x_a1, x)
        await _register(x_a2, x)
        await _register(y_b1, y)
        for w in (a1, a2):
            for _ in range(2):  # the second read is served from the cache
                assert _route_addrs(w, "TA1") == {"broker-x": x.addr}
        assert _route_addrs(b1, "TB1") == {"broker-y": y.addr}
        assert _route_addrs(b1, "TA1") is None  # namespaces are independent
        await _wait_replicated(master_a.port, ns_a)

        # SIGKILL shard A's master: its replica is promoted. Meanwhile shard B is untouched:
        # its worker serves (and registers) throughout.
        b_answers: list[Any] = []
        stop = threading.Event()

        def read_b() -> None:
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline:
                b_answers.append(_route_addrs(b1, "TB1"))
                time.sleep(0.05)

        reader = threading.Thread(target=read_b)
        reader.start()
        dead = next(n for n in cluster.nodes if n.port == master_a.port)
        assert dead.process is not None
        try:
            dead.process.kill()
            dead.process.wait(10)
            y.counter += 1
            await _register(y_b1, y)
            _until("replica promoted", lambda: _promoted(cluster, dead.port))
            cluster.wait_ok(replicas=False)
        finally:
            stop.set()
            reader.join()
        assert len(b_answers) > 20
        assert [a for a in b_answers if a != {"broker-y": y.addr}] == []

        # The workers of A resume: ready, and accepting registrations (the first call may meet a
        # master the worker has not yet heard is gone).
        for w in (a1, a2):
            _until(f"{w.log_path.stem} ready", lambda w=w: http("GET", f"{w.url}/readyz")[0] == 200)
        z = Broker("c1", "10.0.0.2:10911", "broker-z",
                   topics=[TopicConf("TA1"), TopicConf("TA3")])
        z_a1 = await connect(a1)
        deadline = time.monotonic() + 30
        while True:
            try:
                await _register(z_a1, z)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        # a2 cached TA1 before the failover: it must not keep that answer.
        want = {"broker-x": x.addr, "broker-z": z.addr}
        _until("a2 sees broker-z", lambda: _route_addrs(a2, "TA1") == want, timeout=10)
        assert _route_addrs(a1, "TA1") == want
        # a2 caches again (only with a live subscription), and hears of the next change.
        # (Until it has resubscribed, it answers from Redis.)
        def cached() -> bool:
            hits = _cache_hits(a2)
            return _route_addrs(a2, "TA1") == want and _cache_hits(a2) > hits

        _until("a2 caches again", cached, timeout=10)
        assert (await z_a1.call(z.unregister())).code == SUCCESS
        _until("a2 drops broker-z", lambda: _route_addrs(a2, "TA1") == {"broker-x": x.addr},
               timeout=10)
        for w in (a1, a2):  # acknowledged before the failover, still there
            assert _route_addrs(w, "TA2") == {"broker-x": x.addr}
            status, info = http("GET", f"{w.url}/v1/cluster-info")
            assert status == 200 and info["clusterAddrTable"] == {"c1": ["broker-x"]}
        x.counter += 1
        await _register(x_a2, x)
        assert _route_addrs(b1, "TB1") == {"broker-y": y.addr}

        client = await _client(cluster)
        try:
            assert client.get_node_from_key(Keys(ns_a).prefix).port != master_a.port
            assert client.get_node_from_key(Keys(ns_b).prefix).port == master_b.port
            # Presence keys of A's workers live on the promoted master.
            workers_a = [k async for k in client.scan_iter(
                match=f"{Keys(ns_a).prefix}:idx:worker:*")]
            assert len(workers_a) == 2
            assert await orphans(client, Keys(ns_a)) == []
            assert await orphans(client, Keys(ns_b)) == []
        finally:
            await client.aclose()
    finally:
        for conn in conns:
            await conn.close()
        for w in workers.values():
            if w.process is not None and w.process.poll() is None:
                w.stop()


def test_a_worker_waits_for_an_unreachable_cluster(tmp_path: Path) -> None:
    env = {"NSFLEET_REDIS_URL": f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}",
           "NSFLEET_DRAIN_TIMEOUT": "1"}
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        with pytest.raises(TimeoutError):  # never ready
            worker.start(timeout=3)
        _until("/livez answers", lambda: http("GET", f"{worker.url}/livez")[0] == 200)
        _until("the worker waits", lambda: "waiting for redis" in worker.log_path.read_text())
        assert worker.process is not None and worker.process.poll() is None
        status, body = http("GET", f"{worker.url}/readyz")
        assert status == 503 and "scripts not loaded" in body["error"]
    finally:
        assert worker.stop() == 0
