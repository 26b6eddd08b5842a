"""Two workers acting on the same failure at the same moment make one election (the issue's
fencing rule), on a real redis-server: each worker is its own RouteStore on its own
connection, and each notices the master's failure its own way (its connection closing, its
deadline passing, the scan of sets without a live master, a broker's own ELECT_MASTER). And a
worker cut off from Redis elects nothing until Redis is back."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.controller import ControllerHeartbeat, Outcome
from nsfleet.metrics import Metrics
from nsfleet.redis_server import RedisServer
from nsfleet.service.controller import Controller
from nsfleet.service.history import ChangeRecorder
from nsfleet.store import RouteStore
from nsfleet.store.controller_tables import SetHealth
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis


async def _stores(server: RedisServer, namespace: str) -> list[RouteStore]:
    out = []
    for _ in range(2):
        s = RouteStore(aioredis.Redis.from_url(server.url, decode_responses=True), namespace)
        await s.load_scripts()
        out.append(s)
    return out


def _beat(broker_id: int, timeout_ms: int) -> ControllerHeartbeat:
    return ControllerHeartbeat("C", "s", f"h:{broker_id}", broker_id, 1, 100 * broker_id, 0,
                               timeout_ms, 0)


async def _three_replicas(store: RouteStore, master_timeout_ms: int = 60_000) -> None:
    ct = store.controller
    for i in (1, 2, 3):
        assert await ct.apply_broker_id("C", "s", i, f"h:{i};1") == "ok"
        await ct.heartbeat(_beat(i, 60_000), f"w:{i}")
    assert (await ct.elect("s", 1, designate=False, unclean=False)).outcome is Outcome.ELECTED
    status, _ = await ct.alter_sync_state_set("s", 1, 1, 1, [1, 2, 3])
    assert status == "ok"
    # The master's next heartbeat brings the timeout under test (after the set is whole).
    await ct.heartbeat(_beat(1, master_timeout_ms), "w:1")


@pytest.mark.parametrize("round_", range(20))
async def test_two_workers_one_failure_one_election(redis_server: RedisServer,
                                                    round_: int) -> None:
    a, b = await _stores(redis_server, f"ctl-{uuid.uuid4().hex[:8]}")
    await _three_replicas(a)
    before = await a.controller.broker_set("s")
    assert before is not None and before.master_epoch == 1
    # Worker A sees the master's connection close; worker B's scan re-elects with the epoch it
    # read; a replica asks to be elected: all at once.
    results = await asyncio.gather(
        a.controller.inactive("s", 1, connection="w:1", unclean=False),
        b.controller.elect("s", None, designate=False, unclean=False, expected_epoch=1),
        b.controller.elect("s", 2, designate=False, unclean=False),
        a.controller.inactive("s", 1, connection="w:1", unclean=False))
    after = await a.controller.broker_set("s")
    assert after is not None
    elected = [r for r in results if r is not None and r.outcome is Outcome.ELECTED]
    # B's scan and the broker's request may each find the old master alive (STILL) when they
    # run first; whoever runs after the connection closed finds the new one alive. The master
    # changed exactly once: one epoch, one master, and that master is the best replica.
    assert after.master_epoch == 2, results
    assert after.master_id == 3, results  # the highest maxOffset among the in-sync replicas
    assert len(elected) == 1, results
    assert elected[0].master_epoch == 2
    for s in (a, b):
        await s.redis.aclose()


async def test_a_deadline_missed_while_its_worker_is_dead_waits_for_the_grace(
        redis_server: RedisServer) -> None:
    """A replica whose heartbeats came over a worker that died is finding another worker: no
    election until its deadline plus the grace (the worker's presence key is gone)."""
    (store,) = (await _stores(redis_server, f"ctl-{uuid.uuid4().hex[:8]}"))[:1]
    await _three_replicas(store, master_timeout_ms=1)
    await asyncio.sleep(0.05)
    ct = store.controller
    assert await ct.inactive("s", 1, grace_ms=60_000, unclean=False) is None  # worker w dead
    await store.mark_worker_alive("w", 10_000)  # its worker alive: the deadline counts
    moved = await ct.inactive("s", 1, grace_ms=60_000, unclean=False)
    assert moved is not None and moved.outcome is Outcome.ELECTED and moved.master_id == 3
    assert await ct.scan(10, reelect=True) == ([], [SetHealth("s", 3, 2, True, 1, True)])
    await store.redis.aclose()


async def test_no_election_while_the_store_is_away_and_one_when_it_is_back(
        redis_server: RedisServer) -> None:
    """A worker cut off from Redis elects nothing (it cannot: only the scripts elect, so no
    election is made from a stale view), and its scan elects once Redis is back."""
    namespace = f"ctl-{uuid.uuid4().hex[:8]}"
    (direct,) = (await _stores(redis_server, namespace))[:1]
    await _three_replicas(direct)
    await direct.mark_worker_alive("w", 60_000)
    proxy = TcpProxy(redis_server.port).start()
    cut_off = RouteStore(aioredis.Redis.from_url(proxy.url, decode_responses=True), namespace)
    await cut_off.load_scripts()
    metrics = Metrics()
    controller = Controller(cut_off, metrics, ChangeRecorder(cut_off.history, metrics))
    controller.options.scan_interval = 0.05
    controller.options.startup_grace = 0
    controller.start()
    try:
        proxy.cut()
        # The master falls silent while the worker cannot reach Redis.
        await direct.controller.heartbeat(_beat(1, 1), "w:1")
        await asyncio.sleep(0.5)
        during = await direct.controller.broker_set("s")
        assert during is not None and (during.master_id, during.master_epoch) == (1, 1)
        proxy.restore()
        for _ in range(100):
            after = await direct.controller.broker_set("s")
            if after is not None and after.master_id != 1:
                break
            await asyncio.sleep(0.05)
        assert after is not None and (after.master_id, after.master_epoch) == (3, 2), after
    finally:
        await controller.stop()
        proxy.stop()
        await cut_off.redis.aclose()
        await direct.redis.aclose()
