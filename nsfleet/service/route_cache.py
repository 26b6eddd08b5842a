"""Per-worker route cache, invalidated by the change feed the Lua scripts publish on P:changes.

Hot route reads then cost no Redis round trip (the Python Redis client, not Redis, is the
bottleneck of an uncached read). An entry also expires when the first member it lists reaches its
deadline, since TTL expiry publishes nothing. Without a live subscription nothing is cached, so a
lost pub/sub connection can never serve a stale route. Long-polls wait on the same feed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.metrics import Metrics
from nsfleet.store import RouteRead, RouteStore
from nsfleet.store.change_feed import Change

log = structlog.get_logger(__name__)
SYNC_TIMEOUT = 0.5


@dataclass(slots=True)
class Entry:
    read: RouteRead | None
    expires: float
    # Encoded answers memoised by the front ends: variant -> encoding -> bytes.
    encoded: dict[str, dict[str, bytes]] = field(default_factory=dict)


class RouteCache:
    def __init__(self, store: RouteStore, metrics: Metrics, *, enabled: bool = True,
                 max_entries: int = 100_000, max_age: float = 60.0) -> None:
        self.store = store
        self.metrics = metrics
        self._hits = metrics.route_cache.labels("hit")
        self._misses = metrics.route_cache.labels("miss")
        self.enabled = enabled
        self.max_entries = max_entries
        self.max_age = max_age
        self._entries: OrderedDict[tuple[str, bool], Entry] = OrderedDict()
        self._subscribed = False
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._id = uuid.uuid4().hex
        self._sync_seq = 0
        self._syncs: dict[str, asyncio.Future[None]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self.on_config_change: list[asyncio.Event] = []
        # Told about every broker the sweep expires (cluster, addr), on any worker.
        self.on_expired: list[Callable[[str, str], None]] = []

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="route-cache-listener")

    async def close(self) -> None:
        self._closing = True
        if self._task:
            self._task.cancel()
            # redis-py may swallow a cancellation inside a read; the closing flag ends the loop.
            await asyncio.wait({self._task}, timeout=3.0)

    async def _listen(self) -> None:
        while not self._closing:
            try:
                async with self.store.changes.subscribe() as subscription:
                    self._subscribed = True
                    while not self._closing:
                        change = await subscription.next(wait=1.0)
                        if change is not None:
                            self._apply(change)
            except asyncio.CancelledError:
                return
            except Exception as exc:  # the subscription broke: cache nothing until it is back
                log.warning("change feed lost", error=str(exc))
            finally:
                self._subscribed = False
                self._entries.clear()
                self._wake_all()
            if not self._closing:
                await asyncio.sleep(1.0)

    def _apply(self, change: Change) -> None:
        if change.sync_token is not None:
            fut = self._syncs.get(change.sync_token)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        if change.config:
            for event in self.on_config_change:
                event.set()
            return
        if change.expired:
            for cluster, addr in change.expired:
                for callback in self.on_expired:
                    callback(cluster, addr)
            return
        if change.all_routes:
            self._entries.clear()
            self._wake_all()
            return
        for topic in change.topics:
            self._entries.pop((topic, False), None)
            self._entries.pop((topic, True), None)
            for fut in self._waiters.pop(topic, ()):
                if not fut.done():
                    fut.set_result(None)

    def _wake_all(self) -> None:
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)
        self._waiters.clear()

    async def sync(self) -> None:
        """Return once this worker has applied every change published before the call.

        Called after each write this worker makes, so its next read sees that write (read your
        writes): Redis delivers one subscriber's messages in order, so once our own marker comes
        back, every earlier change message has been applied. If it does not come back in time,
        the cache is dropped instead.
        """
        if not (self.enabled and self._subscribed):
            return  # nothing is cached, nothing can be stale
        self._sync_seq += 1
        token = f"{self._id}:{self._sync_seq}"
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._syncs[token] = fut
        try:
            await self.store.changes.publish_sync(token)
            async with asyncio.timeout(SYNC_TIMEOUT):
                await fut
        except (TimeoutError, NameServerError):
            self._entries.clear()
        finally:
            self._syncs.pop(token, None)

    def peek(self, topic: str, *, order_conf: bool = False) -> Entry | None:
        """The topic's cached entry if it is still valid (no Redis call), else None."""
        entry = self._entries.get((topic, order_conf))
        if entry is not None and entry.expires > time.monotonic():
            self._hits.inc()
            return entry
        return None

    async def get(self, topic: str, *, order_conf: bool = False) -> Entry:
        """The topic's route entry (``read`` is None when the topic has no route)."""
        entry = self.peek(topic, order_conf=order_conf)
        if entry is not None:
            return entry
        now = time.monotonic()
        key = (topic, order_conf)
        self._misses.inc()
        subscribed = self._subscribed and self.enabled
        read = await self.store.pickup_route(topic, order_conf=order_conf)
        ttl = self.max_age if read is None or read.ttl_ms < 0 else min(self.max_age,
                                                                       read.ttl_ms / 1000)
        entry = Entry(read, now + ttl)
        if subscribed and self._subscribed:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return entry

    async def wait_for_change(self, topic: str, seconds: float) -> None:
        """Return when the topic's route may have changed, or after ``seconds``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(topic, []).append(fut)
        try:
            async with asyncio.timeout(seconds):
                await fut
        except TimeoutError:
            pass
        finally:
            waiters = self._waiters.get(topic)
            if waiters and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    del self._waiters[topic]
