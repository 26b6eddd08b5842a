"""A name service through an nsfleet fleet's JSON HTTP API (``client/name_service.py`` has the
interface). Routes in bulk: batches of topics per ``POST /v1/routes/watch?wait=0`` (which answers
every topic whose ETag the caller does not hold: all of them), a few batches in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nsfleet.client.http import FleetHttp, path
from nsfleet.client.http_controller import HttpController

if TYPE_CHECKING:
    from nsfleet.client.name_service import Progress

ROUTE_BATCH = 500  # topics per watch request
BATCHES_IN_FLIGHT = 4


class HttpNameService:
    protocol = "HTTP"
    heartbeats_known = True

    def __init__(self, http: FleetHttp) -> None:
        self.http = http
        self.label = ",".join(http.servers)
        self.controller = HttpController(http)

    async def _get(self, *parts: str, **params: str) -> Any:
        return (await self.http.request("GET", path(*parts), params=params or None)).json()

    async def cluster_info(self) -> dict[str, Any]:
        return await self._get("v1", "cluster-info")

    async def brokers(self) -> list[dict[str, Any]]:
        return (await self._get("v1", "brokers"))["brokers"] or []

    async def route(self, topic: str) -> dict[str, Any]:
        return await self._get("v1", "routes", topic)

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]:
        window = asyncio.Semaphore(BATCHES_IN_FLIGHT)

        async def batch(chunk: Sequence[str]) -> dict[str, dict[str, Any] | None]:
            async with window:
                reply = await self.http.request(
                    "POST", "/v1/routes/watch", params={"wait": "0"},
                    json_body={"topics": dict.fromkeys(chunk)})
            progress(len(chunk))
            answered = reply.json()["routes"]
            return {t: answered[t]["route"] for t in chunk}

        chunks = [topics[i:i + ROUTE_BATCH] for i in range(0, len(topics), ROUTE_BATCH)]
        out: dict[str, dict[str, Any] | None] = {}
        for part in await asyncio.gather(*(batch(c) for c in chunks)):
            out.update(part)
        return out

    async def topics(self, cluster: str | None = None) -> list[str]:
        parts = ("v1", "clusters", cluster, "topics") if cluster else ("v1", "topics")
        return sorted((await self._get(*parts))["topicList"])

    async def delete_topic(self, topic: str, cluster: str | None) -> int | None:
        params = {"cluster": cluster} if cluster else None
        reply = await self.http.request("DELETE", path("v1", "topics", topic), params=params)
        return reply.json()["removedQueueDatas"]

    async def write_perm(self, broker: str, wipe: bool) -> int:
        """The worker refuses a group no broker registered (404)."""
        action, field = ("wipe-write-perm", "wipeTopicCount") if wipe else \
            ("add-write-perm", "addTopicCount")
        reply = await self.http.request("POST", path("v1", "brokers", broker, action))
        return int(reply.json()[field])

    async def kv_get(self, namespace: str, key: str) -> str:
        return (await self._get("v1", "kv", namespace, key))["value"]

    async def kv_put(self, namespace: str, key: str, value: str) -> bool | None:
        reply = await self.http.request("PUT", path("v1", "kv", namespace, key),
                                        json_body={"value": value})
        return reply.json()["changed"]

    async def kv_delete(self, namespace: str, key: str) -> bool | None:
        reply = await self.http.request("DELETE", path("v1", "kv", namespace, key))
        return reply.json()["deleted"]

    async def kv_namespaces(self) -> list[str] | None:
        return sorted((await self._get("v1", "kv"))["namespaces"])

    async def kv_table(self, namespace: str) -> dict[str, str]:
        return dict((await self._get("v1", "kv", namespace))["table"])

    async def config(self) -> dict[str, str]:
        return dict((await self._get("v1", "namesrv-config"))["config"])

    async def config_set(self, values: dict[str, str]) -> dict[str, str] | None:
        """What was applied fleet-wide (the worker refuses unknown keys)."""
        reply = await self.http.request("PUT", path("v1", "namesrv-config"), json_body=values)
        return reply.json()["applied"]

    async def changes(self, limit: int) -> dict[str, Any]:
        return await self._get("v1", "changes", limit=str(limit))

    async def close(self) -> None:
        await self.http.close()
