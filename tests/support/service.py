"""A NameServer over a RouteStore, as a worker assembles it (cache following the change feed,
config read), for tests that drive the service layer without a worker process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from nsfleet.metrics import Metrics
from nsfleet.service.nameserver import NameServer
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.service.route_cache import RouteCache
from nsfleet.store import RouteStore


@contextlib.asynccontextmanager
async def running_nameserver(store: RouteStore) -> AsyncIterator[NameServer]:
    metrics = Metrics()
    cache = RouteCache(store, metrics)
    await cache.start()
    config = NamesrvConfig(store)
    await config.refresh()
    try:
        yield NameServer(store, cache, config, metrics)
    finally:
        await cache.close()
