"""This worker's presence in Redis, so other workers can tell its connections from a dead
worker's: a broker registered over a connection of a worker that died without closing it (kill
-9, a lost node) must not be kept registered by that connection."""

from __future__ import annotations

import asyncio
import uuid

import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.store import RouteStore

log = structlog.get_logger(__name__)
INTERVAL = 5.0  # seconds between refreshes
TTL_MS = 20_000  # a worker silent this long counts as dead


class WorkerPresence:
    def __init__(self, store: RouteStore, worker_id: str | None = None) -> None:
        self.store = store
        self.worker_id = worker_id or uuid.uuid4().hex[:16]
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        await self.store.mark_worker_alive(self.worker_id, TTL_MS)
        self._task = asyncio.create_task(self._refresh(), name="worker-presence")

    async def _refresh(self) -> None:
        while not self._closing:
            await asyncio.sleep(INTERVAL)
            try:
                await self.store.mark_worker_alive(self.worker_id, TTL_MS)
            except NameServerError as exc:  # Redis hiccup: try again next round
                log.warning("presence refresh failed", error=exc.remark)

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            # redis-py may swallow a cancellation inside a call; the flag ends the loop then.
            await asyncio.wait({self._task}, timeout=3.0)
