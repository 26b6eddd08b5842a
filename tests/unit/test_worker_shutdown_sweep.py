"""SIGTERM while a sweep is in flight (issue 24): the worker lets it finish instead of having
APScheduler cancel it, and a sweep cancelled anyway (past its grace period) is not logged as the
job's error, the CancelledError traceback through the Redis client seen on SIGTERM under load.
tests/integration/test_processes.py checks the log of real workers stopped under load."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis.asyncio as aioredis
import structlog

from nsfleet import logs
from nsfleet.metrics import Metrics
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore


@pytest.fixture
async def blocked_sweeper(fake_redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> Any:
    store = RouteStore(fake_redis, "t")
    await store.load_scripts()
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[bool] = []

    async def slow_sweep(**kwargs: Any) -> Any:
        started.set()
        await release.wait()  # a script call still waiting for its reply
        finished.append(True)
        raise ConnectionError("the sweep's own outcome does not matter here")

    monkeypatch.setattr(store, "sweep", slow_sweep)
    sweeper = Sweeper(store, Metrics(), interval=0.01, guard_share=0.0)
    sweeper.start()
    await asyncio.wait_for(started.wait(), 5)
    yield sweeper, release, finished
    if sweeper.scheduler.running:
        sweeper.stop()


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_sweep_in_flight_finishes_before_the_stop(
        blocked_sweeper: Any, caplog: pytest.LogCaptureFixture) -> None:
    sweeper, release, finished = blocked_sweeper
    assert sweeper.running == 1
    stopping = asyncio.create_task(sweeper.stop_gracefully())
    await asyncio.sleep(0.1)
    assert not stopping.done()  # waiting for the sweep, not cancelling it
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert finished == [True] and not sweeper.scheduler.running
    assert _errors(caplog) == []


async def test_a_sweep_past_its_grace_is_cancelled_without_a_traceback(
        blocked_sweeper: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    sweeper, _release, finished = blocked_sweeper
    saved, root = structlog.get_config(), logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    logs.configure("console", "info")
    structlog.configure(cache_logger_on_first_use=False)  # nothing cached past this test
    try:
        await sweeper.stop_gracefully(grace=0.05)
        await asyncio.sleep(0.05)  # the cancelled job reports to APScheduler
        assert finished == [] and sweeper.running == 0
        err = capsys.readouterr().err
        assert "Traceback" not in err and "CancelledError" not in err
        assert "raised an exception" not in err
        # other errors of a job still are logged
        logging.getLogger("apscheduler.executors.default").error("boom", exc_info=(
            ValueError, ValueError("x"), None))
        assert "boom" in capsys.readouterr().err
    finally:  # the suite's structlog and logging set-up back, whole
        structlog.reset_defaults()
        structlog.configure(**saved)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
