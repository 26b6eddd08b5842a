"""Sentinel failover under real workers: a Redis master, one replica and three sentinels on
loopback ports; the master is killed with SIGKILL; the workers follow the promoted replica.

Redis replicates asynchronously: a write is acknowledged once the master has applied it, before
the replica has it. The test therefore kills the master once the replica has acknowledged the
master's replication offset, which is what a registration acknowledged "long enough" (more than
the replication lag, ~1 ms on a LAN) before the crash can count on; docs/reliability.md says what
can be lost inside that window.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis

from nsfleet.redis_server import RedisServer, free_port
from nsfleet.store.keys import Keys
from tests.support.outage_load import OutageLoad, missing_brokers
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

SERVICE = "mymaster"
BROKERS = 20
FAILOVER_WITHIN = 30.0  # seconds: down-after 1 s, then election and promotion


def broker(i: int) -> dict[str, Any]:
    return {"clusterName": "c1", "brokerAddr": f"10.0.1.{i}:10911", "brokerName": f"b{i}",
            "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
            "heartbeatTimeoutMillis": 600_000,
            "topicConfigTable": {f"T{i}": {}, "Shared": {}}}  # one topic alone is refused


def wait_for(check: Callable[[], Any], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            result = check()
        except (redis.RedisError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {within} s")


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer, list[int]]]:
    """(master, replica, sentinel ports), all stopped afterwards whatever happened."""
    started: list[RedisServer] = []
    try:
        master = RedisServer(tmp_path / "master").start()
        started.append(master)
        replica = RedisServer(tmp_path / "replica",
                              extra_args=["--replicaof", "127.0.0.1", str(master.port)]).start()
        started.append(replica)
        ports = []
        for n in range(3):
            port = free_port()
            conf = tmp_path / f"sentinel{n}" / "sentinel.conf"
            conf.parent.mkdir()
            conf.write_text(f"port {port}\nbind 127.0.0.1\n"
                            f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 2\n"
                            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                            f"sentinel failover-timeout {SERVICE} 5000\n")
            started.append(RedisServer(conf.parent, port=port, appendonly=False,
                                       config_file=conf, extra_args=["--sentinel"]).start())
            ports.append(port)
        # Failover needs every sentinel to know the replica and the other two sentinels.
        for port in ports:
            s = redis.Redis(port=port, decode_responses=True)
            wait_for(lambda s=s: (lambda m: int(m["num-slaves"]) == 1
                                  and int(m["num-other-sentinels"]) == 2)(
                s.sentinel_master(SERVICE)), 20.0, "sentinels discovering each other")
            s.close()
        yield master, replica, ports
    finally:
        for server in reversed(started):
            server.stop()


def _replicated(master: RedisServer, replica: RedisServer) -> bool:
    m = redis.Redis(port=master.port, decode_responses=True)
    r = redis.Redis(port=replica.port, decode_responses=True)
    try:
        offset = m.info("replication")["master_repl_offset"]
        info = r.info("replication")
        return bool(info["master_link_status"] == "up"
                    and info["slave_repl_offset"] >= offset)
    finally:
        m.close()
        r.close()


def test_workers_follow_the_promoted_replica(
        sentinel_set: tuple[RedisServer, RedisServer, list[int]], tmp_path: Path) -> None:
    master, replica, ports = sentinel_set
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    env = {"NSFLEET_REDIS_URL": f"redis+sentinel://{hosts}/{SERVICE}/0",
           "NSFLEET_NAMESPACE": "failover", "NSFLEET_DRAIN_TIMEOUT": "2"}
    workers = [WorkerProcess(env, tmp_path / f"w{i}.log") for i in range(2)]
    try:
        for w in workers:
            w.start()
        a, b = workers
        for i in range(BROKERS):
            assert http("POST", f"{workers[i % 2].url}/v1/brokers/register", broker(i))[0] == 200
        assert http("PUT", f"{a.url}/v1/kv/ns/key", {"value": "v"})[0] == 200
        assert http("GET", f"{b.url}/v1/routes/T0")[0] == 200  # b's route cache holds T0
        wait_for(lambda: _replicated(master, replica), 10.0, "replica catching up")

        assert master.process is not None
        master.process.send_signal(signal.SIGKILL)
        master.process.wait(10)

        # Each worker writes again once Sentinel has promoted the replica.
        for i, w in enumerate(workers):
            wait_for(lambda w=w, i=i: http("POST", f"{w.url}/v1/brokers/register",
                                           broker(100 + i))[0] == 200,
                     FAILOVER_WITHIN, "a write after the failover")
        promoted = redis.Redis(port=replica.port, decode_responses=True)
        assert promoted.info("replication")["role"] == "master"
        promoted.close()

        for w in workers:
            table = http("GET", f"{w.url}/v1/cluster-info")[1]["brokerAddrTable"]
            assert {f"b{i}" for i in range(BROKERS)} <= set(table), w.url
            assert http("GET", f"{w.url}/v1/kv/ns/key")[1] == {"value": "v"}
        # The route caches follow the new master's change feed: a change made through one
        # worker is seen at once through the other.
        changed = broker(0) | {"dataVersion": {"counter": 2, "timestamp": 2},
                               "topicConfigTable": {"T0": {"readQueueNums": 2,
                                                           "writeQueueNums": 2}}}
        assert http("POST", f"{a.url}/v1/brokers/register", changed)[0] == 200
        route = wait_for(lambda: http("GET", f"{b.url}/v1/routes/T0")[1], 5.0, "route")
        assert route["queueDatas"][0]["readQueueNums"] == 2

        # The old master comes back with its AOF; Sentinel turns it into a replica of the new
        # master (its copy is replaced by the new master's), and the workers never write to it.
        master.start()
        old = redis.Redis(port=master.port, decode_responses=True)
        # Sentinel waits a few publish periods (~8 s) before it reconfigures a returning master;
        # on a loaded 2-core CI machine it once took longer than 40 s.
        wait_for(lambda: old.info("replication")["role"] == "slave", 90.0, "old master demoted")
        old.close()
        assert http("POST", f"{b.url}/v1/brokers/register", broker(200))[0] == 200
        wait_for(lambda: _replicated(replica, master), 10.0, "old master catching up")
        demoted = redis.Redis(port=master.port, decode_responses=True)
        assert demoted.exists(Keys("failover").broker("c1", "10.0.1.200:10911")) == 1
        demoted.close()
    finally:
        for w in workers:
            if w.process is not None:
                w.stop()


def test_failover_under_load_fails_no_read_and_loses_no_acknowledged_registration(
        sentinel_set: tuple[RedisServer, RedisServer, list[int]], tmp_path: Path) -> None:
    """Readers on cached routes and registering brokers through a SIGKILL of the master: every
    read is answered through the failover window (from the stale view while no master is
    known), and with --min-replica-acks 1 every registration a worker acknowledged is on the
    master the sentinels name at the end. The promoted replica has no replica of its own until
    the old master comes back as one: until then writes are refused (503), never
    acknowledged."""
    master, replica, ports = sentinel_set
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    env = {"NSFLEET_REDIS_URL": f"redis+sentinel://{hosts}/{SERVICE}/0",
           "NSFLEET_NAMESPACE": "acked", "NSFLEET_DRAIN_TIMEOUT": "2",
           "NSFLEET_MIN_REPLICA_ACKS": "1", "NSFLEET_REPLICA_ACK_TIMEOUT": "1"}
    workers = [WorkerProcess(env, tmp_path / f"w{i}.log") for i in range(2)]
    acked: dict[int, int] = {}  # writer broker -> newest DataVersion counter acknowledged
    refused: list[int] = []

    def writer(k: int, n: int) -> dict[str, Any]:
        """A broker whose every registration changes its table (a new DataVersion)."""
        return broker(500 + k) | {"dataVersion": {"counter": n, "timestamp": n},
                                  "topicConfigTable": {f"W{k}": {"readQueueNums": n % 64 + 1},
                                                       "Shared": {}}}

    async def register_changes(stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            n = 1
            while not stop.is_set():
                n += 1
                for k, w in enumerate(workers):
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                        async with session.post(f"{w.url}/v1/brokers/register",
                                                json=writer(k, n)) as r:
                            if r.status == 200:
                                acked[k] = n
                            else:
                                refused.append(r.status)
                await asyncio.sleep(0.05)

    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            # A write waits for the replica: the first ones may come before it acknowledges.
            deadline = time.monotonic() + 10
            while set(await load.register_all(session)) != {200}:
                assert time.monotonic() < deadline, "registrations never acknowledged"
                await asyncio.sleep(0.2)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(load.run()),
                 asyncio.create_task(register_changes(stop))]
        await asyncio.sleep(1.5)
        load.phase = "failover"
        assert master.process is not None
        master.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(master.process.wait, 10)
        promoted = redis.Redis(port=replica.port, decode_responses=True)
        await asyncio.to_thread(wait_for, lambda: promoted.info("replication")["role"]
                                == "master", FAILOVER_WITHIN, "the replica promoted")
        promoted.close()
        await asyncio.sleep(1.0)  # reads from the new master, writes refused: no replica
        # The old master returns; Sentinel makes it a replica of the new one, and acknowledged
        # writes resume.
        await asyncio.to_thread(master.start)
        await asyncio.to_thread(
            wait_for, lambda: all(http("POST", f"{w.url}/v1/brokers/register",
                                       broker(900 + i))[0] == 200
                                  for i, w in enumerate(workers)),
            60.0, "acknowledged writes after the old master rejoined")
        load.phase = "after"
        await asyncio.sleep(2.0)
        stop.set()
        load.stop()
        await asyncio.gather(*tasks)

    try:
        for w in workers:
            w.start()
        # Built once they run: a start moves a worker whose port was taken meanwhile to others
        # (WorkerProcess.start), and a load built before kept the old ports (refused, once in CI).
        load = OutageLoad([w.url for w in workers], [w.remoting_port for w in workers],
                          timeout_ms=600_000)
        asyncio.run(scenario())
        failover = [r for r in load.reads if r.phase == "failover"]
        assert len(failover) > 100
        assert [r for r in load.reads if not r.answered] == []
        assert missing_brokers(load.reads, "failover") == []
        assert acked, "no registration was acknowledged"
        assert refused and set(refused) == {503}
        # Whichever server the sentinels name master now (on a loaded machine they may fail
        # over once more, back to the old master, which replicated every acknowledged write).
        sentinel = redis.Redis(port=ports[0], decode_responses=True)
        try:
            _, master_port = sentinel.execute_command("SENTINEL", "get-master-addr-by-name",
                                                      SERVICE)
        finally:
            sentinel.close()
        promoted = redis.Redis(port=int(master_port), decode_responses=True)
        try:
            assert promoted.info("replication")["role"] == "master"
            keys = Keys("acked")
            for k, n in acked.items():
                stored = promoted.hget(keys.broker("c1", f"10.0.1.{500 + k}:10911"),
                                       "dataVersionCounter")
                assert int(stored or 0) >= n, (k, stored, n)
        finally:
            promoted.close()
    finally:
        for w in workers:
            if w.process is not None:
                w.stop()
