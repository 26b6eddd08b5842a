"""Per-worker route cache, invalidated by the change feed the Lua scripts publish on P:changes.

Hot route reads then cost no Redis round trip (the Python Redis client, not Redis, is the
bottleneck of an uncached read).

Coherent by construction: every invalidation the feed delivers advances a sequence number, and a
fill (a Redis read) stores its answer only when no invalidation of its topic, and no whole-cache
invalidation, was applied since the fill started. A change announced while a read is in flight
can therefore never leave the answer from before it cached, whichever came first on the wire.

An entry also expires when the first member it lists reaches its deadline, since TTL expiry
publishes nothing. Without a live subscription nothing is cached, so a
lost pub/sub connection can never serve a stale route. Long-polls wait on the same feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import msgspec
import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.metrics import Metrics
from nsfleet.store import RouteRead, RouteStore
from nsfleet.store.change_feed import Change

log = structlog.get_logger(__name__)
SYNC_TIMEOUT = 0.5


class Entry(msgspec.Struct, gc=False):
    """A cached answer. Not tracked by the garbage collector (nor is what it holds, but for the
    route's two lists): a full collection's pause grows with what it tracks, and a cache holds up
    to ``max_entries`` of these (see nsfleet.domain.model)."""

    read: RouteRead | None
    expires: float
    # Encoded answers memoised by the front ends: variant -> encoding -> bytes.
    encoded: dict[str, dict[str, bytes]] = msgspec.field(default_factory=dict)


@dataclass(slots=True)
class _Fill:
    """A Redis read in flight, which concurrent misses of the same key may share."""

    started: int  # RouteCache._seq when it started
    future: asyncio.Future[Entry]


def _retrieve(fut: asyncio.Future[Entry]) -> None:
    """A failed fill nobody else waited for is not an unretrieved-exception warning."""
    if not fut.cancelled():
        fut.exception()


class RouteCache:
    def __init__(self, store: RouteStore, metrics: Metrics, *, enabled: bool = True,
                 max_entries: int = 100_000, max_age: float = 60.0) -> None:
        self.store = store
        self.metrics = metrics
        self._hits = metrics.tally(metrics.route_cache, "hit")
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
        self._watchers: dict[str, set[asyncio.Future[None]]] = {}
        self._seq = 0  # invalidations applied so far
        self._cleared_at = 0  # _seq of the last whole-cache invalidation
        self._fills = 0  # Redis reads in flight
        self._changed_at: dict[str, int] = {}  # topic -> _seq of its last invalidation,
        # kept only while fills are in flight (they are the only ones who ask)
        self._filling: dict[tuple[str, bool], _Fill] = {}
        self._any_change: set[asyncio.Future[None]] = set()  # woken by every change message
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
                self._invalidate_all()
            if not self._closing:
                await asyncio.sleep(1.0)

    def _apply(self, change: Change) -> None:
        if change.sync_token is None:
            self._wake(self._any_change)
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
            self._invalidate_all()
            return
        for topic in change.topics:
            self.invalidate(topic)

    def invalidate(self, topic: str) -> None:
        """The topic's route may have changed: drop it, keep fills in flight from storing what
        they read before, wake its watchers."""
        self._seq += 1
        if self._fills:
            self._changed_at[topic] = self._seq
        self._entries.pop((topic, False), None)
        self._entries.pop((topic, True), None)
        for fut in self._watchers.get(topic, ()):
            if not fut.done():
                fut.set_result(None)

    def _invalidate_all(self) -> None:
        """Anything may have changed (the feed broke or lagged): drop every route, and have the
        NamesrvConfig read again, since a config announcement may have been missed too."""
        self._seq += 1
        self._cleared_at = self._seq
        self._entries.clear()
        for event in self.on_config_change:
            event.set()
        self.wake_watchers()

    @staticmethod
    def _wake(futures: Iterable[asyncio.Future[None]]) -> None:
        for fut in futures:
            if not fut.done():
                fut.set_result(None)

    async def wait_for_any_change(self, seconds: float) -> None:
        """Return after the next change message of any kind, or after ``seconds``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._any_change.add(fut)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await fut
        finally:
            self._any_change.discard(fut)

    def wake_watchers(self) -> None:
        """Every watcher looks again (the config changed what routes answer)."""
        for futs in self._watchers.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)

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
            self._invalidate_all()
        finally:
            self._syncs.pop(token, None)

    def peek(self, topic: str | None, *, order_conf: bool = False) -> Entry | None:
        """The topic's cached entry if it is still valid (no Redis call), else None (always for
        a name ``get`` was never asked about, None included)."""
        entry = self._entries.get((topic, order_conf))
        if entry is not None and entry.expires > time.monotonic():
            self._hits.inc()
            return entry
        return None

    def _unchanged_since(self, topic: str, seq: int) -> bool:
        """No invalidation of ``topic`` (nor of the whole cache) was applied after ``seq``."""
        return self._cleared_at <= seq and self._changed_at.get(topic, 0) <= seq

    async def get(self, topic: str, *, order_conf: bool = False) -> Entry:
        """The topic's route entry (``read`` is None when the topic has no route). Concurrent
        misses share one Redis read, unless the topic changed since that read started."""
        entry = self.peek(topic, order_conf=order_conf)
        if entry is not None:
            return entry
        key = (topic, order_conf)
        fill = self._filling.get(key)
        if fill is not None and self._unchanged_since(topic, fill.started):
            return await asyncio.shield(fill.future)
        self._misses.inc()
        fill = _Fill(self._seq, asyncio.get_running_loop().create_future())
        fill.future.add_done_callback(_retrieve)
        self._filling[key] = fill
        cacheable = self._subscribed and self.enabled
        now = time.monotonic()
        self._fills += 1
        try:
            read = await self.store.pickup_route(topic, order_conf=order_conf)
        except BaseException as exc:
            fill.future.set_exception(exc)
            raise
        finally:
            self._fills -= 1
            if self._filling.get(key) is fill:
                del self._filling[key]
        ttl = self.max_age if read is None or read.ttl_ms < 0 else min(self.max_age,
                                                                       read.ttl_ms / 1000)
        entry = Entry(read, now + ttl)
        fill.future.set_result(entry)
        if cacheable and self._subscribed and self._unchanged_since(topic, fill.started):
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        if not self._fills:
            self._changed_at.clear()
        return entry

    @contextlib.contextmanager
    def watch(self, topics: Iterable[str]) -> Iterator[asyncio.Future[None]]:
        """A future done when any of ``topics`` may have changed (or the whole cache was
        dropped) while the block runs. Enter it before reading the routes it guards, so a change
        between the read and the wait is not missed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        names = set(topics)
        for topic in names:
            self._watchers.setdefault(topic, set()).add(fut)
        try:
            yield fut
        finally:
            for topic in names:
                futs = self._watchers.get(topic)
                if futs is not None:
                    futs.discard(fut)
                    if not futs:
                        del self._watchers[topic]
