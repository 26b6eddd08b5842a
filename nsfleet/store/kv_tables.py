"""The run-time tables the admin tools set: the KV config (a hash per namespace, kv_put.lua and
kv_delete.lua, which keep ORDER_TOPIC_CONFIG's routes in step) and the fleet-wide NamesrvConfig
values (P:config, announced on the change feed)."""

from __future__ import annotations

from nsfleet.domain import validation
from nsfleet.store import scripts
from nsfleet.store.change_feed import ChangeFeed
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.script_calls import ScriptCalls, flag


@translating_redis_errors
class KvTables:
    def __init__(self, calls: ScriptCalls, changes: ChangeFeed) -> None:
        self._calls = calls
        self._keys = calls.keys
        self._changes = changes

    async def kv_put(self, namespace: str, key: str, value: str) -> bool:
        """Store a value. True when something changed."""
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        k = self._keys
        _, (changed,) = await self._calls.call(
            "kv_put",
            scripts.KvPutArgs(namespace, key, value, flag(namespace == ORDER_TOPIC_CONFIG)),
            [k.kv(namespace, key), k.kv_table(namespace), k.kv_namespaces])
        return changed == "1"

    async def kv_get(self, namespace: str, key: str) -> str | None:
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        return await self._calls.redis.hget(self._keys.kv_table(namespace), key)

    async def kv_delete(self, namespace: str, key: str) -> bool:
        validation.kv_part(namespace, "namespace")
        validation.kv_part(key, "key")
        k = self._keys
        _, (removed,) = await self._calls.call(
            "kv_delete", scripts.KvDeleteArgs(key, flag(namespace == ORDER_TOPIC_CONFIG)),
            [k.kv(namespace, key), k.kv_table(namespace)])
        return removed == "1"

    async def kv_namespaces(self) -> list[str]:
        return sorted(await self._calls.redis.smembers(self._keys.kv_namespaces))

    async def kv_list(self, namespace: str) -> dict[str, str] | None:
        """The namespace's table, or None when the namespace never existed."""
        validation.kv_part(namespace, "namespace")
        # No MULTI: RedisCluster clients before redis-py 6 refuse transactional pipelines. The
        # order makes the two reads safe anyway: a namespace never disappears and kv_put adds
        # it before its key, so "exists" read first and the table read second always describe
        # a state that existed.
        pipe = self._calls.redis.pipeline(transaction=False)
        pipe.sismember(self._keys.kv_namespaces, namespace)
        pipe.hgetall(self._keys.kv_table(namespace))
        exists, table = await pipe.execute()
        return dict(table) if exists else None

    async def read_config(self) -> dict[str, str]:
        """The fleet-wide NamesrvConfig values changed at run time (P:config)."""
        return dict(await self._calls.redis.hgetall(self._keys.config))

    async def write_config(self, values: dict[str, str]) -> None:
        """Store NamesrvConfig values fleet-wide and tell every worker."""
        await self._calls.redis.hset(self._keys.config, mapping=values)
        await self._changes.publish_config_changed()
