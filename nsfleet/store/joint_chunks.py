"""Chunks of concurrent registrations written together (lua/register_topics_joint.lua).

In a storm of first registrations a worker holds several brokers' tables at once, and the
brokers of a cluster mostly serve the same topics in the same order, so their chunks start with
the same topic. Redis's cost of a row is mostly its ``redis.call`` (one HSET per topic and
group); written together, the rows of one topic for up to ``JOINT_CHUNKS`` groups are one HSET
(docs/table-shape.md, the tenth pass). So each registration offers all its chunks at once
(``write``); whenever it gets one of the store's chunk slots (``ScriptCalls.chunk_slots``: at
most ``CHUNKS_IN_REDIS`` chunk calls of a worker in Redis at once), it writes the chunk of its
own that the most waiting chunks of other groups start like, and those chunks with it; a call
of several chunks also takes the worker's one joint slot (``JOINT_CALLS_IN_REDIS``). A
registration alone waits for nobody: its chunks go one by one as before.

Only a fresh forced chunk of topics alone is offered (``joinable``); the others go as
register_topics.lua. In layout 1 (a key per row) the script writes the chunks one by one. A
call is written by a task of its own, so a registration cancelled meanwhile does not leave the
others it carries unanswered."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from nsfleet.store import scripts
from nsfleet.store.replies import Reply, Status
from nsfleet.store.script_calls import CALLS_IN_FLIGHT, ScriptCalls

# The most chunks (of distinct groups) one call writes: eight chunks of 250 rows that share their
# topics take ~2.4 ms of Redis, against ~0.65 ms for one chunk's call, half its cost a row
# (bench/joint_rows.py).
JOINT_CHUNKS = 8
# Calls of several chunks a worker has in Redis at once. A route read waits in Redis behind what
# is there: with two such calls of eight (the chunk slots), reads' p99 during a 300 x 10k storm
# was 46-59 ms, with one 40-51 ms, the storm as long (docs/table-shape.md, the eleventh pass).
# A chunk written alone takes a chunk slot only, so a registration alone still has
# CALLS_IN_FLIGHT calls in Redis.
JOINT_CALLS_IN_REDIS = 1


def joinable(args: scripts.RegisterTopicsArgs) -> bool:
    """A chunk register_topics_joint.lua writes: a first registration's (fresh, forced) topics,
    with neither mappings nor absent topics."""
    return (args.force == "1" and args.fresh == "1" and bool(args.topics)
            and args.mappings == "[]" and args.absent == "[]")


def _first_topic(topics: bytes | str) -> bytes:
    text = topics.encode() if isinstance(topics, str) else topics
    return text[:text.find(b"\t")]


def _stale(chunks: list[_Chunk]) -> bool:
    return any(c.reply.done() and c.reply.exception() is None
               and c.reply.result().status is Status.STALE for c in chunks)


@dataclass(eq=False)
class _Chunk:
    args: scripts.RegisterTopicsArgs
    key: bytes  # its first topic
    reply: asyncio.Future[Reply] = field(default_factory=asyncio.Future)
    taken: bool = False  # in a call, its own or another registration's


class JointChunks:
    """The chunks of one store's registrations waiting for a chunk slot, by first topic."""

    def __init__(self, calls: ScriptCalls, most: int = JOINT_CHUNKS) -> None:
        if most < 1:
            raise ValueError("most must be at least 1")
        self._calls = calls
        self.most = most
        self._waiting: dict[bytes, list[_Chunk]] = {}
        self._writing: set[asyncio.Task[None]] = set()
        self.joint_slots = asyncio.Semaphore(JOINT_CALLS_IN_REDIS)

    async def write(self, chunks: Sequence[scripts.RegisterTopicsArgs]) -> list[Reply]:
        """Write one registration's ``chunks`` (each ``joinable``), CALLS_IN_FLIGHT of its own at
        a time, until one answers "stale" (a later registration of the broker, or its removal,
        took over: its chunks not yet taken are dropped); the replies of the chunks written, in
        order, as register_topics.lua answers."""
        mine = [_Chunk(args, _first_topic(args.topics)) for args in chunks]
        for chunk in mine:
            self._waiting.setdefault(chunk.key, []).append(chunk)

        def next_chunk() -> _Chunk | None:
            # A call's replies are set before its slots are freed: seen here.
            return None if _stale(mine) else self._best(mine)

        async def drive() -> None:
            while True:
                await self._calls.chunk_slots.acquire()
                joint = False
                try:
                    chunk = next_chunk()
                    if chunk is not None and self._has_partners(chunk):
                        await self.joint_slots.acquire()
                        joint = True
                        chunk = next_chunk()  # others took chunks, or offered, meanwhile
                except BaseException:
                    self._release(joint)
                    raise
                if chunk is None:
                    self._release(joint)
                    return
                batch = self._take(chunk)
                if joint and len(batch) == 1:
                    self.joint_slots.release()
                    joint = False
                task = asyncio.create_task(self._write_batch(batch, joint))
                self._writing.add(task)
                task.add_done_callback(self._writing.discard)
                await asyncio.shield(task)

        try:
            await asyncio.gather(*(drive() for _ in range(min(CALLS_IN_FLIGHT, len(mine)))))
        finally:
            for chunk in mine:
                if not chunk.taken:
                    self._drop(chunk)
        return [await chunk.reply for chunk in mine if chunk.taken]

    def _best(self, mine: list[_Chunk]) -> _Chunk | None:
        """Of ``mine`` not yet taken, the one the most waiting chunks start like (the first
        such): the call that writes the most rows of a topic at once."""
        best, size = None, 0
        for c in mine:
            if not c.taken and (n := len(self._waiting[c.key])) > size:
                best, size = c, n
                if size >= self.most:
                    break
        return best

    def _has_partners(self, chunk: _Chunk) -> bool:
        """Whether a chunk of another group waits with ``chunk``'s first topic."""
        return any(c.args.name != chunk.args.name for c in self._waiting[chunk.key])

    def _release(self, joint: bool) -> None:
        self._calls.chunk_slots.release()
        if joint:
            self.joint_slots.release()

    def _take(self, chunk: _Chunk) -> list[_Chunk]:
        """``chunk`` and up to ``most`` - 1 waiting chunks of other groups with its first topic,
        out of the waiting ones."""
        batch, names = [chunk], {chunk.args.name}
        for other in self._waiting[chunk.key]:
            if len(batch) == self.most:
                break
            if other is not chunk and other.args.name not in names:
                batch.append(other)
                names.add(other.args.name)
        for c in batch:
            c.taken = True
            self._drop(c)
        return batch

    def _drop(self, chunk: _Chunk) -> None:
        same = self._waiting.get(chunk.key)
        if same is not None and chunk in same:
            same.remove(chunk)
            if not same:
                del self._waiting[chunk.key]

    async def _write_batch(self, batch: list[_Chunk], joint: bool) -> None:
        """One call for ``batch`` (its chunk slot taken, and the joint slot if ``joint``; both
        released here), its replies to each chunk."""
        try:
            replies = await self._call(batch)
        except BaseException as exc:
            for c in batch:
                if not c.reply.done():
                    c.reply.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for c, reply in zip(batch, replies, strict=True):
                c.reply.set_result(reply)
        finally:
            self._release(joint)

    async def _call(self, batch: list[_Chunk]) -> list[Reply]:
        if len(batch) == 1:
            return [await self._calls.call("register_topics", batch[0].args)]
        flat = [v for c in batch for v in (c.args.cluster, c.args.addr, c.args.name,
                                           c.args.generation, c.args.clear_write, c.args.topics)]
        _, values = await self._calls.call(
            "register_topics_joint", scripts.RegisterTopicsJointArgs(flat))
        return [Reply(Status.OK, values[i + 1:i + 4]) if values[i] == Status.OK
                else Reply(Status.STALE, []) for i in range(0, len(values), 4)]
