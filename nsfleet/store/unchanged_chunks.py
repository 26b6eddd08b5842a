"""A worker's memo of unchanged registrations, which answers the chunks of a 5.x split round
without a Redis call (docs/architecture.md, "The unchanged re-registration").

A split round sends a broker's table in chunks, each under a new DataVersion: in Redis each
unchanged chunk is one few-command probe, as an unchanged whole re-registration is, so a round
costs a probe per chunk. Here the first chunk of a round goes to Redis; when its probe needed no
per-topic work and announced nothing (the registration is what Redis holds), the entry of its
broker records the registration's meta (every argument but the DataVersion counter and timestamp
and the table, the connection included), the digests so proven, and the answer. A later
registration of the broker with the same meta and a proven digest, within ``window`` seconds of
the last probe, is answered from the entry; its DataVersion is kept pending and written by
register_data_version.lua (with the liveness the few-command path refreshes) once the broker has
sent nothing for ``flush_interval``, so once per round, or ``max_lag`` after the first answer
still pending, only while the registration the entry came from is still the broker's last.

Coherent by construction: the service clears every entry on any change the feed delivers, on an
out-of-sync feed, a lost subscription or store (``clear``), and nothing is filled or answered
while the feed is not live. A probe stores its entry only if no clear happened while it ran
(``ticket``); a registration of the broker that goes to Redis and is not proven unchanged, and
its unregistration or closed connection through this worker, drop its entry (``forget``). What
the memo cannot be told (a live row reaching its deadline) is bounded by ``window``, kept below
half the broker's heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.domain.model import DataVersion, RegisterResult

log = structlog.get_logger(__name__)
WINDOW = 5.0  # seconds after a probe in which its entry answers (a round is every 30 s)
# A pending DataVersion is written once its broker has been quiet this long (the end of its
# round: a round's chunks follow each other, each sent when the last is answered), ...
FLUSH_INTERVAL = 0.5
# ... or this long after the first answer still pending (a round under load); due brokers are
# looked for every half FLUSH_INTERVAL, so a pending DataVersion waits 2 s at most.
MAX_LAG = 1.75
FLUSH_BATCH = 100  # brokers per register_data_version.lua call (six commands each)
MAX_ENTRIES = 10_000  # brokers remembered; past that the memo starts over
MAX_DIGESTS = 256  # digests per broker (chunks over the rounds); past that the entry starts over

Key = tuple[str, str]  # (cluster, addr)
# One broker's pending DataVersion: cluster, addr, generation, counter, timestamp.
Pending = tuple[str, str, int, int, int]


@dataclass(slots=True)
class _Entry:
    meta: Hashable
    answer: RegisterResult  # generation, master and HA address, KV table
    probed: float  # time.monotonic() of the last probe Redis answered
    window: float  # seconds from ``probed`` in which the entry answers
    digests: set[str] = field(default_factory=set)


class UnchangedChunks:
    def __init__(self, write: Callable[[list[Pending]], Awaitable[int]]) -> None:
        """``write`` stores pending DataVersions (register_data_version.lua, a bounded batch)."""
        self._write = write
        self.window = WINDOW
        self.flush_interval = FLUSH_INTERVAL
        self.max_lag = MAX_LAG
        self._entries: dict[Key, _Entry] = {}
        # Each broker's pending DataVersion, with time.monotonic() of the first and the last
        # answer not yet written.
        self._pending: dict[Key, tuple[Pending, float, float]] = {}
        self._clears = 0
        self._live: Callable[[], bool] = lambda: False
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # write now (closing)
        self._closed = False

    def attach(self, live: Callable[[], bool]) -> None:
        """``live()``: the change feed is subscribed, so every change reaches ``clear``. Until
        attached, nothing is remembered."""
        self._live = live
        self._closed = False

    def clear(self) -> None:
        """Anything may have changed: no entry answers again, no probe in flight fills one."""
        self._clears += 1
        self._entries.clear()

    def ticket(self) -> int:
        """Taken before a probe's Redis call: its entry is stored only if no clear followed."""
        return self._clears

    def written_now(self, key: Key) -> None:
        """A registration of the broker goes to Redis: it writes its own DataVersion, which
        supersedes the pending one."""
        self._pending.pop(key, None)

    def forget(self, key: Key) -> None:
        """A registration of the broker went to Redis and was not proven unchanged, or the
        broker leaves through this worker: its entry and pending DataVersion go."""
        self._entries.pop(key, None)
        self._pending.pop(key, None)

    def remember(self, key: Key, meta: Hashable, digest: str, answer: RegisterResult,
                 ticket: int, timeout_ms: int) -> None:
        """A probe of ``key`` Redis answered as unchanged (no per-topic work, nothing
        announced) under ``meta``: ``digest`` and ``answer`` are current as of the call."""
        if ticket != self._clears or self._closed or not self._live():
            return
        entry = self._entries.get(key)
        if entry is None or entry.meta != meta or len(entry.digests) >= MAX_DIGESTS:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            entry = self._entries[key] = _Entry(meta, answer, 0.0, 0.0)
        entry.answer = answer
        entry.probed = time.monotonic()
        entry.window = min(self.window, timeout_ms / 2000)
        entry.digests.add(digest)

    def answer(self, key: Key, meta: Hashable, digest: str,
               dv: DataVersion) -> RegisterResult | None:
        """The answer to a registration proven unchanged, its DataVersion then pending; None
        when it must go to Redis."""
        entry = self._entries.get(key)
        if (entry is None or entry.meta != meta or digest not in entry.digests
                or self._closed or not self._live()
                or time.monotonic() - entry.probed > entry.window):
            return None
        a = entry.answer
        now = time.monotonic()
        first = self._pending[key][1] if key in self._pending else now
        self._pending[key] = ((key[0], key[1], a.generation, dv.counter, dv.timestamp),
                              first, now)
        if self._flusher is None:
            self._wake = asyncio.Event()  # of the running loop
            self._flusher = asyncio.create_task(self._flush_soon(), name="data-version-flush")
        return RegisterResult(master_addr=a.master_addr, ha_server_addr=a.ha_server_addr,
                              kv_table=None if a.kv_table is None else dict(a.kv_table),
                              generation=a.generation, remembered=True)

    async def _flush_soon(self) -> None:
        """While something is pending, write what is due every half ``flush_interval`` (all
        of it at once when closing)."""
        try:
            while self._pending:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.flush_interval / 2):
                        await self._wake.wait()
                await self.flush(due_only=not self._wake.is_set())
        except Exception as exc:  # a background write: the worker keeps serving
            log.warning("pending DataVersions not written", error=str(exc))
        finally:
            self._flusher = None

    async def flush(self, key: Key | None = None, *, due_only: bool = False) -> None:
        """Write the pending DataVersions now (only ``key``'s, when given; only those due, with
        ``due_only``). A store error is logged: the broker's next QUERY_DATA_VERSION then says
        "changed" and it registers again, as after any lost write."""
        now = time.monotonic()
        if key is not None:
            keys = [key] if key in self._pending else []
        elif due_only:
            keys = [k for k, (_, first, last) in self._pending.items()
                    if now - last >= self.flush_interval or now - first >= self.max_lag]
        else:
            keys = list(self._pending)
        batch = [self._pending.pop(k)[0] for k in keys]
        for i in range(0, len(batch), FLUSH_BATCH):
            try:
                await self._write(batch[i:i + FLUSH_BATCH])
            except NameServerError as exc:
                log.warning("pending DataVersions not written", brokers=len(batch[i:]),
                            error=str(exc))
                return

    async def close(self) -> None:
        """Stop answering, and write what is pending (the worker is stopping)."""
        self._closed = True
        self.clear()
        flusher = self._flusher
        if flusher is not None:
            self._wake.set()
            await flusher
        await self.flush()
