"""A name service over the RocketMQ remoting protocol, as mqadmin reads it: nsfleet workers or a
Java NameServer (``client/name_service.py`` has the interface). Either transport carries it:
``NamesrvClient`` (one request per connection, failing over through the list: single admin
commands) or ``PipelinedNamesrv`` (hundreds of requests in flight on two connections: reading a
side whole)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nsfleet.client.http import ApiError
from nsfleet.client.remoting import RemotingError, call_ok
from nsfleet.client.remoting_controller import RemotingController
from nsfleet.domain.errors import ResponseCode
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.wire.codec import CURRENT_VERSION, RemotingCommand, RequestCode
from nsfleet.wire.fastjson import loads_lenient

if TYPE_CHECKING:
    from nsfleet.client.name_service import Progress

ROUTES_IN_FLIGHT = 128  # route requests in flight when reading routes in bulk


class Transport(Protocol):
    addrs: list[str]

    async def call(self, code: int, ext_fields: dict[str, str] | None = None,
                   body: bytes | None = None, *,
                   version: int = CURRENT_VERSION) -> RemotingCommand: ...

    async def close(self) -> None: ...


def _json(resp: RemotingCommand) -> Any:
    """A body as fastjson writes it (object keys come back as strings, ``{0:..}`` too)."""
    return loads_lenient(resp.body or b"{}")


class RemotingNameService:
    protocol = "remoting"
    heartbeats_known = False  # no remoting request carries heartbeat times

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.label = ";".join(transport.addrs)
        self.controller = RemotingController(transport)

    async def _ok(self, code: int, ext: dict[str, str] | None = None,
                  body: bytes | None = None) -> RemotingCommand:
        return await call_ok(self.transport.call, code, ext, body)

    async def _found(self, code: int, ext: dict[str, str], not_found: ResponseCode,
                     remark_lines: int | None = None) -> RemotingCommand:
        """An answer that may be "not found": ApiError with status 404 then, as over HTTP."""
        resp = await self.transport.call(code, ext)
        if resp.code != ResponseCode.SUCCESS:
            remark = resp.remark or ""
            if remark_lines is not None:
                remark = "\n".join(remark.split("\n")[:remark_lines])
            raise ApiError(404 if resp.code == not_found else 0, resp.code, remark)
        return resp

    async def cluster_info(self) -> dict[str, Any]:
        return _json(await self._ok(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def brokers(self) -> list[dict[str, Any]]:
        """The members cluster info lists (without heartbeat ages and deadlines)."""
        info = await self.cluster_info()
        return [{"clusterName": group.get("cluster"), "brokerName": name,
                 "brokerId": int(broker_id), "brokerAddr": addr}
                for name, group in sorted(info.get("brokerAddrTable", {}).items())
                for broker_id, addr in sorted(group.get("brokerAddrs", {}).items())]

    async def route(self, topic: str) -> dict[str, Any]:
        return _json(await self._found(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                                       ResponseCode.TOPIC_NOT_EXIST, remark_lines=1))

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]:
        out: dict[str, dict[str, Any] | None] = {}
        pending = iter(topics)

        async def reader() -> None:  # a few hundred of these, not a task per topic
            for topic in pending:
                resp = await self.transport.call(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                 {"topic": topic})
                if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                    out[topic] = None
                elif resp.code != ResponseCode.SUCCESS:
                    raise RemotingError(resp.code, resp.remark)
                else:
                    out[topic] = _json(resp)
                progress(1)

        await asyncio.gather(*(reader() for _ in range(min(ROUTES_IN_FLIGHT, len(topics)))))
        return out

    async def topics(self, cluster: str | None = None) -> list[str]:
        if cluster:
            resp = await self._ok(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        else:
            resp = await self._ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(_json(resp).get("topicList") or [])

    async def delete_topic(self, topic: str, cluster: str | None) -> int | None:
        ext = {"topic": topic, **({"clusterName": cluster} if cluster else {})}
        await self._ok(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        return None  # the answer carries no count

    async def write_perm(self, broker: str, wipe: bool) -> int:
        """Java's answer: 0 for an unknown group as for a group without topics."""
        code, field = ((RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount") if wipe
                       else (RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount"))
        resp = await self._ok(code, {"brokerName": broker})
        return int((resp.ext_fields or {}).get(field, "0"))

    async def kv_get(self, namespace: str, key: str) -> str:
        resp = await self._found(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key},
                                 ResponseCode.QUERY_NOT_FOUND)
        return (resp.ext_fields or {}).get("value", "")

    async def kv_put(self, namespace: str, key: str, value: str) -> bool | None:
        await self._ok(RequestCode.PUT_KV_CONFIG,
                       {"namespace": namespace, "key": key, "value": value})
        return None  # the answer does not say whether it changed

    async def kv_delete(self, namespace: str, key: str) -> bool | None:
        await self._ok(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return None  # the answer does not say whether it was set

    async def kv_namespaces(self) -> list[str] | None:
        return None  # no remoting request lists them

    async def kv_table(self, namespace: str) -> dict[str, str]:
        resp = await self._found(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace},
                                 ResponseCode.QUERY_NOT_FOUND)
        return dict(_json(resp).get("table") or {})

    async def config(self) -> dict[str, str]:
        resp = await self._ok(RequestCode.GET_NAMESRV_CONFIG)
        return parse_properties((resp.body or b"").decode("utf-8", "replace"))

    async def config_set(self, values: dict[str, str]) -> dict[str, str] | None:
        await self._ok(RequestCode.UPDATE_NAMESRV_CONFIG,
                       body=format_properties(values).encode())
        return None  # the answer does not say what was applied (Java ignores unknown keys)

    async def changes(self, limit: int) -> dict[str, Any]:
        raise ValueError("the fleet's change history is an nsfleet worker's HTTP API only "
                         "(--server URL): no remoting request carries it")

    async def close(self) -> None:
        await self.transport.close()
