"""The expiry sweep, run by APScheduler every ``sweep_interval`` seconds in every worker.

sweep.lua re-reads the deadline set inside each call, so any number of workers may sweep at once;
with nothing due a call costs one ZCOUNT (and the run one SMEMBERS of the pending cleanups).
Batches keep each script call short (Redis runs one script at a time), and one sweep stops after
``max_batches`` so a backlog cannot hog the worker. Each run also finishes the chunked removal
of any group a worker left half-drained when it died (RouteStore.drain_cleanups).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_SUBMITTED
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from nsfleet.metrics import Metrics
from nsfleet.service.history import ChangeRecorder
from nsfleet.service.outage import OutageClock
from nsfleet.store import RouteStore, SweepResult

log = structlog.get_logger(__name__)
SWEEP_STOP_SECONDS = 5.0  # how long a sweep in flight at shutdown may take to finish
# How often a worker looks at the queue data's layout (moves it, or counts old workers): every
# sixth sweep (a minute at the default --sweep-interval), as each look SCANs for the workers'
# presence keys, whose cost grows with the store.
LAYOUT_CHECK_SWEEPS = 6


class Sweeper:
    def __init__(self, store: RouteStore, metrics: Metrics, *, interval: float,
                 guard_share: float, guard_max_hold: float = 120.0, batch: int = 100,
                 max_batches: int = 50, outage: OutageClock | None = None,
                 worker_id: str = "", layout_move: str = "auto") -> None:
        self.store = store
        # The move of a store to layout 2 (docs/table-shape.md): "auto" or "hold".
        self.worker_id = worker_id
        self.layout_move = layout_move
        self._sweeps_to_layout_check = 0
        self.metrics = metrics
        self.interval = interval
        self.guard_share = guard_share
        self.guard_max_hold_ms = int(guard_max_hold * 1000)
        self.batch = batch
        self.max_batches = max_batches
        # After a store outage, expire by the moment it began until brokers had a heartbeat to
        # come back (OutageClock.sweep_now_ms).
        self.outage = outage or OutageClock()
        self.scheduler = AsyncIOScheduler()
        self.history = ChangeRecorder(store.history, metrics)
        # Clusters reported so far: one whose last broker expired stays, at 0, for the alert.
        self.clusters_seen: set[str] = set()
        self.running = 0  # sweeps in flight, from the scheduler's events
        self.idle = asyncio.Event()  # set while none is
        self.idle.set()
        self.scheduler.add_listener(self._seen, EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED |
                                    EVENT_JOB_ERROR)

    def start(self) -> None:
        self.scheduler.add_job(self.sweep_once, "interval", seconds=self.interval,
                               id="sweep", max_instances=1, coalesce=True)
        self.scheduler.start()

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def stop_gracefully(self, grace: float = SWEEP_STOP_SECONDS) -> None:
        """Stop without cancelling a sweep in flight: APScheduler's shutdown cancels a running
        job and logs the cancellation as the job's error, a CancelledError traceback through
        the Redis client (seen on SIGTERM under load). No new sweep starts; one running gets
        ``grace`` seconds (a sweep is a few bounded script calls), and if it is still running
        then, its cancellation is not logged (nsfleet.logs)."""
        if not self.scheduler.running:
            return
        self.scheduler.pause()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.idle.wait()
        self.stop()

    def _seen(self, event: Any) -> None:
        self.running += 1 if event.code == EVENT_JOB_SUBMITTED else -1
        if self.running > 0:
            self.idle.clear()
        else:
            self.idle.set()

    async def sweep_once(self) -> int:
        """Remove every broker past its deadline (up to the batch bound); returns how many."""
        removed = 0
        try:
            for _ in range(self.max_batches):
                result: SweepResult = await self.store.sweep(
                    now_ms=self.outage.sweep_now_ms(), batch=self.batch,
                    guard_share=self.guard_share, guard_max_hold_ms=self.guard_max_hold_ms)
                # Due brokers are past their deadline, removed or held: not alive either way.
                self.metrics.brokers_alive.set(result.live - result.due)
                if result.held:
                    self.metrics.sweep_held.inc()
                    log.error("mass expiry held: brokers past their deadline kept", audit=True,
                              due=result.due, live=result.live, share=self.guard_share,
                              held_at_most_s=self.guard_max_hold_ms / 1000,
                              removed_past_the_bound=len(result.removed))
                await self.history.record_many([
                    ("broker expired", {"reason": "silent past its deadline", "cluster": cluster,
                                        "broker_addr": addr, "broker_name": name})
                    for cluster, addr, name in result.removed])
                removed += len(result.removed)
                self.metrics.sweep_removals.inc(len(result.removed))
                if result.held or len(result.removed) < self.batch:
                    break
            # Queue data a removal left to drain in chunks (P:idx:cleanups): normally drained by
            # the worker that removed the group at once, left here only when it died half-way.
            await self.store.drain_cleanups()
            await self._check_layout()
            self._report_clusters(await self.store.live_count_by_cluster())
            self.metrics.store_up.set(1)
        except Exception as exc:  # a Redis outage must not kill the scheduler job
            self.metrics.store_up.set(0)
            self.metrics.redis_errors.labels("sweep").inc()
            log.warning("sweep failed", error=str(exc))
        return removed

    async def _check_layout(self) -> None:
        """Every LAYOUT_CHECK_SWEEPS sweeps: in layout 1, move the store to layout 2 when no
        worker of an older build is alive (unless held); in layout 2, count such workers, which
        read no queue data there."""
        if self._sweeps_to_layout_check > 0:
            self._sweeps_to_layout_check -= 1
            return
        self._sweeps_to_layout_check = LAYOUT_CHECK_SWEEPS - 1
        # Also in layout 2 (a cleaning a dead mover left) and when held (a move it left).
        moved = await self.store.move_layout(self.worker_id, hold=self.layout_move == "hold")
        if moved is not None and moved.groups:
            await self.history.record_many([("queue data moved to layout 2", {
                "groups": moved.groups, "rows": moved.rows,
                "seconds": round(moved.seconds, 3)})])
        self.metrics.layout.set(self.store.layout)
        if self.store.layout == 2:
            old = await self.store.old_workers()
            self.metrics.old_workers.set(len(old))
            if old:
                log.error("workers of a build before layout 2 are alive: they read no queue "
                          "data since the store moved to layout 2; stop them",
                          workers=old[:10], count=len(old))

    def _report_clusters(self, live: dict[str, int]) -> None:
        self.clusters_seen.update(live)
        for cluster in self.clusters_seen:
            self.metrics.cluster_brokers_alive.labels(cluster).set(live.get(cluster, 0))
