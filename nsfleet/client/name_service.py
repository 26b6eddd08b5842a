"""One way to reach a name service, for every command that reads or changes one (``nsfleet
admin``, its ``diff`` and ``copy-config``): the ``NameService`` interface, with one shape per
operation whichever protocol answers it (and the ``ControllerService`` it carries: RocketMQ 5's
controller), and the opener that turns a side (``http(s)://...[,...]`` for an nsfleet fleet's
HTTP API, else ``host:port[;host:port]`` for the remoting protocol of nsfleet workers and Java
NameServers) and its ``ConnectOptions`` into one.

What is absent raises ``ApiError`` with status 404 (a route, a KV key or namespace), over either
protocol. Shapes: cluster info as ClusterInfo JSON, a route as TopicRouteData JSON (``brokerAddrs``
keys are strings, as the HTTP API writes them), topic lists sorted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from nsfleet.client.connection import ConnectOptions, is_http
from nsfleet.client.http import ApiError, FleetHttp
from nsfleet.client.http_name_service import HttpNameService
from nsfleet.client.pipeline import PipelinedNamesrv
from nsfleet.client.remoting import NamesrvClient
from nsfleet.client.remoting_name_service import RemotingNameService

Progress = Callable[[int], None]  # told how many more topics were read


class ControllerService(Protocol):
    """RocketMQ 5's controller behind a name service (every nsfleet worker hosts one), in the
    HTTP API's shapes whichever protocol answers: a broker set is {brokerName, clusterName,
    masterBrokerId, masterAddress, masterEpoch, syncStateSet, syncStateSetEpoch, replicas
    [{brokerId, brokerAddress, alive, inSync}]}. A refusal raises ApiError with Java's code
    (2000-2014) and a message starting "response code N: " and its remark, over either."""

    async def metadata(self) -> dict[str, Any]: ...

    async def config(self) -> dict[str, str]: ...

    async def update_config(self, values: dict[str, str]) -> None:
        """UPDATE_CONTROLLER_CONFIG, fleet-wide."""
        ...

    async def broker_sets(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The sets named that the controller knows, in that order; no names: every set."""
        ...

    async def import_set(self, broker_set: dict[str, Any],
                         grace_seconds: float) -> dict[str, Any]:
        """A set as another controller answers it, written unless the fleet has it or has moved
        past it: {imported, brokerSet}. HTTP only."""
        ...

    async def elect(self, broker_name: str, broker_id: int) -> dict[str, Any]:
        """A designated election: the set as it left it."""
        ...

    async def clean(self, broker_name: str, broker_ids: Sequence[int],
                    living: bool) -> dict[str, Any]: ...


class NameService(Protocol):
    label: str  # the addresses, for reports
    protocol: str  # "HTTP" or "remoting", for messages
    heartbeats_known: bool  # brokers() carries heartbeat ages and deadlines
    controller: ControllerService

    async def cluster_info(self) -> dict[str, Any]: ...

    async def brokers(self) -> list[dict[str, Any]]: ...

    async def route(self, topic: str) -> dict[str, Any]: ...

    async def routes(self, topics: Sequence[str],
                     progress: Progress) -> dict[str, dict[str, Any] | None]: ...

    async def topics(self, cluster: str | None = None) -> list[str]: ...

    async def delete_topic(self, topic: str, cluster: str | None) -> int | None: ...

    async def write_perm(self, broker: str, wipe: bool) -> int: ...

    async def kv_get(self, namespace: str, key: str) -> str: ...

    async def kv_put(self, namespace: str, key: str, value: str) -> bool | None: ...

    async def kv_delete(self, namespace: str, key: str) -> bool | None: ...

    async def kv_namespaces(self) -> list[str] | None: ...

    async def kv_table(self, namespace: str) -> dict[str, str]: ...

    async def config(self) -> dict[str, str]: ...

    async def config_set(self, values: dict[str, str]) -> dict[str, str] | None: ...

    async def changes(self, limit: int) -> dict[str, Any]: ...

    async def close(self) -> None: ...


def open_name_service(spec: str, opts: ConnectOptions, *, bulk: bool = False) -> NameService:
    """``http(s)://...[,...]``: an nsfleet fleet's HTTP API; else remoting addresses, each with
    the options its protocol uses. ``bulk``: remoting requests pipelined on two connections
    to the first NameServer that accepts them (reading a side whole), else one request per
    connection with failover through the list (mqadmin's way)."""
    if is_http(spec):
        return HttpNameService(FleetHttp(spec, timeout=opts.timeout, token=opts.token))
    transport = PipelinedNamesrv if bulk else NamesrvClient
    return RemotingNameService(transport(spec, timeout=opts.timeout, tls=opts.tls,
                                         access_key=opts.access_key,
                                         secret_key=opts.secret_key))


async def kv_tables(side: NameService,
                    namespaces: Iterable[str]) -> dict[str, dict[str, str] | None]:
    """Several KV namespaces at once; None for one the side does not hold."""

    async def table(namespace: str) -> dict[str, str] | None:
        try:
            return await side.kv_table(namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    names = sorted(set(namespaces))
    tables = await asyncio.gather(*(table(ns) for ns in names))
    return dict(zip(names, tables, strict=True))
