"""What the admin commands ask a fleet, over either protocol, with the HTTP API's JSON shapes:
``HttpApi`` (``--server http://...``, an nsfleet worker's JSON API) or ``RemotingApi`` (``-n
host:9876``, the RocketMQ remoting protocol mqadmin speaks: nsfleet or a Java NameServer)."""

from __future__ import annotations

import json
from typing import Any

from nsfleet.client.connection import ConnectOptions, is_http
from nsfleet.client.http import ApiError, FleetHttp, path
from nsfleet.client.remoting import NamesrvClient, RemotingError
from nsfleet.domain.errors import ResponseCode
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.wire.codec import RequestCode
from nsfleet.wire.fastjson import loads_lenient


class HttpApi:
    protocol = "HTTP"
    live_table = True  # brokers() has heartbeat ages and deadlines

    def __init__(self, http: FleetHttp) -> None:
        self.http = http

    async def _get(self, *parts: str, **params: str) -> Any:
        return (await self.http.request("GET", path(*parts), params=params or None)).json()

    async def cluster_info(self) -> dict[str, Any]:
        return await self._get("v1", "cluster-info")

    async def brokers(self) -> list[dict[str, Any]] | None:
        return (await self._get("v1", "brokers"))["brokers"]

    async def route(self, topic: str) -> dict[str, Any]:
        return await self._get("v1", "routes", topic)

    async def topics(self, cluster: str | None = None) -> dict[str, Any]:
        if cluster:
            return await self._get("v1", "clusters", cluster, "topics")
        return await self._get("v1", "topics")

    async def delete_topic(self, topic: str, cluster: str | None) -> dict[str, Any]:
        params = {"cluster": cluster} if cluster else None
        return (await self.http.request("DELETE", path("v1", "topics", topic),
                                        params=params)).json()

    async def write_perm(self, broker: str, wipe: bool) -> dict[str, Any]:
        action = "wipe-write-perm" if wipe else "add-write-perm"
        return (await self.http.request("POST", path("v1", "brokers", broker, action))).json()

    async def kv_get(self, namespace: str, key: str) -> dict[str, Any]:
        return await self._get("v1", "kv", namespace, key)

    async def kv_put(self, namespace: str, key: str, value: str) -> dict[str, Any]:
        return (await self.http.request("PUT", path("v1", "kv", namespace, key),
                                        json_body={"value": value})).json()

    async def kv_delete(self, namespace: str, key: str) -> dict[str, Any]:
        return (await self.http.request("DELETE", path("v1", "kv", namespace, key))).json()

    async def kv_list(self, namespace: str) -> dict[str, Any]:
        return await self._get("v1", "kv", namespace)

    async def config_get(self) -> dict[str, Any]:
        return await self._get("v1", "namesrv-config")

    async def config_set(self, values: dict[str, str]) -> dict[str, Any]:
        return (await self.http.request("PUT", path("v1", "namesrv-config"),
                                        json_body=values)).json()

    async def changes(self, limit: int) -> dict[str, Any]:
        return await self._get("v1", "changes", limit=str(limit))

    async def close(self) -> None:
        await self.http.close()


def _string_keys(info: dict[str, Any]) -> dict[str, Any]:
    """The legacy encoding's numeric brokerAddrs keys as the HTTP API's strings."""
    for group in (info.get("brokerAddrTable") or {}).values():
        group["brokerAddrs"] = {str(k): v for k, v in (group.get("brokerAddrs") or {}).items()}
    return info


class RemotingApi:
    protocol = "remoting"

    def __init__(self, client: NamesrvClient) -> None:
        self.client = client

    async def _ok(self, code: int, ext: dict[str, str] | None = None,
                  body: bytes | None = None) -> Any:
        resp = await self.client.call(code, ext, body)
        if resp.code != 0:
            raise RemotingError(resp.code, resp.remark)
        return resp

    async def cluster_info(self) -> dict[str, Any]:
        resp = await self._ok(RequestCode.GET_BROKER_CLUSTER_INFO)
        return _string_keys(loads_lenient(resp.body or b"{}"))

    async def brokers(self) -> list[dict[str, Any]] | None:
        """The members cluster info lists (no remoting request carries heartbeat times)."""
        info = await self.cluster_info()
        return [{"clusterName": group.get("cluster"), "brokerName": name,
                 "brokerId": int(broker_id), "brokerAddr": addr}
                for name, group in sorted(info.get("brokerAddrTable", {}).items())
                for broker_id, addr in sorted(group.get("brokerAddrs", {}).items())]

    live_table = False  # brokers() has no heartbeat ages

    async def route(self, topic: str) -> dict[str, Any]:
        resp = await self.client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code != 0:
            raise ApiError(404 if resp.code == ResponseCode.TOPIC_NOT_EXIST else 0, resp.code,
                           (resp.remark or "").split("\n")[0])
        return json.loads(resp.body or b"{}")

    async def topics(self, cluster: str | None = None) -> dict[str, Any]:
        if cluster:
            resp = await self._ok(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        else:
            resp = await self._ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return {"topicList": sorted(loads_lenient(resp.body or b"{}").get("topicList") or [])}

    async def delete_topic(self, topic: str, cluster: str | None) -> dict[str, Any]:
        ext = {"topic": topic, **({"clusterName": cluster} if cluster else {})}
        await self._ok(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        return {"removedQueueDatas": None}  # the remoting answer carries no count

    async def write_perm(self, broker: str, wipe: bool) -> dict[str, Any]:
        code = (RequestCode.WIPE_WRITE_PERM_OF_BROKER if wipe
                else RequestCode.ADD_WRITE_PERM_OF_BROKER)
        field = "wipeTopicCount" if wipe else "addTopicCount"
        resp = await self._ok(code, {"brokerName": broker})
        return {field: int((resp.ext_fields or {}).get(field, "0"))}

    async def kv_get(self, namespace: str, key: str) -> dict[str, Any]:
        resp = await self.client.call(RequestCode.GET_KV_CONFIG,
                                      {"namespace": namespace, "key": key})
        if resp.code != 0:
            raise ApiError(404 if resp.code == ResponseCode.QUERY_NOT_FOUND else 0, resp.code,
                           resp.remark or "")
        return {"value": (resp.ext_fields or {}).get("value")}

    async def kv_put(self, namespace: str, key: str, value: str) -> dict[str, Any]:
        await self._ok(RequestCode.PUT_KV_CONFIG,
                       {"namespace": namespace, "key": key, "value": value})
        return {"changed": None}

    async def kv_delete(self, namespace: str, key: str) -> dict[str, Any]:
        await self._ok(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return {"deleted": None}

    async def kv_list(self, namespace: str) -> dict[str, Any]:
        resp = await self.client.call(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                      {"namespace": namespace})
        if resp.code != 0:
            raise ApiError(404 if resp.code == ResponseCode.QUERY_NOT_FOUND else 0, resp.code,
                           resp.remark or "")
        return {"table": loads_lenient(resp.body or b"{}").get("table") or {}}

    async def config_get(self) -> dict[str, Any]:
        resp = await self._ok(RequestCode.GET_NAMESRV_CONFIG)
        text = (resp.body or b"").decode("utf-8", "replace")
        return {"config": dict(sorted(parse_properties(text).items()))}

    async def config_set(self, values: dict[str, str]) -> dict[str, Any]:
        await self._ok(RequestCode.UPDATE_NAMESRV_CONFIG,
                       body=format_properties(values).encode())
        return {"applied": None}  # the remoting answer does not say what was applied

    async def changes(self, limit: int) -> dict[str, Any]:
        raise ValueError("the fleet's change history is an nsfleet worker's HTTP API only "
                         "(--server URL): no remoting request carries it")

    async def close(self) -> None:
        """Nothing to close: one connection per request."""


Api = HttpApi | RemotingApi


def open_api(spec: str, opts: ConnectOptions) -> Api:
    """``http(s)://...[,...]``: an nsfleet fleet's HTTP API; else remoting addresses (mqadmin's
    ``-n``), each with the options its protocol uses."""
    if is_http(spec):
        return HttpApi(FleetHttp(spec, timeout=opts.timeout, token=opts.token))
    return RemotingApi(NamesrvClient(spec, timeout=opts.timeout, tls=opts.tls,
                                     access_key=opts.access_key, secret_key=opts.secret_key))
