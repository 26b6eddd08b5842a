"""Following the change feed the Lua scripts publish on ``P:changes``, in order: one subscription
(subscribed again after a break), every change handed on in the order Redis delivered it, and
read-your-writes for this worker's own writes (``sync``). What a change means for the cached
routes is the route cache's business; when the store went away and came back is the outage's
(``StoreOutage``): this module only tells them."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable

import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.service.outage import StoreOutage
from nsfleet.store import RouteStore
from nsfleet.store.change_feed import Change

log = structlog.get_logger(__name__)
SYNC_TIMEOUT = 0.5
RESUBSCRIBE_DELAY = 0.5  # seconds between subscription attempts while the store is away


class ChangeFollower:
    def __init__(self, store: RouteStore, outage: StoreOutage, *,
                 apply: Callable[[Change], None], out_of_sync: Callable[[], None],
                 on_lost: Callable[[], None], enabled: bool = True) -> None:
        """``apply`` gets every change but sync markers, in order; ``out_of_sync`` is called
        when a sync marker did not come back in time (changes may have been missed);
        ``on_lost`` when the subscription broke. ``enabled``: something is cached that a write
        must be synced with."""
        self.store = store
        self.outage = outage
        self.apply = apply
        self.out_of_sync = out_of_sync
        self.on_lost = on_lost
        self.enabled = enabled
        self.subscribed = False
        # P:rev as of the last change delivered (or read right after subscribing): every change
        # up to it has been handed on.
        self.rev = 0
        self.closing = False
        self._task: asyncio.Task[None] | None = None
        self._id = uuid.uuid4().hex
        self._sync_seq = 0
        self._syncs: dict[str, asyncio.Future[None]] = {}
        self._retry_now = asyncio.Event()  # the store answered: subscribe again without waiting

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="change-feed-listener")

    async def close(self) -> None:
        self.closing = True
        if self._task:
            self._task.cancel()
            # redis-py may swallow a cancellation inside a read; the closing flag ends the loop.
            await asyncio.wait({self._task}, timeout=3.0)

    def retry_now(self) -> None:
        """Subscribe again at once (the store answered), not after RESUBSCRIBE_DELAY."""
        self._retry_now.set()

    async def _listen(self) -> None:
        while not self.closing:
            try:
                async with self.store.changes.subscribe() as subscription:
                    # Subscribed first: every change after this is delivered, so the marker
                    # read next accounts for everything before it.
                    marker = await self.store.view_marker()
                    self.rev = marker.rev
                    self.outage.resume(marker)
                    self.subscribed = True
                    while not self.closing:
                        change = await subscription.next(wait=1.0)
                        if change is not None:
                            self._deliver(change)
            except asyncio.CancelledError:
                return
            except Exception as exc:  # the subscription broke, or Redis is away
                if not self.outage.lost:
                    log.warning("change feed lost", error=str(exc))
            finally:
                self.subscribed = False
                self.on_lost()
            if not self.closing:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESUBSCRIBE_DELAY):
                        await self._retry_now.wait()
                self._retry_now.clear()
                self.outage.check_bound()

    def _deliver(self, change: Change) -> None:
        self.rev = max(self.rev, change.rev)
        self.outage.changed(change.rev)
        if change.sync_token is None:
            self.apply(change)
            return
        fut = self._syncs.get(change.sync_token)
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def sync(self) -> None:
        """Return once this worker has applied every change published before the call.

        Called after each write this worker makes, so its next read sees that write (read your
        writes): Redis delivers one subscriber's messages in order, so once our own marker comes
        back, every earlier change message has been applied. If it does not come back in time,
        ``out_of_sync`` is called instead (the cache is dropped).
        """
        if not (self.enabled and self.subscribed):
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
            self.out_of_sync()
        finally:
            self._syncs.pop(token, None)
