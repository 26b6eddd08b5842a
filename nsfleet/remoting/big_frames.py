"""How many connections of a worker receive a big frame at once.

A registration storm sends every broker's table at once: 150 connections each delivering a 1.7 MB
frame. The event loop reads every ready connection in each of its turns, so while all of them
deliver, one turn moves hundreds of MB, and a route read, which needs a few turns, waited more
than a second (bench/scale.py, 300 brokers x 10k topics). So a frame larger than
``BIG_FRAME_BYTES`` is received by two connections at a time (``slots``): the others are paused
as soon as their frame's length prefix says it is big, and resumed in turn, their bytes waiting
in the kernel (and their senders, by TCP's flow control) instead of in the worker's memory.
Tables are decoded one at a time anyway (nsfleet.runtime.table_thread); with one slot the storm
took longer (the next frame's bytes start moving only when the last is in), with two it took as
long as with none, its reads' longest wait ~0.3 s instead of ~1 s.

A connection keeps its slot for ``slice_s`` at most while others wait, then waits behind them
with what it has received so far: a peer that sends a big frame's prefix and then stops, or a
slow link, delays the others by ``slice_s`` a turn, not for as long as it takes (the
idle-connection timeout still closes a silent one).

A connection can only be paused once its frame's prefix has been read, and its first read took
what the event loop reads at once (uvloop: 256 KiB): 150 connections beginning their tables
together moved ~38 MB in one turn, and held every request of the worker ~40-60 ms at the
storm's start (a prober beside bench/scale.py's 300 x 10k). So connections read through
``ReadBuffers``: ``READ_BYTES`` a read, ``BIG_READ_BYTES`` for one holding a slot.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Protocol

BIG_FRAME_BYTES = 256 * 1024  # a 5.x split registration chunk (800 topics) is ~130 KB
SLOTS = 2
SLICE_S = 1.0
# How many big requests a worker handles at once (a table's decoding, then its registration's
# Redis calls). Unbounded, a storm's 150 tables a worker were all in hand at once, and a route
# read waited behind their work at each turn of the event loop: at 300 x 10k with tables of
# their own, reads' p99 44-67 ms; at most 8, 33-36 ms, the storm ~4 % longer (docs/table-shape.md,
# the ninth pass). A worker's registrations in hand are also the chunks one call can carry
# (store/joint_chunks.py, JOINT_CHUNKS): with 4 and chunks of four groups a call, 300 x 10k took
# 1.15-1.25x Java's storm with reads' p99 38-42 ms; with 8 and chunks of eight, one such call of
# a worker in Redis at once, 0.86-1.09x and 32-51 ms (bench/scale.py; the eleventh pass). A
# request waiting here keeps its slot (its body is not yet read), so the next big frames wait in
# the kernel.
BIG_HANDLERS = 8
READ_BYTES = 64 * 1024  # one read of a connection: every request but a big table in one read
BIG_READ_BYTES = 1024 * 1024  # one read of a connection receiving a big frame


class Receiver(Protocol):
    """A connection as the slots see it (nsfleet.remoting.server.RemotingProtocol)."""

    big_slot: bool  # receiving a big frame now

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class BigFrameSlots:
    def __init__(self, slots: int = SLOTS, slice_s: float = SLICE_S) -> None:
        self.slots = slots
        self.slice_s = slice_s
        self.holders: dict[Receiver, float] = {}  # -> time.monotonic() it got its slot
        self.waiting: collections.deque[Receiver] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def admit(self, conn: Receiver) -> None:
        """``conn`` has begun a big frame: it receives it now if a slot is free, else it is
        paused until one is."""
        if conn.big_slot or conn in self.waiting:
            return
        if len(self.holders) < self.slots:
            self._hold(conn)
        else:
            conn.pause()
            self.waiting.append(conn)
            self._watch()

    def release(self, conn: Receiver) -> None:
        """``conn`` received its big frame, or closed: its slot (or its place) goes to the next."""
        if conn in self.waiting:
            self.waiting.remove(conn)
        if conn.big_slot:
            conn.big_slot = False
            del self.holders[conn]
            self._hand_over()

    def _hold(self, conn: Receiver) -> None:
        conn.big_slot = True
        self.holders[conn] = time.monotonic()

    def _hand_over(self) -> None:
        while self.waiting and len(self.holders) < self.slots:
            conn = self.waiting.popleft()
            self._hold(conn)
            conn.resume()

    def _watch(self) -> None:
        if self._timer is None and self.waiting:
            self._timer = asyncio.get_running_loop().call_later(self.slice_s, self._check)

    def _check(self) -> None:
        """Holders that had their slot for slice_s give it to the waiting, and wait behind."""
        self._timer = None
        cutoff = time.monotonic() - self.slice_s
        for conn in [c for c, since in self.holders.items() if since <= cutoff]:
            if not self.waiting:
                break
            conn.big_slot = False
            del self.holders[conn]
            conn.pause()
            self._hand_over()
            self.waiting.append(conn)
        self._watch()


class ReadBuffers:
    """The buffers the connections of one event loop read into (``asyncio.BufferedProtocol``):
    a read's bytes are handed on, and copied by the frame decoder, before the next read begins,
    so every connection can share them."""

    def __init__(self, read_bytes: int = READ_BYTES,
                 big_read_bytes: int = BIG_READ_BYTES) -> None:
        self.small = memoryview(bytearray(read_bytes))
        self.big = memoryview(bytearray(big_read_bytes))

    def get(self, big_slot: bool) -> memoryview:
        return self.big if big_slot else self.small
