"""Broker sets in the controller's tables, made through ``store.controller`` as a broker's
start-up makes them (apply an id, heartbeat, the first election, the SyncStateSet grown), for
the tests of what reads and changes them from outside (the HTTP API, nsfleet admin)."""

from __future__ import annotations

from nsfleet.domain.controller import ControllerHeartbeat, Outcome
from nsfleet.store import RouteStore

WORKER = "w"  # the worker the heartbeats came through, kept alive


def replica_address(name: str, broker_id: int) -> str:
    return f"{name}-{broker_id}:30911"  # a host name per replica: each set's are its own


async def heartbeat(store: RouteStore, cluster: str, name: str, broker_id: int,
                    timeout_ms: int = 60_000) -> None:
    await store.controller.heartbeat(ControllerHeartbeat(
        cluster, name, replica_address(name, broker_id), broker_id, 1, 100 * broker_id, 0,
        timeout_ms, 0), f"{WORKER}:1")


async def make_broker_set(store: RouteStore, name: str = "broker-a", cluster: str = "c1",
                          ids: tuple[int, ...] = (1, 2)) -> None:
    """``name`` with replicas ``ids``, all alive; the first is master, all are in sync."""
    ct = store.controller
    for i in ids:
        assert await ct.apply_broker_id(cluster, name, i,
                                        f"{replica_address(name, i)};1") == "ok"
        await heartbeat(store, cluster, name, i)
    await store.mark_worker_alive(WORKER, 600_000)
    first = await ct.elect(name, ids[0], designate=False, unclean=False)
    assert first.outcome is Outcome.ELECTED
    if len(ids) > 1:
        status, _ = await ct.alter_sync_state_set(name, ids[0], 1, 1, list(ids))
        assert status == "ok"
