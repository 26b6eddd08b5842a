"""Per-worker route cache, invalidated by the change feed the Lua scripts publish on P:changes.

Hot route reads then cost no Redis round trip (the Python Redis client, not Redis, is the
bottleneck of an uncached read).

Coherent by construction: every invalidation the feed delivers advances a sequence number, and a
fill (a Redis read) stores its answer only when no invalidation of its topic, and no whole-cache
invalidation, was applied since the fill started. A change announced while a read is in flight
can therefore never leave the answer from before it cached, whichever came first on the wire.

An entry also expires when the first member it lists reaches its deadline, since TTL expiry
publishes nothing. Without a live subscription nothing new is cached, so a lost pub/sub
connection can never make a stale route look current. Long-polls wait on the same feed.

Store outages: when the feed breaks, or a read finds the store away, the entries become the
worker's last coherent view, served stale within a bound; ``StoreOutage`` (service/outage.py)
decides when the view is entered, kept and left, and this cache asks it. Long-polls wait in
``Watchers`` (service/watchers.py), woken as changes are applied.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import msgspec
import structlog

from nsfleet.domain.errors import StoreUnavailable
from nsfleet.metrics import Metrics
from nsfleet.service.change_follower import ChangeFollower
from nsfleet.service.outage import StoreOutage
from nsfleet.service.watchers import Watchers
from nsfleet.store import RouteRead, RouteStore
from nsfleet.store.change_feed import Change

log = structlog.get_logger(__name__)
T = TypeVar("T")
STALE_MISS_TIMEOUT = 1.0  # a miss while the view is stale tries Redis this long, then fails fast


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
                 max_entries: int = 100_000, max_age: float = 60.0,
                 outage: StoreOutage | None = None) -> None:
        self.store = store
        self.metrics = metrics
        self._hits = metrics.tally(metrics.route_cache, "hit")
        self._misses = metrics.route_cache.labels("miss")
        self._stale_hits = metrics.stale_answers.labels("route")
        self.enabled = enabled
        self.max_entries = max_entries
        self.max_age = max_age
        self.outage = outage or StoreOutage(metrics)
        self.outage.attach(drop_view=self._invalidate_all, fence_fills=self._fence_fills,
                           reread_config=self._reread_config)
        self.watchers = Watchers()
        self.feed = ChangeFollower(store, self.outage, apply=self._apply,
                                   out_of_sync=self._invalidate_all, on_lost=self._feed_lost,
                                   enabled=enabled)
        self._entries: OrderedDict[tuple[str, bool], Entry] = OrderedDict()
        self._seq = 0  # invalidations applied so far
        self._cleared_at = 0  # _seq of the last whole-cache invalidation
        self._fills = 0  # Redis reads in flight
        self._changed_at: dict[str, int] = {}  # topic -> _seq of its last invalidation,
        # kept only while fills are in flight (they are the only ones who ask)
        self._filling: dict[tuple[str, bool], _Fill] = {}
        # The last answer of each non-route read (cluster info, topic lists) with the number of
        # change messages applied when it was read; dropped at the next change message.
        self._last_answers: dict[str, object] = {}
        self._announced = 0  # change messages applied (of any kind but sync markers)
        self.on_config_change: list[asyncio.Event] = []
        # Told about every broker the sweep expires (cluster, addr), on any worker.
        self.on_expired: list[Callable[[str, str], None]] = []
        # Told whenever this cache drops topics' routes (None: every route, or no read in
        # flight may keep what it read): what else keeps data by topic stays coherent with it.
        self.on_routes_changed: list[Callable[[Sequence[str] | None], None]] = []
        # The store's memo of unchanged registrations is coherent through this feed: it answers
        # only while the feed is live, and is cleared wherever this cache is (``_forget_all``).
        self._unchanged = store.unchanged_chunks
        self._unchanged.attach(live=lambda: self.feed.subscribed and not self.outage.lost)

    async def start(self) -> None:
        await self.feed.start()

    async def close(self) -> None:
        await self.feed.close()
        await self._unchanged.close()  # what it answered is written before the worker stops

    def _feed_lost(self) -> None:
        """Messages may be missed from now on."""
        self._store_lost()

    def _store_lost(self) -> None:
        """The feed broke, or a Redis call found the store away (often before the feed
        notices): messages may be missed from now on."""
        self._unchanged.clear()
        if not self.feed.closing:
            self.outage.store_lost(routes=len(self._entries) if self.enabled else 0)

    @property
    def may_keep(self) -> bool:
        """Whether what is read now may be kept: the cache is on, and every change is being
        told (the feed is live and the store not lost)."""
        return self.enabled and self.feed.subscribed and not self.outage.lost

    def _fence_fills(self) -> None:
        """No read started before this may store what it read: it cannot be proven current."""
        self._unchanged.clear()
        self._seq += 1
        self._cleared_at = self._seq
        for callback in self.on_routes_changed:
            callback(None)

    def _reread_config(self) -> None:
        for event in self.on_config_change:
            event.set()

    def store_answered(self) -> None:
        """A Redis call just succeeded (the store may be back after an outage)."""
        if self.outage.store_answered(feed_live=self.feed.subscribed):
            self.feed.retry_now()

    def _apply(self, change: Change) -> None:
        """A change message (never a sync marker: ChangeFollower answers those)."""
        # Whatever it says, registrations proven unchanged before it may be no longer.
        self._unchanged.clear()
        self.watchers.any_change()
        self._announced += 1
        self._last_answers.clear()
        if change.config:
            self._reread_config()
            return
        if change.expired:
            for cluster, addr in change.expired:
                for callback in self.on_expired:
                    callback(cluster, addr)
            return
        if change.all_routes:
            self._invalidate_all()
            return
        self.invalidate(change.topics)

    def invalidate(self, topics: Sequence[str]) -> None:
        """The routes of ``topics`` (one change message's) may have changed: drop them, keep
        fills in flight from storing what they read before, wake their watchers. In bulk: in a
        registration storm every worker is told each row's topic (600,000 names for 60 brokers
        x 10,000 topics), and a few calls per name cost each worker ~0.25 s more CPU, beside
        Redis on the same cores (bench/scale.py's storm: 0.84 / 1.46 s, now 0.59 / 1.18 s)."""
        if not topics:
            return
        self._seq += 1
        if self._fills:
            self._changed_at.update(dict.fromkeys(topics, self._seq))
        entries = self._entries
        if len(entries) < 2 * len(topics):  # fewer cached routes than the keys to try
            named = set(topics)
            for key in [key for key in entries if key[0] in named]:
                del entries[key]
        else:
            for topic in topics:
                entries.pop((topic, False), None)
                entries.pop((topic, True), None)
        self.watchers.topics_changed(topics)
        for callback in self.on_routes_changed:
            callback(topics)

    def _invalidate_all(self) -> None:
        """Anything may have changed (the feed broke or lagged): drop every route, and have the
        NamesrvConfig read again, since a config announcement may have been missed too."""
        self._fence_fills()
        self._entries.clear()
        self._announced += 1
        self._last_answers.clear()
        self._reread_config()
        self.watchers.wake_all()

    def peek(self, topic: str | None, *, order_conf: bool = False) -> Entry | None:
        """The topic's cached entry if it is still valid (no Redis call), else None (always for
        a name ``get`` was never asked about, None included). While the store is away, the
        entry of the last coherent view (see ``stale_age``)."""
        entry = self._entries.get((topic, order_conf))
        if entry is None:
            return None
        if self.outage.serving_stale:
            return self._peek_stale(entry)
        if entry.expires > time.monotonic():
            self._hits.inc()
            return entry
        return None

    def _peek_stale(self, entry: Entry) -> Entry | None:
        """An entry of the stale view, within the bound. Its members' deadlines are not applied
        (self-preservation: the store that would have recorded their heartbeats is away), so
        an entry past its deadline is served too: every change was announced and dropped its
        entries, and only a deadline, which the view suspends, could have aged it."""
        if not self.outage.may_serve_stale():
            return None
        self._stale_hits.inc()
        return entry

    def _stale_entry(self, key: tuple[str, bool]) -> Entry | None:
        entry = self._entries.get(key)
        return (self._peek_stale(entry) if entry is not None and self.outage.serving_stale
                else None)

    @property
    def stale_routes(self) -> int:
        """Routes the stale view can answer (0 when the view is coherent)."""
        return len(self._entries) if self.outage.stale_age() is not None else 0

    def _unchanged_since(self, topic: str, seq: int) -> bool:
        """No invalidation of ``topic`` (nor of the whole cache) was applied after ``seq``."""
        return self._cleared_at <= seq and self._changed_at.get(topic, 0) <= seq

    async def get(self, topic: str, *, order_conf: bool = False) -> Entry:
        """The topic's route entry (``read`` is None when the topic has no route). Concurrent
        misses share one Redis read, unless the topic changed since that read started."""
        entry = self.peek(topic, order_conf=order_conf)
        if entry is not None:
            return entry
        await self.outage.reads_may_go_on()  # after an outage: let the replay land first
        key = (topic, order_conf)
        fill = self._filling.get(key)
        if fill is not None and self._unchanged_since(topic, fill.started):
            return await asyncio.shield(fill.future)
        self._misses.inc()
        fill = _Fill(self._seq, asyncio.get_running_loop().create_future())
        fill.future.add_done_callback(_retrieve)
        self._filling[key] = fill
        cacheable = self.may_keep
        now = time.monotonic()
        self._fills += 1
        try:
            read = await self._read(topic, order_conf)
        except StoreUnavailable as exc:
            # The store is away (perhaps before the feed noticed): the view answers if it can.
            stale = self._stale_entry(key)
            if stale is None:
                fill.future.set_exception(exc)
                raise
            fill.future.set_result(stale)
            return stale
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
        if (cacheable and self.may_keep
                and self._unchanged_since(topic, fill.started)):
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        if not self._fills:
            self._changed_at.clear()
        return entry

    async def _read(self, topic: str, order_conf: bool) -> RouteRead | None:
        if not self.outage.lost:
            try:
                return await self.store.pickup_route(topic, order_conf=order_conf)
            except StoreUnavailable:
                self._store_lost()
                raise
        # The feed is lost: Redis is probably away, so a route the view cannot answer fails
        # fast instead of waiting out connection timeouts past the client's own.
        try:
            async with asyncio.timeout(STALE_MISS_TIMEOUT):
                read = await self.store.pickup_route(topic, order_conf=order_conf)
            self.store_answered()
            return read
        except TimeoutError:
            raise StoreUnavailable(f"no answer within {STALE_MISS_TIMEOUT:g} s, and this "
                                   "worker's view of the routes does not hold the topic") from None

    async def answer(self, key: str, read: Callable[[], Awaitable[T]], kind: str) -> T:
        """A non-route read (cluster info, a topic list): ``read()`` from Redis, remembered
        while no change is announced; while the store is away, the remembered answer of the
        last coherent view (counted as a stale answer of ``kind``)."""
        announced = self._announced
        coherent = self.feed.subscribed and not self.outage.serving_stale
        try:
            if not self.outage.lost:
                value = await read()
            else:
                async with asyncio.timeout(STALE_MISS_TIMEOUT):
                    value = await read()
                self.store_answered()
        except (StoreUnavailable, TimeoutError) as exc:
            self._store_lost()
            last = self._last_answers.get(key)
            if last is None or self.outage.stale_age() is None:
                if isinstance(exc, TimeoutError):
                    raise StoreUnavailable(f"no answer within {STALE_MISS_TIMEOUT:g} s") from None
                raise
            self.metrics.stale_answers.labels(kind).inc()
            return cast(T, last)
        if coherent and self.feed.subscribed and announced == self._announced:
            self._last_answers[key] = value
        return value
