"""Brokers leaving: UNREGISTER_BROKER and a closed connection (unregister_broker.lua's
cascade), the expiry sweep (sweep.lua), and the chunked work a cascade leaves behind: a removed
group's queue rows and an acting-master group's write-perm clear, drained ``chunk_rows`` rows a
call (drain_cleanup.lua, clear_write_perm.lua)."""

from __future__ import annotations

from dataclasses import dataclass

from nsfleet.domain import validation
from nsfleet.store import scripts
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.replies import Status
from nsfleet.store.script_calls import ScriptCalls


@dataclass(slots=True)
class SweepResult:
    held: bool
    due: int
    live: int
    removed: list[tuple[str, str, str]]  # (cluster, addr, brokerName)


@translating_redis_errors
class Departures:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls
        self._keys = calls.keys

    async def drain_cleanups(self, only: str | None = None) -> int:
        """Finish what cascades left to do in chunks: delete the queue rows of removed groups
        (P:idx:cleanups) and clear the write perm of acting-master groups that lost their master
        (P:idx:perm-clears); only group ``only``'s when given. ``chunk_rows`` rows per call;
        returns how many rows were deleted or changed. The sweep calls it too, so the work of a
        worker that died half-way is finished."""
        pipe = self._calls.redis.pipeline(transaction=False)
        pipe.smembers(self._keys.cleanups)
        pipe.hkeys(self._keys.perm_clears)
        cleanups, perm_clears = await pipe.execute()
        if only is not None:
            # A caller waits for its own group's rows, not for every group a mass departure
            # left to drain (each one's own caller, or the sweep, drains those).
            cleanups, perm_clears = ({only} & set(cleanups), {only} & set(perm_clears))
        done = 0
        for name in sorted(cleanups):
            left = 1
            while left:
                _, (count, left) = await self._calls.call(
                    "drain_cleanup", scripts.DrainCleanupArgs(name, self._calls.chunk_rows))
                done += int(count)
        for name in sorted(perm_clears):
            more = "1"
            while more == "1":
                _, (count, more) = await self._calls.call(
                    "clear_write_perm", scripts.ClearWritePermArgs(name, self._calls.chunk_rows))
                done += int(count)
        return done

    async def unregister_broker(self, cluster: str, addr: str, name: str, *,
                                closed_connection: str | None = None, drain: bool = True) -> int:
        """Remove a broker with the full cascade: 0 group kept, 1 group removed. With
        ``closed_connection``, only when no other connection it registered over is open:
        -1 when it was kept. Then the rows the cascade left to drain, unless ``drain`` is
        False (the caller drains them, ``drain_cleanups(only=name)``)."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        validation.name(name, "brokerName")
        status, rest = await self._calls.call(
            "unregister_broker", scripts.UnregisterBrokerArgs(
                cluster, addr, name, closed_connection or "", self._calls.chunk_rows))
        if status is Status.KEPT:
            return -1
        if rest[1] == "1" and drain:
            await self.drain_cleanups(only=name)
        return 1 if rest[0] == "1" else 0

    async def sweep(self, *, now_ms: int | None = None, batch: int = 100,
                    guard_share: float = 0.0, guard_max_hold_ms: int = 120_000) -> SweepResult:
        """Expire up to ``batch`` brokers past their deadline as of ``now_ms`` (default: the
        Redis clock). With ``guard_share`` > 0, a sweep that would expire more than that share
        of the live brokers holds them, but never longer than ``guard_max_hold_ms`` past their
        deadline."""
        status, (due, live, cleanup, *flat) = await self._calls.call(
            "sweep", scripts.SweepArgs("" if now_ms is None else now_ms, batch, guard_share,
                                   guard_max_hold_ms, self._calls.chunk_rows))
        removed = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        if cleanup == "1":
            await self.drain_cleanups()
        return SweepResult(status is Status.HELD, int(due), int(live), removed)
