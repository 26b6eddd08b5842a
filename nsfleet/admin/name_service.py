"""Reading one whole name service in bulk, for ``nsfleet admin diff`` and ``copy-config``: a Java
NameServer or nsfleet workers over the remoting protocol (``host:port[;host:port]``), or an
nsfleet fleet's HTTP API (``http://host:8080[,http://...]``).

Route reads are pipelined: over remoting, hundreds of requests in flight on two connections
(``PipelinedNamesrv``); over HTTP, batches of topics per ``POST /v1/routes/watch?wait=0`` (which
answers every topic whose ETag the caller does not hold: all of them), a few batches in flight.
Both answer the same JSON shapes: the route as TopicRouteData, cluster info as ClusterInfo."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from nsfleet.client.connection import ConnectOptions, is_http
from nsfleet.client.http import ApiError, FleetHttp, path
from nsfleet.client.pipeline import PipelinedNamesrv
from nsfleet.client.remoting import RemotingError
from nsfleet.domain.java_properties import parse_properties
from nsfleet.wire.codec import RequestCode
from nsfleet.wire.fastjson import loads_lenient

TOPIC_NOT_EXIST = 17
QUERY_NOT_FOUND = 22
REMOTING_IN_FLIGHT = 128  # route requests in flight over remoting
HTTP_ROUTE_BATCH = 500  # topics per watch request
HTTP_BATCHES_IN_FLIGHT = 4

Progress = Callable[[int], None]  # told how many more topics were read


class NameService(Protocol):
    label: str

    async def cluster_info(self) -> dict[str, Any]: ...

    async def topics(self) -> list[str]: ...

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]: ...

    async def kv_namespaces(self) -> list[str] | None: ...

    async def kv_table(self, namespace: str) -> dict[str, str] | None: ...

    async def config(self) -> dict[str, str]: ...

    async def close(self) -> None: ...


class RemotingNameService:
    """A NameServer (Java or nsfleet) over the remoting protocol, as mqadmin reads it."""

    def __init__(self, client: PipelinedNamesrv) -> None:
        self.client = client
        self.label = ";".join(client.addrs)

    async def _ok(self, code: int, ext: dict[str, str] | None = None,
                  not_found: int | None = None) -> bytes | None:
        resp = await self.client.call(code, ext)
        if resp.code == not_found:
            return None
        if resp.code != 0:
            raise RemotingError(resp.code, resp.remark)
        return resp.body or b""

    async def cluster_info(self) -> dict[str, Any]:
        return loads_lenient(await self._ok(RequestCode.GET_BROKER_CLUSTER_INFO) or b"{}")

    async def topics(self) -> list[str]:
        body = await self._ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) or b"{}"
        return sorted(loads_lenient(body).get("topicList") or [])

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]:
        out: dict[str, dict[str, Any] | None] = {}
        pending = iter(topics)

        async def reader() -> None:  # a few hundred of these, not a task per topic
            for topic in pending:
                body = await self._ok(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                                      not_found=TOPIC_NOT_EXIST)
                out[topic] = None if body is None else loads_lenient(body or b"{}")
                progress(1)

        await asyncio.gather(*(reader() for _ in range(min(REMOTING_IN_FLIGHT, len(topics)))))
        return out

    async def kv_namespaces(self) -> list[str] | None:
        return None  # no remoting request lists them

    async def kv_table(self, namespace: str) -> dict[str, str] | None:
        body = await self._ok(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace},
                              not_found=QUERY_NOT_FOUND)
        return None if body is None else dict(loads_lenient(body or b"{}").get("table") or {})

    async def config(self) -> dict[str, str]:
        body = await self._ok(RequestCode.GET_NAMESRV_CONFIG) or b""
        return parse_properties(body.decode("utf-8", "replace"))

    async def close(self) -> None:
        await self.client.close()


class HttpNameService:
    """An nsfleet fleet through its JSON API."""

    def __init__(self, http: FleetHttp) -> None:
        self.http = http
        self.label = ",".join(http.servers)

    async def _get(self, *parts: str) -> Any:
        return (await self.http.request("GET", path(*parts))).json()

    async def cluster_info(self) -> dict[str, Any]:
        return await self._get("v1", "cluster-info")

    async def topics(self) -> list[str]:
        return sorted((await self._get("v1", "topics"))["topicList"])

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]:
        window = asyncio.Semaphore(HTTP_BATCHES_IN_FLIGHT)

        async def batch(chunk: Sequence[str]) -> dict[str, dict[str, Any] | None]:
            async with window:
                reply = await self.http.request(
                    "POST", "/v1/routes/watch", params={"wait": "0"},
                    json_body={"topics": dict.fromkeys(chunk)})
            progress(len(chunk))
            answered = reply.json()["routes"]
            return {t: answered[t]["route"] for t in chunk}

        chunks = [topics[i:i + HTTP_ROUTE_BATCH] for i in range(0, len(topics), HTTP_ROUTE_BATCH)]
        out: dict[str, dict[str, Any] | None] = {}
        for part in await asyncio.gather(*(batch(c) for c in chunks)):
            out.update(part)
        return out

    async def kv_namespaces(self) -> list[str] | None:
        return sorted((await self._get("v1", "kv"))["namespaces"])

    async def kv_table(self, namespace: str) -> dict[str, str] | None:
        try:
            return dict((await self._get("v1", "kv", namespace))["table"])
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def config(self) -> dict[str, str]:
        return dict((await self._get("v1", "namesrv-config"))["config"])

    async def close(self) -> None:
        await self.http.close()


def open_name_service(spec: str, opts: ConnectOptions) -> NameService:
    """``http(s)://...[,...]``: an nsfleet fleet's HTTP API; else remoting addresses."""
    if is_http(spec):
        return HttpNameService(FleetHttp(spec, timeout=opts.timeout, token=opts.token))
    return RemotingNameService(PipelinedNamesrv(spec, timeout=opts.timeout, tls=opts.tls,
                                                access_key=opts.access_key,
                                                secret_key=opts.secret_key))


async def kv_tables(side: NameService,
                    namespaces: Iterable[str]) -> dict[str, dict[str, str] | None]:
    names = sorted(set(namespaces))
    tables = await asyncio.gather(*(side.kv_table(ns) for ns in names))
    return dict(zip(names, tables, strict=True))
