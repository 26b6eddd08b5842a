"""The controller service (nsfleet/service/controller.py) on a store: what its scan does with a
silent master, who it tells, what it reports, and what a store outage costs it."""

from __future__ import annotations

import asyncio

import pytest

from nsfleet.domain.controller import ControllerHeartbeat, Election
from nsfleet.domain.errors import ControllerRefused
from nsfleet.metrics import Metrics
from nsfleet.service.controller import Controller
from nsfleet.service.history import ChangeRecorder
from nsfleet.store import RouteStore


def _controller(store: RouteStore) -> tuple[Controller, Metrics, list[Election]]:
    metrics = Metrics()
    controller = Controller(store, metrics, ChangeRecorder(store.history, metrics))
    told: list[Election] = []
    controller.on_elected.append(told.append)
    return controller, metrics, told


async def _set_with_slave(store: RouteStore, master_timeout_ms: int) -> None:
    ct = store.controller
    for i in (1, 2):
        await ct.apply_broker_id("C", "s", i, f"h:{i};1")
        await ct.heartbeat(ControllerHeartbeat("C", "s", f"h:{i}", i, 1, 0, 0, 60_000, 0),
                           "w:1")
    await store.mark_worker_alive("w", 60_000)
    await ct.elect("s", 1, designate=False, unclean=False)
    assert (await ct.alter_sync_state_set("s", 1, 1, 1, [1, 2]))[0] == "ok"
    # The master's next heartbeat brings the timeout under test.
    await ct.heartbeat(ControllerHeartbeat("C", "s", "h:1", 1, 1, 0, 0, master_timeout_ms, 0),
                       "w:1")


async def test_a_silent_master_is_replaced_by_the_scan_and_the_replicas_told(
        store: RouteStore) -> None:
    controller, metrics, told = _controller(store)
    await _set_with_slave(store, master_timeout_ms=1)
    await asyncio.sleep(0.01)
    await controller.scan_once()
    found = await controller.replica_info("s")
    assert (found.master_id, found.master_epoch, found.sync_state_set) == (2, 2, (2,))
    assert [e.master_id for e in told] == [2]
    assert told[0].alive_addresses == ["h:2"]  # the silent master is not told
    sample = metrics.registry.get_sample_value
    assert sample("nsfleet_controller_elections_total", {"outcome": "elected"}) == 1
    assert sample("nsfleet_controller_sets_without_master") == 0
    assert sample("nsfleet_controller_sync_state_set_size", {"broker_name": "s"}) == 1
    changes = await store.history.recent(5)
    assert changes[0].action == "master elected"


async def test_a_request_to_elect_while_the_master_lives_keeps_it(store: RouteStore) -> None:
    controller, _, told = _controller(store)
    await _set_with_slave(store, master_timeout_ms=60_000)
    still = await controller.elect("s", 2, designate=False)
    assert (still.outcome, still.master_id) == ("still", 1)
    designated = await controller.elect("s", 2, designate=True)  # the admin's electMaster
    assert (designated.master_id, designated.master_epoch) == (2, 2)
    assert [e.master_id for e in told] == [2]
    with pytest.raises(ControllerRefused) as refused:
        await controller.elect("nope", 1, designate=False)
    assert refused.value.code == 2010


async def test_a_worker_just_started_expires_nobody(store: RouteStore) -> None:
    """A fleet restarted whole: brokers need a moment to heartbeat the new workers."""
    controller, _, told = _controller(store)
    await _set_with_slave(store, master_timeout_ms=1)
    await asyncio.sleep(0.01)
    controller.options.scan_interval = 0.01
    controller.start()
    await asyncio.sleep(0.1)
    await controller.stop()
    assert (await controller.replica_info("s")).master_id == 1 and told == []
    later, _, _ = _controller(store)  # a worker up for longer (never started: no grace)
    await later.scan_once()
    assert (await later.replica_info("s")).master_id == 2


async def test_the_scan_survives_a_store_outage(store: RouteStore) -> None:
    controller, _, told = _controller(store)
    await store.redis.aclose()
    controller.options.scan_interval = 0.01
    controller.start()
    await asyncio.sleep(0.05)
    assert controller._task is not None and not controller._task.done()
    await controller.stop()
    assert told == []
