"""Calling the Lua scripts of ``lua/``: loaded once, run with the namespace prefix in KEYS[1],
timed, acknowledged by replicas when asked (WAIT), their replies decoded (``replies``), and the
bounded fan-out of chunked operations (``call_many``). One ``ScriptCalls`` per store, shared by
every part of it (``route_store``): the parts hold it, none inherits from it.

The scripts that read or write queue data are assembled once per layout of it
(docs/queue-data-layouts.md) and each checks the store's ``P:layout``: one called in a layout the
store has left answers "layout", and is called again in the store's (``layout``, followed here).
While the store moves from layout 1 to 2 (``"moving"``), reads go on in layout 1 and writes wait
for the move to end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from nsfleet.domain import validation
from nsfleet.domain.errors import LayoutMoving, ReplicaAcksMissing
from nsfleet.domain.model import TopicConfig
from nsfleet.store import scripts
from nsfleet.store.keys import Keys
from nsfleet.store.redis_errors import translated
from nsfleet.store.replies import Reply, Status, decode

RedisClient = Redis | RedisCluster
# The most queue rows one script call writes or removes: Redis runs one script at a time, and
# 250 rows keep every call of a big registration or cascade under ~5 ms of Redis time (more
# on a loaded machine; bench/script_time.py), so no other client waits longer than that.
CHUNK_ROWS = 250
CALLS_IN_FLIGHT = 2  # chunk calls of one operation sent before the first answers
# Chunk calls of all operations of one store (one worker) in Redis at once: a registration storm's
# chunks then queue in the worker, not in Redis, where every other client (a route read) would
# wait behind all of them. Two since a call may carry several registrations' chunks
# (store/joint_chunks.py: a route read's p50 during a 300 x 10k storm 8-10 ms, not 14-17 with 4;
# of those calls, one of a worker at a time: JOINT_CALLS_IN_REDIS).
CHUNKS_IN_REDIS = 2
# The same for a registration's other calls (its head or probe, its commit): a storm of 300
# brokers through two workers put ~150 of them in each worker's pool of connections at once, and
# a route read waited for a connection behind them (bench/scale.py, 300 x 10k; 4, not 8, since
# the joint chunks: docs/table-shape.md, the tenth pass).
REGISTRATIONS_IN_REDIS = 4
BOUNDED_REGISTRATION_CALLS = frozenset({"register_broker", "register_commit",
                                        "register_data_version"})
# How long a queue-data write waits for a move of the layout to end (store/layout_move.py)
# before it fails as the store being unavailable.
LAYOUT_MOVE_WAIT_S = 60.0
LAYOUT_POLL_S = 0.1

_encode = msgspec.json.Encoder().encode


def json_arg(value: Any) -> bytes:
    """Compact JSON for the scripts' cjson (msgspec: a 60,000-topic table in ~10 ms)."""
    return _encode(value)


def table_chunks(configs: Sequence[TopicConfig], rows: int) -> list[bytes]:
    """A topic table as register_broker.lua and register_topics.lua take it, ``rows`` rows a
    chunk: a line per topic, its name, readQueueNums, writeQueueNums, perm and topicSysFlag
    separated by tabs (lua/includes/<layout>/queue_data.lua, TABLE_ROW), the numbers as decimal
    strings, which the scripts store as they come (a Lua tostring per field cost ~1 us a row).
    Stored topic names hold no control character (``validation.unstorable_character``), so no
    field holds a tab or a newline."""
    # A broker's topics share a few (queues, perm, flag): each such tail is written once, and a
    # line is a name and its tail (10,000 topics in ~1 ms, against ~2 through a tuple of strings
    # a row: a storm's worker encodes every table it takes).
    tails: dict[tuple[int, int, int, int], str] = {}
    lines = []
    for tc in configs:
        numbers = (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        tail = tails.get(numbers)
        if tail is None:
            tail = tails[numbers] = "\t" + "\t".join(map(str, numbers)) + "\n"
        lines.append(tc.topic_name + tail)
    return ["".join(lines[i:i + rows]).encode() for i in range(0, len(lines), rows)]


def flag(b: bool) -> str:
    return "1" if b else "0"


def pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def member_addrs(flat: Sequence[str]) -> dict[int, str]:
    return {int(k): v for k, v in pairs(flat).items()}


class ScriptCalls:
    """The scripts of one namespace, called with its prefix; the Redis client and the limits
    every part of the store shares (``chunk_rows``, replica acknowledgements)."""

    def __init__(self, redis: RedisClient, namespace: str, *,
                 on_script: Callable[[str, float], None] | None, chunk_rows: int,
                 replica_acks: int, replica_ack_timeout_ms: int) -> None:
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be at least 1")
        # Writes a client is told succeeded wait for this many replicas (WAIT), so a Sentinel
        # failover cannot lose them (docs/reliability.md).
        self.replica_acks = replica_acks
        self.replica_ack_timeout_ms = replica_ack_timeout_ms
        self.on_script = on_script
        self.chunk_rows = chunk_rows
        self.redis = redis
        self.namespace = validation.namespace(namespace)
        self.keys = Keys(namespace)
        # Shared by call_many and store/joint_chunks.py.
        self.chunk_slots = asyncio.Semaphore(CHUNKS_IN_REDIS)
        self._registration_slots = asyncio.Semaphore(REGISTRATIONS_IN_REDIS)
        # The store's layout as last seen: "1" (also while it moves) or "2"; None until the
        # first queue-data call or ``load`` learns it.
        self.layout: str | None = None
        self._scripts: dict[tuple[str, str], AsyncScript] = {
            (name, scripts.LAYOUT_TOPICS): redis.register_script(scripts.source(name))
            for name in scripts.SCRIPT_NAMES
        }
        self._scripts.update({
            (name, scripts.LAYOUT_ROWS): redis.register_script(
                scripts.source(name, layout=scripts.LAYOUT_ROWS))
            for name in scripts.LAYOUT_SCRIPTS
        })

    @translated
    async def load(self, old_workers: bool = False) -> None:
        """SCRIPT LOAD every script, so the first real call is a plain EVALSHA, and learn the
        store's layout (``old_workers``: a worker of a build before layout 2 is alive, so an
        empty store stays in layout 1; lua/layout_init.lua)."""
        for script in self._scripts.values():
            script.sha = await self.redis.script_load(script.script)
        await self._init_layout(old_workers)

    async def _init_layout(self, old_workers: bool) -> str:
        """Learn the store's layout (lua/layout_init.lua), once: not a call of the store's
        operations, so neither timed nor seen by whoever wraps ``call``."""
        args = scripts.argv("layout_init", scripts.LayoutInitArgs(flag(old_workers)))
        raw = await self._scripts["layout_init", scripts.LAYOUT_TOPICS](
            keys=[self.keys.prefix], args=args)
        return self._set_layout(decode("layout_init", raw).values[0])

    def _set_layout(self, layout: str) -> str:
        self.layout = (scripts.LAYOUT_TOPICS if layout == scripts.LAYOUT_TOPICS
                       else scripts.LAYOUT_ROWS)
        return self.layout

    async def call(self, name: str, args: tuple[Any, ...],
                    keys: Sequence[str] = ()) -> Reply:
        """Run a script with ``args``, its NamedTuple (``scripts.ARGS``); its reply, decoded
        (``replies.decode``). A queue-data script runs in the store's layout (a "layout"
        answer: again in the layout it names, after the move when it writes)."""
        argv = scripts.argv(name, args)
        all_keys = [self.keys.prefix, *keys]
        while True:
            layout = scripts.LAYOUT_TOPICS
            if name in scripts.LAYOUT_SCRIPTS:
                layout = self.layout or await self._init_layout(False)
            if name in BOUNDED_REGISTRATION_CALLS:
                async with self._registration_slots:
                    raw = await self._call_once((name, layout), all_keys, argv)
            else:
                raw = await self._call_once((name, layout), all_keys, argv)
            reply = decode(name, raw)
            if reply.status is not Status.LAYOUT:
                return reply
            await self._follow_layout(reply.values[0], name in scripts.LAYOUT_READS)

    async def _call_once(self, script: tuple[str, str], keys: list[str], argv: list[Any]) -> Any:
        started = time.perf_counter()
        try:
            if self.replica_acks and script[0] in scripts.ACKED_WRITES:
                return await self._call_acked(script, keys, argv)
            return await self._scripts[script](keys=keys, args=argv)
        finally:
            if self.on_script is not None:
                self.on_script(script[0], time.perf_counter() - started)

    async def _follow_layout(self, layout: str, reads: bool) -> None:
        """The store is in ``layout`` (a script's "layout" answer): follow it; a write waits
        while the store moves (its layout 1 keys are being copied and must not change)."""
        waited = 0.0
        while layout == "moving" and not reads:
            if waited >= LAYOUT_MOVE_WAIT_S:
                raise LayoutMoving(waited)
            await asyncio.sleep(LAYOUT_POLL_S)
            waited += LAYOUT_POLL_S
            layout = await self.redis.get(self.keys.layout) or scripts.LAYOUT_ROWS
        self._set_layout(layout)

    async def _call_acked(self, script: tuple[str, str], keys: list[str], args: list[Any]
                          ) -> Any:
        """The script (name, layout), then WAIT on the same connection (WAIT counts the
        replicas that have every write of its own connection)."""
        pipe = self.redis.pipeline(transaction=False)
        await self._scripts[script](keys=keys, args=args, client=pipe)
        pipe.wait(self.replica_acks, self.replica_ack_timeout_ms)
        result, acks = await pipe.execute()
        if int(acks) < self.replica_acks:
            raise ReplicaAcksMissing(int(acks), self.replica_acks, self.replica_ack_timeout_ms)
        return result

    async def call_many(self, name: str, calls: Sequence[tuple[Any, ...]], *,
                         stop_on: Status | None = None) -> list[Reply]:
        """Run a script once per arguments in ``calls`` (calls independent of each other), at most
        CALLS_IN_FLIGHT at a time, each on its own connection, until a call answers
        ``stop_on``; the replies of the calls made, in order. Not one pipeline: Redis runs every
        complete command a client has sent before it serves the next client, so a pipeline of
        chunks would block other clients for all of it (measured: ~0.5 s for a 60,000-topic
        registration); two in flight hide the round trips and hold others up for two chunks at
        most. Across operations too: at most CHUNKS_IN_REDIS chunk calls of this store are in
        Redis at once (a registration storm: 60 registrations in one worker would otherwise
        queue 120 chunks ahead of every route read)."""
        replies: dict[int, Reply] = {}
        pending = iter(enumerate(calls))
        stopped = False

        async def worker() -> None:
            nonlocal stopped
            for i, args in pending:
                if stopped:
                    return
                async with self.chunk_slots:
                    replies[i] = await self.call(name, args)
                stopped = stopped or replies[i].status is stop_on

        await asyncio.gather(*(worker() for _ in range(min(CALLS_IN_FLIGHT, len(calls)))))
        return [replies[i] for i in sorted(replies)]
