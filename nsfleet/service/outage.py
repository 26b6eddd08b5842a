"""Everything a worker does about a store outage, in one place (docs/reliability.md, "Redis
away"). ``StoreOutage`` owns:

- **the clock** (``OutageClock``): when the store went away and came back, so the sweep expires
  nobody whose deadline passed while it was away before brokers have had one heartbeat to return;
- **the stale view**: when the change feed breaks, or a Redis call finds the store away (often
  before the feed notices), the route cache's entries become the worker's *last coherent view*,
  served marked stale for ``stale_serve_max`` seconds at most, whatever their members' deadlines
  (the store that would tell of a heartbeat is away: Eureka's self-preservation). Nothing read
  meanwhile is cached. When the feed is back the view is kept only if the store proves it missed
  no change: the same Redis process (``run_id``) and the same change counter (``P:rev``) as the
  last change the feed delivered; otherwise it is dropped;
- **the backlog and its replay**: registrations and heartbeats the store could not take are
  answered with an error naming the store, remembered (``BrokerBacklog``), and replayed when it is
  back, before reads go on (they wait ``RESUME_READ_WAIT`` at most), so the worker's routes never
  miss a broker that kept heartbeating.

The route cache, the NameServer and the sweeper ask it; none of them keeps outage state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import structlog

from nsfleet.domain import validation
from nsfleet.domain.errors import NameServerError, StoreUnavailable
from nsfleet.domain.model import BrokerRegistration, DataVersion
from nsfleet.metrics import Metrics
from nsfleet.service.broker_backlog import BrokerBacklog, Remembered
from nsfleet.store import RouteStore, ViewMarker

log = structlog.get_logger(__name__)
# One broker heartbeat (Java's registerNameServerPeriod, 30 s): after the store returns, brokers
# whose deadline passed while it was away get this long to heartbeat before the sweep may expire
# them.
STORE_RETURN_GRACE = 30.0
RESUME_READ_WAIT = 1.0  # reads wait at most this long for the replay that follows an outage,
# so a miss that then goes to Redis (the cache's STALE_MISS_TIMEOUT at most) still answers
# within the 3 s a RocketMQ client gives a route request

Register = Callable[[BrokerRegistration, str | None], Awaitable[object]]


class OutageClock:
    """When this worker last lost and regained the store, on the wall clock (the deadlines are
    epoch milliseconds)."""

    def __init__(self, grace: float = STORE_RETURN_GRACE) -> None:
        self.grace = grace
        self._lost_ms: int | None = None
        self._back_ms: int | None = None

    def began(self) -> None:
        now = _now_ms()
        if self._lost_ms is None or (self._back_ms is not None
                                     and now > self._back_ms + self.grace * 1000):
            self._lost_ms = now  # a new outage (one within the last one's grace extends it)
        self._back_ms = None

    def ended(self) -> None:
        if self._lost_ms is not None:
            self._back_ms = _now_ms()

    def sweep_now_ms(self) -> int | None:
        """The "now" the sweep must expire by: while the store is away and for ``grace``
        seconds after it returned, the moment it went away (only brokers already due then
        expire); otherwise None (the Redis clock)."""
        if self._lost_ms is None:
            return None
        if self._back_ms is not None and _now_ms() > self._back_ms + self.grace * 1000:
            self._lost_ms = self._back_ms = None
            return None
        return self._lost_ms


def store_back(seen: ViewMarker | None, now: ViewMarker, kept: bool) -> str:
    """The "store back" line in words: what the worker found and does about its cache, and
    whether any change is missing (a cache read again is no loss, and must not read as one)."""
    if kept:
        return "store back: it missed no change, so the cached routes stay"
    if seen is not None and now.rev < seen.rev:
        return ("store back without the latest changes this worker saw (a restart or failover "
                "that lost recent writes): routes are read from it again, and brokers restore "
                "theirs at their next heartbeat")
    if seen is None:  # nothing to compare with (no view was served while it was away)
        return "store back: routes are read from it again"
    how = ("as a new Redis process (restarted or failed over) holding every change this worker "
           "saw" if now.server != seen.server else "with changes other workers made meanwhile")
    return f"store back {how}: routes are read from it again; nothing was lost"


class StoreOutage:
    def __init__(self, metrics: Metrics, *, stale_serve_max: float = 120.0) -> None:
        self.metrics = metrics
        self.stale_serve_max = stale_serve_max  # 0: drop the view when the feed breaks
        self.clock = OutageClock()
        self.backlog = BrokerBacklog()
        metrics.stale_age = self.stale_age
        self.lost_at: float | None = None  # monotonic: the store was lost (not back yet)
        self.serving_stale = False  # the cache's entries are the last coherent view
        self.view: ViewMarker | None = None  # the store and P:rev the cache is coherent with
        self.resumed = asyncio.Event()  # cleared while an outage's replay runs
        self.resumed.set()
        # Run once the store is back, before reads go on (the replay of the backlog).
        self.on_store_back: list[Callable[[], Awaitable[None]]] = []
        self._background: set[asyncio.Task[None]] = set()
        # The route cache's hooks (``attach``).
        self._drop_view: Callable[[], None] = lambda: None
        self._fence_fills: Callable[[], None] = lambda: None
        self._reread_config: Callable[[], None] = lambda: None

    def attach(self, *, drop_view: Callable[[], None], fence_fills: Callable[[], None],
               reread_config: Callable[[], None]) -> None:
        """The cache whose entries are the view: ``drop_view`` empties it, ``fence_fills``
        keeps every read in flight from storing what it read, ``reread_config`` has the
        NamesrvConfig read again."""
        self._drop_view, self._fence_fills = drop_view, fence_fills
        self._reread_config = reread_config

    @property
    def lost(self) -> bool:
        return self.lost_at is not None

    # --- the stale view's entry and exit ---------------------------------------------------------

    def store_lost(self, *, routes: int) -> None:
        """The feed broke, or a Redis call found the store away. ``routes``: how many entries
        the cache holds that could be served (0 with caching off)."""
        if self.lost_at is not None:
            return
        self.lost_at = time.monotonic()
        self.clock.began()
        if not (routes and self.stale_serve_max > 0 and self.view is not None):
            self.view = None
            self._drop_view()
            return
        self._fence_fills()  # no read started before this may store what it read
        self.serving_stale = True
        log.warning("serving a stale view while the store is away", routes=routes,
                    at_most_s=self.stale_serve_max)

    def check_bound(self) -> None:
        if self.serving_stale and self.lost_at is not None and (
                time.monotonic() - self.lost_at > self.stale_serve_max):
            self.end_stale_view(f"older than stale-serve-max ({self.stale_serve_max:g} s)")

    def end_stale_view(self, why: str) -> None:
        """The view outlived its bound: reads that need the store fail until it answers."""
        self._leave_stale_view()
        log.warning("stopped serving the stale view", reason=why)

    def _leave_stale_view(self) -> None:
        self.serving_stale = False
        self.view = None
        self._drop_view()

    def may_serve_stale(self) -> bool:
        """Whether an entry of the view may answer now (within the bound)."""
        if not self.serving_stale or self.lost_at is None:
            return False
        if time.monotonic() - self.lost_at > self.stale_serve_max:
            self.end_stale_view(f"older than stale-serve-max ({self.stale_serve_max:g} s)")
            return False
        return True

    def stale_age(self) -> float | None:
        """Seconds since the view stopped being coherent, while it is served stale; else
        None."""
        if not self.serving_stale or self.lost_at is None:
            return None
        age = time.monotonic() - self.lost_at
        return age if age <= self.stale_serve_max else None

    def store_answered(self, *, feed_live: bool) -> bool:
        """A Redis call just succeeded while the store was lost: it is back. The stale view is
        served no more; reads wait (briefly) for the feed and the replay. True when the feed
        should be subscribed again at once."""
        if self.lost_at is None or not self.resumed.is_set():
            return False
        if feed_live:
            # The feed never broke (a subscription raises on any gap): no change was missed,
            # and the view is current again as it is.
            self.lost_at = None
            self.serving_stale = False
            self.clock.ended()
            log.warning("store back", view_kept=True, feed_intact=True)
            return False
        if self.serving_stale:
            # Not the bound's warning: nothing failed, the store itself answers again. The
            # marker stays for ``resume`` to say what changed while the store was away.
            self.serving_stale = False
            self._drop_view()
            log.warning("the store answers again: reads go to it, no longer to the stale view")
        self._hold_reads()
        return True

    def changed(self, rev: int) -> None:
        """The feed delivered a change that moved ``P:rev`` to ``rev``."""
        if rev and self.view is not None and rev > self.view.rev:
            self.view = ViewMarker(self.view.server, rev)

    def resume(self, marker: ViewMarker) -> None:
        """The feed is live again (``marker`` read right after subscribing). The view stays only
        when the store proves it missed no change: the same Redis process and the same change
        counter as the last change the feed delivered (a restart, a promoted replica or another
        worker's write moves one of them)."""
        seen = self.view
        kept = self.lost_at is not None and self.serving_stale and marker == seen
        if not kept:
            self._leave_stale_view()
        else:  # a config change announces itself but moves no counter: read it again
            self.serving_stale = False
            self._reread_config()
        self.view = marker
        if self.lost_at is None:
            self.resumed.set()
            return
        away = time.monotonic() - self.lost_at
        self.lost_at = None
        self.clock.ended()
        log.warning(store_back(seen, marker, kept), away_s=round(away, 1), view_kept=kept)
        if not self.on_store_back:
            self.resumed.set()
            return
        self._hold_reads()
        task = asyncio.create_task(self._after_store_back(), name="store-back")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def reads_may_go_on(self) -> None:
        """Wait (RESUME_READ_WAIT at most) while the replay after an outage runs."""
        if not self.resumed.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RESUME_READ_WAIT):
                    await self.resumed.wait()

    def _hold_reads(self) -> None:
        self.resumed.clear()
        # Never longer than RESUME_READ_WAIT, whatever happens to the feed and the replay.
        asyncio.get_running_loop().call_later(RESUME_READ_WAIT, self.resumed.set)

    async def _after_store_back(self) -> None:
        try:
            for hook in self.on_store_back:
                try:
                    await hook()
                except Exception as exc:  # the next outage's end tries again
                    log.warning("after the store came back", error=str(exc))
        finally:
            self.resumed.set()

    # --- the backlog and its replay --------------------------------------------------------------

    def replay_into(self, store: RouteStore, register: Register) -> None:
        """Replay the backlog into ``store`` whenever the store is back, registrations through
        ``register`` (the NameServer's, with its history and audit)."""

        async def replay() -> None:
            await self.replay(store, register)

        self.on_store_back.append(replay)

    async def replay(self, store: RouteStore, register: Register) -> None:
        """Apply what brokers sent this worker while the store was away. A registration is
        written only when the store holds an older DataVersion for the broker (or none): a
        newer one that reached the store another way is never overwritten; either way the
        broker's deadline is refreshed, since it was alive within its timeout. A heartbeat
        refreshes the deadline (and revives a broker past it that the sweep has not removed,
        as Java keeps it)."""
        items = self.backlog.take()
        for item in items:
            try:
                await self._replay(item, store, register)
            except StoreUnavailable:  # away again: keep the rest for its return
                self.metrics.replayed.labels("failed").inc()
                for rest in items[items.index(item):]:
                    self.backlog.restore(rest)
                raise
            except NameServerError as exc:
                self.metrics.replayed.labels("failed").inc()
                log.warning("replay after the outage failed", cluster=item.cluster,
                            broker_addr=item.addr, error=exc.remark)
        if items:
            log.info("replayed what brokers sent during the store outage", brokers=len(items))

    async def _replay(self, item: Remembered, store: RouteStore, register: Register) -> None:
        reg = item.registration
        if reg is None:
            alive = await store.heartbeat(item.cluster, item.addr)
            self.metrics.replayed.labels("applied" if alive else "superseded").inc()
            return
        changed, stored = await store.query_data_version(item.cluster, item.addr,
                                                         reg.data_version)
        if stored is not None and (not changed or _newer_or_same(stored, reg.data_version)):
            self.metrics.replayed.labels("superseded" if changed else "applied").inc()
            return
        await register(reg, item.connection)
        self.metrics.replayed.labels("applied").inc()


def could_be_live(cluster: str | None, addr: str | None) -> bool:
    """Registration validates both, so any other value names no live broker (Java's lookup
    would simply find nothing): nothing to remember for it."""
    return (validation.is_valid(validation.name, cluster)
            and validation.is_valid(validation.addr, addr))


def _newer_or_same(stored: DataVersion, sent: DataVersion) -> bool:
    """Java's DataVersion.nextVersion moves the timestamp and the counter together."""
    return (stored.timestamp, stored.counter) >= (sent.timestamp, sent.counter)


def _now_ms() -> int:
    return int(time.time() * 1000)
