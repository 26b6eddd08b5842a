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

Store outages (docs/reliability.md, "Redis away"): when the feed breaks, the entries are kept as
the worker's *last coherent view*, served marked stale (``stale_age``) for ``stale_serve_max``
seconds at most, whatever their members' deadlines (the store that would tell of a heartbeat is
away: Eureka's self-preservation). Nothing read meanwhile is stored. When the feed is back, the
view is kept only if the store proves it missed no change: the same Redis process (``run_id``)
and the same change counter (``P:rev``) as the last change the feed delivered; otherwise every
entry is dropped. Reads wait (briefly) while the worker replays what brokers sent it during the
outage (``on_store_back``), so its own routes never miss a broker that kept heartbeating.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar, cast

import msgspec
import structlog

from nsfleet.domain.errors import NameServerError, StoreUnavailable
from nsfleet.metrics import Metrics
from nsfleet.service.outage import OutageClock
from nsfleet.store import RouteRead, RouteStore, ViewMarker
from nsfleet.store.change_feed import Change

log = structlog.get_logger(__name__)
T = TypeVar("T")
SYNC_TIMEOUT = 0.5
STALE_MISS_TIMEOUT = 1.0  # a miss while the view is stale tries Redis this long, then fails fast
RESUME_READ_WAIT = 1.0  # reads wait at most this long for the replay that follows an outage,
# so a miss that then goes to Redis (STALE_MISS_TIMEOUT at most) still answers within the 3 s
# a RocketMQ client gives a route request
RESUBSCRIBE_DELAY = 0.5  # seconds between subscription attempts while the store is away


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
                 stale_serve_max: float = 120.0) -> None:
        self.store = store
        self.metrics = metrics
        self._hits = metrics.tally(metrics.route_cache, "hit")
        self._misses = metrics.route_cache.labels("miss")
        self._stale_hits = metrics.stale_answers.labels("route")
        self.enabled = enabled
        self.max_entries = max_entries
        self.max_age = max_age
        self.stale_serve_max = stale_serve_max  # 0: drop the view when the feed breaks
        self.outage = OutageClock()
        metrics.stale_age = self.stale_age
        self._view: ViewMarker | None = None  # the store and P:rev the entries are coherent with
        self._resumed: asyncio.Event = asyncio.Event()  # cleared while an outage's replay runs
        self._resumed.set()
        # Run once the store is back, before reads go on (NameServer's replay of what brokers
        # sent during the outage).
        self.on_store_back: list[Callable[[], Awaitable[None]]] = []
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
        self._lost_at: float | None = None  # monotonic: the feed was lost (not back yet)
        self._stale_view = False  # the entries are the last coherent view, served stale
        self._background: set[asyncio.Task[None]] = set()
        self._retry_now = asyncio.Event()  # the store answered: subscribe again without waiting
        # The last answer of each non-route read (cluster info, topic lists) with the number of
        # change messages applied when it was read; dropped at the next change message.
        self._last_answers: dict[str, object] = {}
        self._announced = 0  # change messages applied (of any kind but sync markers)
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
                    # Subscribed first: every change after this is delivered, so the marker
                    # read next accounts for everything before it.
                    self._resume(await self.store.view_marker())
                    self._subscribed = True
                    while not self._closing:
                        change = await subscription.next(wait=1.0)
                        if change is not None:
                            self._apply(change)
            except asyncio.CancelledError:
                return
            except Exception as exc:  # the subscription broke, or Redis is away
                if self._lost_at is None:
                    log.warning("change feed lost", error=str(exc))
            finally:
                self._subscribed = False
                self._feed_lost()
            if not self._closing:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESUBSCRIBE_DELAY):
                        await self._retry_now.wait()
                self._retry_now.clear()
                self._check_stale_bound()

    def _feed_lost(self) -> None:
        """Messages may be missed from now on. Keep the entries as the last coherent view
        (served stale, bounded), or drop them when stale serving is off."""
        self._store_lost()

    def _store_lost(self) -> None:
        """The feed broke, or a Redis call found the store away (often before the feed
        notices): what the cache holds is the last coherent view."""
        if self._closing or self._lost_at is not None:
            return
        self._lost_at = time.monotonic()
        self.outage.began()
        if not (self.enabled and self.stale_serve_max > 0 and self._view is not None
                and self._entries):
            self._view = None
            self._invalidate_all()
            return
        # No read started before this may store what it read: it cannot be proven current.
        self._seq += 1
        self._cleared_at = self._seq
        self._stale_view = True
        log.warning("serving a stale view while the store is away", routes=len(self._entries),
                    at_most_s=self.stale_serve_max)

    def _check_stale_bound(self) -> None:
        if self._stale_view and self._lost_at is not None and (
                time.monotonic() - self._lost_at > self.stale_serve_max):
            self._end_stale_view(f"older than stale-serve-max ({self.stale_serve_max:g} s)")

    def _end_stale_view(self, why: str) -> None:
        self._stale_view = False
        self._view = None
        self._invalidate_all()
        log.warning("stopped serving the stale view", reason=why)

    def store_answered(self) -> None:
        """A Redis call just succeeded while the feed is lost: the store is back. The stale
        view is served no more; reads wait (briefly) for the feed and the replay, and the
        listener tries again at once."""
        if self._lost_at is None or not self._resumed.is_set():
            return
        if self._subscribed:
            # The feed never broke (a subscription raises on any gap): no change was missed,
            # and the view is current again as it is.
            self._lost_at = None
            self._stale_view = False
            self.outage.ended()
            log.warning("store back", view_kept=True, feed_intact=True)
            return
        if self._stale_view:
            self._end_stale_view("the store answered again")
        self._hold_reads()
        self._retry_now.set()

    def _hold_reads(self) -> None:
        self._resumed.clear()
        # Never longer than RESUME_READ_WAIT, whatever happens to the feed and the replay.
        asyncio.get_running_loop().call_later(RESUME_READ_WAIT, self._resumed.set)

    def _resume(self, marker: ViewMarker) -> None:
        """The feed is live again. The view stays only when the store proves it missed no
        change: the same Redis process and the same change counter as the last change the feed
        delivered (a restart, a promoted replica or another worker's write moves one of them)."""
        kept = self._lost_at is not None and self._stale_view and marker == self._view
        if self._stale_view and not kept:
            self._end_stale_view("the store changed while it was away" if self._view
                                 else "the view was lost")
        elif not kept:
            self._invalidate_all()
        else:  # a config change announces itself but moves no counter: read it again
            self._stale_view = False
            for event in self.on_config_change:
                event.set()
        self._view = marker
        if self._lost_at is None:
            self._resumed.set()
            return
        away = time.monotonic() - self._lost_at
        self._lost_at = None
        self.outage.ended()
        log.warning("store back", away_s=round(away, 1), view_kept=kept)
        if not self.on_store_back:
            self._resumed.set()
            return
        self._hold_reads()
        task = asyncio.create_task(self._after_store_back(), name="store-back")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_store_back(self) -> None:
        try:
            for hook in self.on_store_back:
                try:
                    await hook()
                except Exception as exc:  # the next outage's end tries again
                    log.warning("after the store came back", error=str(exc))
        finally:
            self._resumed.set()

    def _apply(self, change: Change) -> None:
        if change.rev and self._view is not None and change.rev > self._view.rev:
            self._view = ViewMarker(self._view.server, change.rev)
        if change.sync_token is None:
            self._wake(self._any_change)
            self._announced += 1
            self._last_answers.clear()
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
        self._announced += 1
        self._last_answers.clear()
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
        a name ``get`` was never asked about, None included). While the store is away, the
        entry of the last coherent view (see ``stale_age``)."""
        entry = self._entries.get((topic, order_conf))
        if entry is None:
            return None
        if self._stale_view:
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
        lost_at = self._lost_at
        if lost_at is None:
            return None
        if time.monotonic() - lost_at > self.stale_serve_max:
            self._end_stale_view(f"older than stale-serve-max ({self.stale_serve_max:g} s)")
            return None
        self._stale_hits.inc()
        return entry

    def _stale_entry(self, key: tuple[str, bool]) -> Entry | None:
        entry = self._entries.get(key)
        return self._peek_stale(entry) if entry is not None and self._stale_view else None

    def stale_age(self) -> float | None:
        """Seconds since the view stopped being coherent, while it is served stale; else
        None."""
        if not self._stale_view or self._lost_at is None:
            return None
        age = time.monotonic() - self._lost_at
        return age if age <= self.stale_serve_max else None

    @property
    def stale_routes(self) -> int:
        """Routes the stale view can answer (0 when the view is coherent)."""
        return len(self._entries) if self.stale_age() is not None else 0

    def _unchanged_since(self, topic: str, seq: int) -> bool:
        """No invalidation of ``topic`` (nor of the whole cache) was applied after ``seq``."""
        return self._cleared_at <= seq and self._changed_at.get(topic, 0) <= seq

    async def get(self, topic: str, *, order_conf: bool = False) -> Entry:
        """The topic's route entry (``read`` is None when the topic has no route). Concurrent
        misses share one Redis read, unless the topic changed since that read started."""
        entry = self.peek(topic, order_conf=order_conf)
        if entry is not None:
            return entry
        if not self._resumed.is_set():  # the store is back: let the replay land first
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RESUME_READ_WAIT):
                    await self._resumed.wait()
        key = (topic, order_conf)
        fill = self._filling.get(key)
        if fill is not None and self._unchanged_since(topic, fill.started):
            return await asyncio.shield(fill.future)
        self._misses.inc()
        fill = _Fill(self._seq, asyncio.get_running_loop().create_future())
        fill.future.add_done_callback(_retrieve)
        self._filling[key] = fill
        cacheable = self._subscribed and self.enabled and self._lost_at is None
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
        if (cacheable and self._subscribed and self._lost_at is None
                and self._unchanged_since(topic, fill.started)):
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        if not self._fills:
            self._changed_at.clear()
        return entry

    async def _read(self, topic: str, order_conf: bool) -> RouteRead | None:
        if self._lost_at is None:
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
        announced, coherent = self._announced, self._subscribed and not self._stale_view
        try:
            if self._lost_at is None:
                value = await read()
            else:
                async with asyncio.timeout(STALE_MISS_TIMEOUT):
                    value = await read()
                self.store_answered()
        except (StoreUnavailable, TimeoutError) as exc:
            self._store_lost()
            last = self._last_answers.get(key)
            if last is None or self.stale_age() is None:
                if isinstance(exc, TimeoutError):
                    raise StoreUnavailable(f"no answer within {STALE_MISS_TIMEOUT:g} s") from None
                raise
            self.metrics.stale_answers.labels(kind).inc()
            return cast(T, last)
        if coherent and self._subscribed and announced == self._announced:
            self._last_answers[key] = value
        return value

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
