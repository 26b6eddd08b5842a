"""The move of a store's queue data from layout 1 (one hash per (topic, group) row) to layout 2
(one hash per topic), docs/queue-data-layouts.md, issue 42.

A store written before layout 2 stays in layout 1 while workers of the older build (which know
layout 1 only) are alive: a rolling upgrade runs both builds side by side on it. A worker of this
build says so in its presence (``P:idx:worker:<id>`` holds ``PRESENCE``, "2"; older builds write
"1"); once no other value is alive, and no removed group is still draining nor any write perm
still being cleared (layout 1's own work, finished by the sweep), any worker may move the store
(``maybe_move``, cheap when there is nothing to do, so it can run on every sweep):

1. begin (lua/layout_move.lua): ``P:layout`` "moving" and the move's record ``P:layout-move``
   (owner, started, state "copying", with a lease). From here no queue data is written (the
   scripts that write it wait, store/script_calls.py) and reads go on from layout 1's keys.
2. copy: every group's topics (``P:idx:broker-topics:<b>``), a page at a time, into
   ``P:topic:<t>`` and the group's lists ``P:idx:group-topics:<b>`` (``"m<n>"``). Each step
   renews the lease; a worker that lost it stops ("lost"), and when the owner dies, the next
   worker to try begins again (the copy writes the same values again: nothing changes
   meanwhile).
3. finish: ``P:layout`` "2", the record "cleaning", every route announced as changed: from here
   every worker reads and writes layout 2 (a script of layout 1 answers "layout").
4. clean: layout 1's keys deleted (SCAN + UNLINK), by whichever worker comes next while the
   record says "cleaning"; the record goes last.

No route is missing at any moment: layout 1's keys hold every row until P:layout says "2", and
layout 2's hold them all from then on. ``--layout-move hold`` keeps a store in layout 1 (no move
begins; one under way is still finished). A worker of the older build started after the move
reads layout 1's keys, which are gone (its routes answer "no route", its writes go to keys
nobody reads): ``old_workers_alive`` lets the sweep report one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from nsfleet.store import scripts
from nsfleet.store.keys import Keys
from nsfleet.store.replies import Reply, Status, decode

log = structlog.get_logger(__name__)

RedisClient = Redis | RedisCluster
# What a worker of this build writes as its presence (P:idx:worker:<id>): it knows layout 2.
PRESENCE = "2"
LEASE_MS = 30_000
PAGE = 250  # topics per copy call: one call stays as short as a registration chunk's
SCAN_COUNT = 500  # keys per SCAN and per UNLINK while cleaning
# Layout 1's keys, deleted once the store is in layout 2 (P:idx:cleanup:<b> is empty by then:
# the move begins only once P:idx:cleanups is, and is deleted all the same).
LAYOUT1_PATTERNS = ("queue:*", "idx:topic:*", "idx:broker-topics:*", "idx:cleanup:*")
LAYOUT1_KEYS = ("idx:group-ids", "idx:group-names", "idx:group-seq")


@dataclass(frozen=True, slots=True)
class MoveResult:
    """What one ``maybe_move`` did: the groups and rows copied (0 when it only finished the
    cleaning of a move done before), layout 1's keys deleted, and how long it took."""

    groups: int
    rows: int
    deleted: int
    seconds: float


class MoveLost(Exception):
    """This worker's move is no longer the one under way (its lease lapsed)."""


def glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN MATCH pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


async def old_workers_alive(redis: RedisClient, keys: Keys) -> list[str]:
    """The ids of the live workers of an older build (their presence is not ``PRESENCE``),
    sorted."""
    prefix = keys.worker("")
    found = [k async for k in redis.scan_iter(match=glob_escape(prefix) + "*",
                                               count=SCAN_COUNT)]
    if not found:
        return []
    values = await redis.mget(found)
    return sorted({k[len(prefix):] for k, v in zip(found, values, strict=True)
                   if v is not None and v != PRESENCE})


# The older build's workers already logged as holding the move back (once each per process:
# the check runs every sweep for as long as a rolling upgrade lasts).
_old_logged: set[str] = set()


def _log_old_once(worker_id: str, old: list[str]) -> None:
    new = [w for w in old if w not in _old_logged]
    if new:
        _old_logged.update(new)
        log.info("layout move: waiting for the workers of an older build to stop",
                 worker=worker_id, workers=new[:10], count=len(old))


class _Move:
    """One worker's steps of the move (lua/layout_move.lua), as ``owner``."""

    def __init__(self, redis: RedisClient, keys: Keys, owner: str, lease_ms: int) -> None:
        self.redis = redis
        self.keys = keys
        self.owner = owner
        self.lease_ms = lease_ms
        self.script = redis.register_script(scripts.source("layout_move"))

    async def step(self, op: str, name: str = "", page: int | str = "",
                   topics: Sequence[str] = ()) -> Reply:
        args = scripts.LayoutMoveArgs(op, self.owner, self.lease_ms, name, page, list(topics))
        raw: Any = await self.script(keys=[self.keys.prefix],
                                     args=scripts.argv("layout_move", args))
        reply = decode("layout_move", raw)
        if reply.status is Status.LOST:
            raise MoveLost(op)
        return reply

    async def groups(self) -> AsyncIterator[str]:
        """The brokerNames with layout 1 topics (no queue data is written while moving), the
        lease renewed on the way when the scan is long."""
        prefix = self.keys.broker_topics("")
        renewed = time.monotonic()
        async for key in self.redis.scan_iter(match=glob_escape(prefix) + "*",
                                              count=SCAN_COUNT):
            if time.monotonic() - renewed > self.lease_ms / 3000:
                await self.step("renew")
                renewed = time.monotonic()
            yield key[len(prefix):]

    async def copy(self, page_size: int) -> tuple[int, int]:
        """Every group's rows into layout 2: (groups, rows) copied."""
        groups = rows = 0
        async for name in self.groups():
            groups += 1
            key, cursor, page = self.keys.broker_topics(name), 0, 0
            while True:
                cursor, topics = await self.redis.sscan(key, cursor, count=page_size)
                if topics:
                    page += 1
                    reply = await self.step("copy", name, page, topics)
                    rows += int(reply.values[0])
                if not cursor:
                    break
        return groups, rows


async def clean(redis: RedisClient, keys: Keys) -> int:
    """Delete layout 1's keys (the store is in layout 2), then the move's record; how many
    keys went. Idempotent: any worker may run it, several at once, again after a crash."""
    deleted = 0
    for pattern in LAYOUT1_PATTERNS:
        batch: list[str] = []
        async for key in redis.scan_iter(match=glob_escape(keys.prefix) + ":" + pattern,
                                         count=SCAN_COUNT):
            batch.append(key)
            if len(batch) >= SCAN_COUNT:
                deleted += await redis.unlink(*batch)
                batch = []
        if batch:
            deleted += await redis.unlink(*batch)
    deleted += await redis.unlink(*(f"{keys.prefix}:{k}" for k in LAYOUT1_KEYS))
    await redis.delete(keys.layout_move)
    return deleted


async def maybe_move(redis: RedisClient, keys: Keys, worker_id: str, *, hold: bool = False,
                     lease_ms: int = LEASE_MS, page: int = PAGE) -> MoveResult | None:
    """Move the store to layout 2 when it may move and no other worker is moving it, or finish
    the cleaning of a move done before; None when there is nothing this worker may do now (one
    round trip when the store is in layout 2 and clean). Meant for every sweep, whatever the
    layout the caller last saw (a move interrupted while cleaning is finished here).

    ``hold`` (``--layout-move hold``) keeps a store in layout 1: no move begins. A move already
    under way whose owner died is still taken over, and a cleaning still finished: queue-data
    writes wait while the store is "moving", so a held worker must not leave it there."""
    started = time.monotonic()
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.layout)
        pipe.hmget(keys.layout_move, ["owner", "state"])
        layout, (owner, state) = await pipe.execute()
    if layout == scripts.LAYOUT_TOPICS:
        if state != "cleaning":
            return None
        deleted = await clean(redis, keys)
        log.info("layout move: cleaning finished", worker=worker_id, deleted=deleted)
        return MoveResult(0, 0, deleted, time.monotonic() - started)
    if layout == "moving" and owner is not None:
        # A live move: another worker's, or this one's in another task (worker ids are new for
        # every start, so this worker's dead self cannot hold it).
        return None
    if layout != "moving":
        if hold:
            return None
        old = await old_workers_alive(redis, keys)
        if old:
            _log_old_once(worker_id, old)
            return None
        if await redis.exists(keys.cleanups, keys.perm_clears):
            return None
    move = _Move(redis, keys, worker_id, lease_ms)
    begun = await move.step("begin")
    if begun.status is not Status.OK:
        return None
    log.info("layout move: begun", worker=worker_id, found=begun.values[0])
    try:
        groups, rows = await move.copy(page)
        rev = (await move.step("finish")).values[0]
    except MoveLost as exc:
        log.warning("layout move: lost the move to another worker", worker=worker_id,
                    step=str(exc))
        return None
    log.info("layout move: in layout 2, cleaning layout 1", worker=worker_id, groups=groups,
             rows=rows, rev=rev)
    deleted = await clean(redis, keys)
    result = MoveResult(groups, rows, deleted, time.monotonic() - started)
    log.info("layout move: done", worker=worker_id, groups=groups, rows=rows, deleted=deleted,
             seconds=round(result.seconds, 3))
    return result
