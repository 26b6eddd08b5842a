"""Who waits for routes to change: route long-polls (``GET /v1/routes/{topic}?wait``, ``POST
/v1/routes/watch``) and waits for any change message (the console's change history). The route
cache wakes them as it applies the change feed; nothing here reads Redis."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator


def _wake(futures: Iterable[asyncio.Future[None]]) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_result(None)


class Watchers:
    def __init__(self) -> None:
        self._by_topic: dict[str, set[asyncio.Future[None]]] = {}
        self._any_change: set[asyncio.Future[None]] = set()

    def topics_changed(self, topics: Iterable[str]) -> None:
        if self._by_topic:
            for topic in topics:
                _wake(self._by_topic.get(topic, ()))

    def wake_all(self) -> None:
        """Every route watcher looks again (the whole cache was dropped, or the config changed
        what routes answer)."""
        for futs in self._by_topic.values():
            _wake(futs)

    def any_change(self) -> None:
        """A change message of any kind was applied."""
        _wake(self._any_change)

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

    @contextlib.contextmanager
    def watch(self, topics: Iterable[str]) -> Iterator[asyncio.Future[None]]:
        """A future done when any of ``topics`` may have changed (or the whole cache was
        dropped) while the block runs. Enter it before reading the routes it guards, so a change
        between the read and the wait is not missed."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        names = set(topics)
        for topic in names:
            self._by_topic.setdefault(topic, set()).add(fut)
        try:
            yield fut
        finally:
            for topic in names:
                futs = self._by_topic.get(topic)
                if futs is not None:
                    futs.discard(fut)
                    if not futs:
                        del self._by_topic[topic]
