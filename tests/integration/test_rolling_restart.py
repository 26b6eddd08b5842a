"""A rolling restart under load: three workers, each stopped with SIGTERM (drain) and started
again on the same ports, one after the other, while brokers register over remoting to every
worker (as BrokerOuterAPI.registerBrokerAll does) and readers fetch routes over remoting and
HTTP. A reader that fails on one address retries on the next, as a RocketMQ client rotates to the
next name server address: no request of such a client may fail, and every route keeps every
broker throughout (a broker registered over the closing connections must not drop out).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from nsfleet.client.http import FleetHttp, FleetUnavailable
from nsfleet.redis_server import RedisServer
from nsfleet.store.keys import Keys
from tests.support import invariants
from tests.support.remoting_client import SUCCESS, Broker, RemotingClient, TopicConf
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

NAMESPACE = "rolling"
BROKERS = 10
SHARED = [f"S{n}" for n in range(5)]  # topics every broker serves
PERIOD = 0.5  # seconds between a broker's registrations (Java: 30 s; shorter than a restart)
ATTEMPT_TIMEOUT = 3.0


@dataclass
class Tally:
    requests: int = 0
    failed: list[str] = field(default_factory=list)
    retried: int = 0  # requests answered by another address after a failure


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": NAMESPACE,
           "NSFLEET_DRAIN_TIMEOUT": "2", "NSFLEET_SWEEP_INTERVAL": "1"}
    workers = [WorkerProcess(env, tmp_path / f"w{i}.log") for i in range(3)]
    try:
        for w in workers:
            w.start()
        yield workers
    finally:
        for w in workers:
            if w.process is not None:
                w.stop()


def make_broker(i: int) -> Broker:
    topics = [TopicConf(t, 4, 4) for t in [*SHARED, f"own{i}"]]
    return Broker("c1", f"10.0.2.{i}:10911", f"b{i}", topics=topics)


async def broker_loop(broker: Broker, ports: list[int], stop: asyncio.Event,
                      tally: Tally) -> None:
    """One connection per worker, a registration over each every PERIOD; a cycle fails when
    no worker accepted it."""
    conns: dict[int, RemotingClient] = {}
    try:
        while not stop.is_set():
            accepted = 0
            for port in ports:
                try:
                    conn = conns.get(port)
                    if conn is None or conn.closed.is_set():
                        conns[port] = conn = await RemotingClient.connect(port)
                    reply = await conn.call(broker.register_5x(), ATTEMPT_TIMEOUT)
                    accepted += reply.code == SUCCESS
                except (OSError, TimeoutError):
                    conns.pop(port, None)
            tally.requests += 1
            if not accepted:
                tally.failed.append(f"{broker.name}: no worker took the registration")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), PERIOD)
    finally:
        for conn in conns.values():
            await conn.close()


async def remoting_reader(ports: list[int], stop: asyncio.Event, tally: Tally) -> None:
    """A RocketMQ client: one connection to its current name server; on failure it rotates to
    the next address and sends the request again."""
    rotation = itertools.cycle(random.sample(ports, len(ports)))
    port, conn = next(rotation), None
    try:
        while not stop.is_set():
            topic = random.choice(SHARED)
            tally.requests += 1
            for attempt in range(len(ports)):
                try:
                    if conn is None or conn.closed.is_set():
                        conn = await RemotingClient.connect(port)
                    reply = await conn.request(105, {"topic": topic}, wait=ATTEMPT_TIMEOUT)
                except (OSError, TimeoutError):
                    if conn is not None:
                        await conn.close()
                    port, conn = next(rotation), None
                    continue
                tally.retried += attempt > 0
                if reply.code != SUCCESS:
                    tally.failed.append(f"route {topic} on {port}: code {reply.code}")
                elif len(reply.body_json()["brokerDatas"]) != BROKERS:
                    tally.failed.append(f"route {topic} on {port}: a broker is missing")
                break
            else:
                tally.failed.append(f"route {topic}: no address answered")
            await asyncio.sleep(0.01)
    finally:
        if conn is not None:
            await conn.close()


async def http_reader(urls: list[str], stop: asyncio.Event, tally: Tally) -> None:
    """FleetHttp fails over to the next worker URL on a connection error, timeout or 5xx."""
    client = FleetHttp(urls, timeout=ATTEMPT_TIMEOUT, shuffle=True)
    try:
        while not stop.is_set():
            topic = random.choice(SHARED)
            tally.requests += 1
            failovers = client.failovers
            try:
                reply = await client.request("GET", f"/v1/routes/{topic}")
            except FleetUnavailable as exc:
                tally.failed.append(f"http route {topic}: {exc}")
            else:
                tally.retried += client.failovers > failovers
                if len(reply.json()["brokerDatas"]) != BROKERS:
                    tally.failed.append(f"http route {topic}: a broker is missing")
            await asyncio.sleep(0.01)
    finally:
        await client.close()


def restart_one_by_one(workers: list[WorkerProcess]) -> list[int]:
    codes = []
    for w in workers:
        time.sleep(1.5)
        codes.append(w.stop(signal.SIGTERM))
        time.sleep(0.3)  # down for a moment: clients meet refused connections
        w.start()
    time.sleep(1.5)
    return codes


async def test_rolling_restart_fails_no_request(fleet: list[WorkerProcess],
                                                redis_server: RedisServer) -> None:
    ports = [w.remoting_port for w in fleet]
    stop = asyncio.Event()
    brokers, readers = Tally(), Tally()
    tasks = [asyncio.create_task(broker_loop(make_broker(i), ports, stop, brokers))
             for i in range(BROKERS)]
    await asyncio.sleep(2 * PERIOD)  # every broker registered before the readers start
    tasks += [asyncio.create_task(remoting_reader(ports, stop, readers)) for _ in range(4)]
    tasks += [asyncio.create_task(http_reader([w.url for w in fleet], stop, readers))
              for _ in range(2)]
    try:
        exit_codes = await asyncio.to_thread(restart_one_by_one, fleet)
    finally:
        stop.set()
        await asyncio.gather(*tasks)

    assert exit_codes == [0, 0, 0]  # each drained and exited cleanly
    assert readers.failed == [] and brokers.failed == []
    assert readers.requests > 100 and readers.retried > 0  # the restarts were met, and survived
    table = http("GET", f"{fleet[0].url}/v1/cluster-info")[1]["brokerAddrTable"]
    assert set(table) == {f"b{i}" for i in range(BROKERS)}
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        assert await invariants.orphans(client, Keys(NAMESPACE)) == []
    finally:
        await client.aclose()
