"""A failed presence refresh warns while the worker serves, and says nothing at warning level
once it is leaving (a dead embedded Redis stops the worker; a warning after that fatal line
would read as a second problem)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from nsfleet.domain.errors import NameServerError
from nsfleet.service import presence
from nsfleet.service.presence import WorkerPresence


class _GoneStore:
    """A store whose Redis is away after the first mark."""

    redis: Any = None
    keys: Any = None

    def __init__(self) -> None:
        self.marks = 0
        self.failed_twice = asyncio.Event()

    async def mark_worker_alive(self, worker: str, ttl_ms: int) -> None:
        self.marks += 1
        if self.marks > 2:
            self.failed_twice.set()
        if self.marks > 1:
            raise NameServerError("Redis unavailable")


async def _refresh_failures(withdrawn: bool) -> list[str]:
    store = _GoneStore()
    worker = WorkerPresence(store)  # type: ignore[arg-type]
    with capture_logs() as logs:
        await worker.start()
        if withdrawn:
            await worker.withdraw()
        await asyncio.wait_for(store.failed_twice.wait(), 5)
        await worker.close()
    return [e["log_level"] for e in logs if e["event"] == "presence refresh failed"]


@pytest.mark.parametrize(("withdrawn", "level"), [(False, "warning"), (True, "debug")])
def test_a_leaving_worker_does_not_warn(withdrawn: bool, level: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(presence, "INTERVAL", 0.01)
    levels = asyncio.run(_refresh_failures(withdrawn))
    assert levels and set(levels) == {level}
