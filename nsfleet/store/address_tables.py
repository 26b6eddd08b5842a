"""The address server's tables: the remoting address each live worker advertises, and the fixed
extra addresses an operator lists besides them (``P:idx:worker-addrs``, ``P:nsaddr:extra``).

A worker is live while its presence key (``P:idx:worker:<id>``, the one remote connections are
judged by) exists, so a worker killed with SIGKILL leaves the list when that key's TTL ends."""

from __future__ import annotations

from collections.abc import Iterable

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from nsfleet.store.keys import Keys
from nsfleet.store.layout_move import PRESENCE
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.route_store import RouteStore

RedisClient = Redis | RedisCluster


@translating_redis_errors
class AddressTables:
    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    @classmethod
    def of(cls, store: RouteStore) -> AddressTables:
        """The directory of ``store``'s namespace, on its Redis client."""
        return cls(store.redis, store.keys)

    async def mark_alive(self, worker: str, ttl_ms: int, address: str) -> None:
        """``worker`` is alive for ``ttl_ms`` more and clients reach it at ``address``. The
        presence first: a reader that saw the address without it would drop the entry. (No
        MULTI: a Redis Cluster pipeline has none; one connection keeps the order.)"""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.worker(worker), PRESENCE, px=ttl_ms)  # this build's
            pipe.hset(self.keys.worker_addrs, worker, address)
            await pipe.execute()

    async def withdraw(self, worker: str) -> None:
        """Take a stopping worker's address out of the list at once (its presence key stays
        until its TTL: its connections' brokers keep the rules of a live worker's)."""
        await self.redis.hdel(self.keys.worker_addrs, worker)

    async def live_addresses(self) -> list[str]:
        """The advertised addresses of the workers alive now, sorted and without duplicates;
        the entries of dead workers are removed on the way."""
        advertised: dict[str, str] = await self.redis.hgetall(self.keys.worker_addrs)
        if not advertised:
            return []
        workers = sorted(advertised)
        async with self.redis.pipeline(transaction=False) as pipe:
            for worker in workers:
                pipe.exists(self.keys.worker(worker))
            alive = await pipe.execute()
        dead = [w for w, a in zip(workers, alive, strict=True) if not a]
        if dead:
            # A worker id is new for every start, so a dead id never comes back: safe to drop.
            await self.redis.hdel(self.keys.worker_addrs, *dead)
        return sorted({advertised[w] for w, a in zip(workers, alive, strict=True) if a})

    async def extra_addresses(self) -> list[str]:
        return sorted(await self.redis.smembers(self.keys.extra_nsaddrs))

    async def change_extra(self, *, add: Iterable[str] = (), remove: Iterable[str] = (),
                           replace: bool = False) -> list[str]:
        """Add and remove fixed addresses (``replace``: the list becomes ``add``), in one
        pipeline; the list after."""
        add, remove = list(add), list(remove)
        async with self.redis.pipeline(transaction=False) as pipe:
            if replace:
                pipe.delete(self.keys.extra_nsaddrs)
            if remove:
                pipe.srem(self.keys.extra_nsaddrs, *remove)
            if add:
                pipe.sadd(self.keys.extra_nsaddrs, *add)
            pipe.smembers(self.keys.extra_nsaddrs)
            results = await pipe.execute()
        return sorted(results[-1])
