"""Who is alive: a broker's deadline refreshed by a heartbeat or QUERY_DATA_VERSION
(heartbeat.lua), a worker's presence key, and the store itself answering."""

from __future__ import annotations

from nsfleet.domain import validation
from nsfleet.domain.model import DataVersion
from nsfleet.store import scripts
from nsfleet.store.layout_move import PRESENCE
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.replies import Status
from nsfleet.store.script_calls import ScriptCalls


@translating_redis_errors
class Liveness:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls
        self._keys = calls.keys

    async def mark_worker_alive(self, worker: str, ttl_ms: int) -> None:
        """This worker is alive for ``ttl_ms`` more: its connections count as open. The value
        says which build it is (``layout_move.PRESENCE``: one that knows layout 2)."""
        await self._calls.redis.set(self._keys.worker(worker), PRESENCE, px=ttl_ms)

    async def heartbeat(self, cluster: str, addr: str) -> bool:
        """Refresh a live broker's deadline; False when the broker is not live."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, _ = await self._calls.call("heartbeat", scripts.HeartbeatArgs(cluster, addr, "0"))
        return status is Status.OK

    async def query_data_version(self, cluster: str, addr: str,
                                 dv: DataVersion) -> tuple[bool, DataVersion | None]:
        """(changed, stored DataVersion or None); also refreshes the deadline like Java 5.x."""
        validation.name(cluster, "clusterName")
        validation.addr(addr)
        status, (changed, counter, ts, state) = await self._calls.call(
            "heartbeat",
            scripts.HeartbeatArgs(cluster, addr, "1", dv.counter, dv.timestamp, dv.state_version))
        stored = DataVersion(int(counter), int(ts), int(state)) if status is Status.OK else None
        return changed == "1", stored

    async def ping(self) -> None:
        """Raise StoreUnavailable unless Redis answers: a read of a key of the namespace, so on a
        Redis Cluster the master holding its slot answers (PING would ask any one node)."""
        await self._calls.redis.exists(self._keys.rev)
