"""What every part of the service shares: the route store, this worker's route cache, the
fleet's NamesrvConfig, the metrics and the change history; and the one way to write (read your
writes)."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from nsfleet.metrics import Metrics
from nsfleet.service.history import ChangeRecorder
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.service.route_cache import RouteCache
from nsfleet.store import RouteStore

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ServiceContext:
    store: RouteStore
    cache: RouteCache
    config: NamesrvConfig
    metrics: Metrics
    history: ChangeRecorder


class ServicePart:
    """A part of the NameServer (registrations, route reads, long-polls, administration)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._store = ctx.store
        self._cache = ctx.cache
        self.config = ctx.config
        self.metrics = ctx.metrics
        self.history = ctx.history

    async def _written(self, write: Awaitable[T]) -> T:
        """Run a write, then wait until this worker's cache has applied every change it
        published, so the next read here sees the write (read your writes)."""
        result = await write
        await self._synced()
        return result

    async def _synced(self) -> None:
        """After a write that succeeded: until this worker's cache has applied every change it
        published."""
        self._cache.store_answered()
        await self._cache.feed.sync()
