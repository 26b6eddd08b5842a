"""RouteClient: topic routes with a local cache, as a RocketMQ producer or consumer keeps them.

* ``get_route`` answers from the cache while the entry is younger than ``poll_interval``
  (Java's ``pollNameServerInterval``, 30 s); an older entry is revalidated with
  ``If-None-Match`` (the worker answers 304 when the topic's change counter is unchanged).
* ``start()`` keeps the cache fresh: with a fleet that offers ``POST /v1/routes/watch`` it
  long-polls every cached topic at once and applies each change as it comes (``watch`` is the
  same as an async iterator); otherwise it runs Java's scheduled refresh, every
  ``poll_interval`` revalidating every cached topic.
* a worker that fails (connection error, timeout, 5xx) is left for the next one in the list.
  When none answers, a cached route is still served, as a Java client keeps its last route.
* unknown topic: :class:`TopicNotFound`; with ``use_default_topic=True`` (the producer's path)
  TBW102's route with each QueueData capped at ``min(default_topic_queue_nums, readQueueNums)``
  is cached for the topic instead, until a refresh finds the topic's own route.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import aiohttp

from nsfleet.client.http import ApiError, FleetHttp, FleetUnavailable, path
from nsfleet.client.queues import (
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_QUEUE_NUMS,
    MessageQueue,
    TopicPublishInfo,
    default_topic_route,
    publish_info,
    subscribe_queues,
)
from nsfleet.domain.model import TopicRouteData

log = logging.getLogger(__name__)

POLL_INTERVAL = 30.0  # ClientConfig.pollNameServerInterval
REQUEST_TIMEOUT = 3.0  # ClientConfig.mqClientApiTimeout
ABSENT_ETAG = '"0"'  # the worker's ETag for a topic without a route


class TopicNotFound(LookupError):
    """The fleet has no route for the topic (TOPIC_NOT_EXIST)."""


class WatchUnsupported(Exception):
    """The fleet has no multi-topic watch (an older nsfleet): poll instead."""


@dataclass(slots=True)
class CachedRoute:
    route: TopicRouteData
    etag: str | None
    fetched: float  # time.monotonic()
    from_default_topic: bool = False


@dataclass(slots=True)
class RouteStats:
    fetches: int = 0  # requests that got a route (200)
    not_modified: int = 0  # revalidations answered 304
    cache_hits: int = 0
    errors: int = 0  # refreshes where no worker answered


class RouteClient:
    def __init__(self, servers: str | Sequence[str], *, poll_interval: float = POLL_INTERVAL,
                 request_timeout: float = REQUEST_TIMEOUT, default_topic: str = DEFAULT_TOPIC,
                 default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
                 session: aiohttp.ClientSession | None = None, shuffle: bool = False,
                 token: str | None = None) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be > 0")
        self.poll_interval = poll_interval
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self.http = FleetHttp(servers, timeout=request_timeout, session=session, shuffle=shuffle,
                              token=token)
        self._cache: dict[str, CachedRoute] = {}
        self._task: asyncio.Task[None] | None = None
        self._watch_supported: bool | None = None  # unknown until the first attempt
        self._topics_added = asyncio.Event()
        self.stats = RouteStats()

    @property
    def failovers(self) -> int:
        return self.http.failovers

    @property
    def topics(self) -> list[str]:
        return sorted(self._cache)

    def cached(self, topic: str) -> CachedRoute | None:
        return self._cache.get(topic)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> RouteClient:
        if self._task is None:
            self._task = asyncio.create_task(self._poll(), name="route-client-poll")
        return self

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.http.close()

    async def __aenter__(self) -> RouteClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _poll(self) -> None:
        while True:
            if self._watch_supported is not False:
                if not self._cache:  # nothing to watch yet
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.poll_interval):
                            await self._topics_added.wait()
                    continue
                try:
                    await self._watch_until_topics_added()
                    continue
                except WatchUnsupported:
                    self._watch_supported = False
                except FleetUnavailable as exc:
                    log.warning("route watch failed: %s", exc)
            await asyncio.sleep(self.poll_interval)
            await self.refresh_all()

    async def _watch_until_topics_added(self) -> None:
        """One watch of every cached topic, restarted early when a topic joins the cache."""
        self._topics_added.clear()
        watch = asyncio.ensure_future(self._watch_once(list(self._cache), self.poll_interval))
        added = asyncio.ensure_future(self._topics_added.wait())
        try:
            await asyncio.wait({watch, added}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            added.cancel()
            if not watch.done():
                watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch

    async def watch(self, topics: Sequence[str], *, wait: float = POLL_INTERVAL
                    ) -> AsyncIterator[tuple[str, TopicRouteData | None]]:
        """Every change of ``topics``' routes as (topic, route, or None once it has none), from
        one long-poll for all of them at a time; the cache follows. Raises WatchUnsupported
        when the fleet has no watch, FleetUnavailable when no worker answers."""
        while True:
            for change in await self._watch_once(topics, wait):
                yield change

    async def _watch_once(self, topics: Sequence[str],
                          wait: float) -> list[tuple[str, TopicRouteData | None]]:
        """One long-poll: the changes it reported, applied to the cache."""
        held = {}
        for topic in topics:
            entry = self._cache.get(topic)
            held[topic] = (ABSENT_ETAG.strip('"') if entry is None or entry.from_default_topic
                           else (entry.etag or "").strip('W/"') or None)
        try:
            reply = await self.http.request(
                "POST", path("v1", "routes", "watch"), json_body={"topics": held},
                params={"wait": f"{wait:g}"}, accept=(200, 304),
                attempt_timeout=wait + self.http.timeout)
        except ApiError as exc:
            if exc.status in (404, 405):
                raise WatchUnsupported(str(exc)) from None
            raise
        self._watch_supported = True
        if reply.status == 304:
            return []
        now = time.monotonic()
        changes: list[tuple[str, TopicRouteData | None]] = []
        for topic, item in (reply.json() or {}).get("routes", {}).items():
            route = None
            if item.get("route") is not None:
                route = TopicRouteData.from_dict(item["route"])
                self._cache[topic] = CachedRoute(route, f'"{item["etag"]}"', now)
                self.stats.fetches += 1
            else:
                entry = self._cache.get(topic)
                if entry is None or not entry.from_default_topic:
                    self._cache.pop(topic, None)
            changes.append((topic, route))
        return changes

    # --- routes ------------------------------------------------------------------------------

    async def get_route(self, topic: str, *, use_default_topic: bool = False,
                        refresh: bool = False) -> TopicRouteData:
        entry = self._cache.get(topic)
        if entry is not None and not refresh \
                and time.monotonic() - entry.fetched < self.poll_interval:
            self.stats.cache_hits += 1
            return entry.route
        entry = await self._refresh(topic, use_default_topic=use_default_topic)
        return entry.route

    async def refresh_all(self) -> None:
        """Revalidate every cached topic now (Java's updateTopicRouteInfoFromNameServer)."""
        for topic in list(self._cache):
            try:
                await self._refresh(topic)
            except TopicNotFound:
                pass  # dropped from the cache by _refresh
            except Exception as exc:  # keep polling the other topics
                log.warning("route refresh of %s failed: %s", topic, exc)

    async def _refresh(self, topic: str, *, use_default_topic: bool = False) -> CachedRoute:
        entry = self._cache.get(topic)
        headers = {}
        if entry is not None:
            # A fallback entry holds TBW102's route: ask whether the topic still has none.
            etag = ABSENT_ETAG if entry.from_default_topic else entry.etag
            if etag:
                headers["If-None-Match"] = etag
        try:
            reply = await self.http.request("GET", path("v1", "routes", topic), headers=headers,
                                            accept=(200, 304, 404))
        except FleetUnavailable:
            self.stats.errors += 1
            if entry is None:
                raise
            log.warning("no worker answered for %s; keeping the cached route", topic)
            return entry
        now = time.monotonic()
        if reply.status == 304 and entry is not None:
            self.stats.not_modified += 1
            entry.fetched = now
            return entry
        if reply.status == 200:
            self.stats.fetches += 1
            new = CachedRoute(TopicRouteData.from_dict(reply.json()),
                              reply.headers.get("ETag"), now)
            if topic not in self._cache:
                self._topics_added.set()
            self._cache[topic] = new
            return new
        if entry is not None and entry.from_default_topic:
            entry.fetched = now  # still unknown: keep producing through TBW102's queues
            return entry
        self._cache.pop(topic, None)  # deleted on the fleet
        if use_default_topic and topic != self.default_topic:
            return await self._default_route(topic)
        raise TopicNotFound(f"No topic route info in name server for the topic: {topic}")

    async def _default_route(self, topic: str) -> CachedRoute:
        try:
            reply = await self.http.request("GET", path("v1", "routes", self.default_topic))
        except ApiError as exc:
            if exc.status == 404:
                raise TopicNotFound(f"No route for {topic}, nor for the default topic "
                                    f"{self.default_topic}") from None
            raise
        self.stats.fetches += 1
        route = default_topic_route(TopicRouteData.from_dict(reply.json()),
                                    self.default_topic_queue_nums)
        entry = CachedRoute(route, None, time.monotonic(), from_default_topic=True)
        self._cache[topic] = entry
        self._topics_added.set()
        return entry

    # --- queues ------------------------------------------------------------------------------

    async def publish_info(self, topic: str, *, use_default_topic: bool = True) -> TopicPublishInfo:
        """The producer's queue list (TBW102 fallback on by default, as in a producer)."""
        route = await self.get_route(topic, use_default_topic=use_default_topic)
        info = publish_info(topic, route)
        entry = self._cache.get(topic)
        info.from_default_topic = bool(entry and entry.from_default_topic)
        return info

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The consumer's queue set (no fallback: a consumer of an unknown topic gets nothing)."""
        return subscribe_queues(topic, await self.get_route(topic))
