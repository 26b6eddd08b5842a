"""Waiting for changes: a route long-poll (one topic or many, answered as soon as an ETag
differs), and the console's wait on the fleet's change counter. Woken by the change feed through
the route cache's watchers, and at the deadline of a listed broker."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from nsfleet.domain import validation
from nsfleet.domain.errors import TopicRouteNotFound
from nsfleet.service.context import ServiceContext, ServicePart
from nsfleet.service.route_reads import ABSENT_ETAG, RouteAnswer, RouteReads


class LongPolls(ServicePart):
    def __init__(self, ctx: ServiceContext, reads: RouteReads) -> None:
        super().__init__(ctx)
        self._reads = reads

    async def route_change(self, topic: str, etag: str | None, wait: float,
                           stopping: Callable[[], bool]) -> RouteAnswer | None:
        """Long-poll one topic: its answer (None: no route) once its ETag differs from
        ``etag``, or the unchanged answer after ``wait`` seconds or when ``stopping()``."""
        validation.route_topic(topic)
        changed = await self.watch_routes({topic: etag}, wait, stopping)
        if topic in changed:
            return changed[topic]
        try:
            return await self._reads.route(topic)
        except TopicRouteNotFound:
            return None

    async def watch_routes(self, known: dict[str, str | None], wait: float,
                           stopping: Callable[[], bool]) -> dict[str, RouteAnswer | None]:
        """Long-poll many topics at once: the topics whose ETag differs from the one given
        (ABSENT_ETAG, "0", for "no route"), with their answers (None: no route now), as soon
        as there is one; {} when none changed within ``wait`` seconds or ``stopping()`` turned
        true. Woken by the change feed, and at the deadline of a listed broker (a route changes
        shape then without any announcement)."""
        for topic in known:
            validation.route_topic(topic)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            with self._cache.watchers.watch(known) as woken:
                changed: dict[str, RouteAnswer | None] = {}
                wake_at = deadline
                for topic, etag in known.items():
                    try:
                        answer: RouteAnswer | None = await self._reads.route(topic)
                    except TopicRouteNotFound:
                        answer = None
                    if (answer.etag if answer else ABSENT_ETAG) != etag:
                        changed[topic] = answer
                    elif answer is not None:
                        wake_at = min(wake_at, loop.time() + answer.expires - time.monotonic())
                remaining = deadline - loop.time()
                if changed or remaining <= 0 or stopping():
                    return changed
                # Wake at the earliest deadline, and at least every second to notice a drain.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, min(wake_at - loop.time(), 1.0))):
                        await woken

    async def fleet_changes(self, since: int, wait: float) -> int:
        """Long-poll the fleet's change counter: its value once it differs from ``since``, or
        after ``wait`` seconds (a deadline passing moves no counter: pollers also refresh on a
        timer)."""
        current = await self._store.rev()
        if current != since or wait <= 0:
            return current
        await self._cache.watchers.wait_for_any_change(wait)
        return await self._store.rev()
