"""RocketMQ 5's controller over the remoting protocol, as mqadmin's controller commands ask it
(``client/name_service.py`` has the interface): GET_METADATA_INFO (1005), GET_SYNC_STATE_DATA
(1006), GET_CONTROLLER_CONFIG (1010), ELECT_MASTER (1002, designated) and CLEAN_BROKER_DATA
(1011), answered in the HTTP API's shapes. A broker set's cluster is not in these answers: it
is read from the cluster info (106) of the same address, where the set's brokers registered;
a controller that is no NameServer (its own port) leaves it unknown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nsfleet.client.remoting import call_ok
from nsfleet.domain.errors import ResponseCode
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.wire.codec import RemotingCommand, RequestCode
from nsfleet.wire.fastjson import dumps_standard, loads_lenient

if TYPE_CHECKING:
    from nsfleet.client.remoting_name_service import Transport

NO_REMOTING_IMPORT = ("no remoting request writes a whole broker set: import through an nsfleet "
                      "worker's HTTP API (--server URL)")
METADATA_FIELDS = ("group", "controllerLeaderId", "controllerLeaderAddress", "isLeader", "peers")


def _int(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def _replicas(info: dict[str, Any]) -> list[dict[str, Any]]:
    """BrokerReplicasInfo's in-sync and not-in-sync replicas as one list, by id."""
    rows = [{"brokerId": int(r["brokerId"]), "brokerAddress": r.get("brokerAddress", ""),
             "alive": bool(r.get("alive")), "inSync": in_sync}
            for field, in_sync in (("inSyncReplicas", True), ("notInSyncReplicas", False))
            for r in info.get(field) or []]
    return sorted(rows, key=lambda r: r["brokerId"])


class RemotingController:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def _ok(self, code: int, ext: dict[str, str] | None = None,
                  body: bytes | None = None) -> RemotingCommand:
        return await call_ok(self.transport.call, code, ext, body)

    async def _clusters(self) -> dict[str, str]:
        """brokerName -> cluster, from the cluster info; none from a controller that does not
        answer it."""
        resp = await self.transport.call(RequestCode.GET_BROKER_CLUSTER_INFO)
        if resp.code != ResponseCode.SUCCESS:
            return {}
        table = loads_lenient(resp.body or b"{}").get("brokerAddrTable") or {}
        return {name: group.get("cluster") for name, group in table.items()}

    async def metadata(self) -> dict[str, Any]:
        ext = (await self._ok(RequestCode.CONTROLLER_GET_METADATA_INFO)).ext_fields or {}
        meta: dict[str, Any] = {k: ext.get(k) for k in METADATA_FIELDS}
        meta["isLeader"] = ext.get("isLeader") == "true"
        return meta

    async def config(self) -> dict[str, str]:
        resp = await self._ok(RequestCode.GET_CONTROLLER_CONFIG)
        return parse_properties((resp.body or b"").decode("utf-8", "replace"))

    async def update_config(self, values: dict[str, str]) -> None:
        await self._ok(RequestCode.UPDATE_CONTROLLER_CONFIG,
                       body=format_properties(values).encode())

    async def broker_sets(self, names: Sequence[str]) -> list[dict[str, Any]]:
        if not names:
            raise ValueError("name the broker sets: over the remoting protocol "
                             "GET_SYNC_STATE_DATA answers only the sets it is asked for (every "
                             "set: an nsfleet worker's HTTP API, --server URL)")
        return await self._sets(names, await self._clusters())

    async def _sets(self, names: Sequence[str],
                    clusters: dict[str, str]) -> list[dict[str, Any]]:
        wanted = list(dict.fromkeys(names))
        resp = await self._ok(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                              body=dumps_standard(wanted))
        table = loads_lenient(resp.body or b"{}").get("replicasInfoTable") or {}
        return [{"brokerName": name, "clusterName": clusters.get(name),
                 "masterBrokerId": _int(info.get("masterBrokerId")),
                 "masterAddress": info.get("masterAddress") or None,
                 "masterEpoch": int(info.get("masterEpoch") or 0),
                 "syncStateSet": sorted(int(r["brokerId"])
                                        for r in info.get("inSyncReplicas") or []),
                 "syncStateSetEpoch": int(info.get("syncStateSetEpoch") or 0),
                 "replicas": _replicas(info)}
                for name in wanted if (info := table.get(name)) is not None]

    async def import_set(self, broker_set: dict[str, Any],
                         grace_seconds: float) -> dict[str, Any]:
        raise ValueError(NO_REMOTING_IMPORT)

    async def elect(self, broker_name: str, broker_id: int) -> dict[str, Any]:
        clusters = await self._clusters()
        cluster = clusters.get(broker_name)
        resp = await self._ok(RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": cluster or "", "brokerName": broker_name,
            "brokerId": str(broker_id), "designateElect": "true"})
        ext, body = resp.ext_fields or {}, loads_lenient(resp.body or b"{}")
        group = body.get("brokerMemberGroup") or {}
        sync_state_set = sorted(int(i) for i in body.get("syncStateSet") or [])
        # The answer names every replica's address; whether each is alive, only a read says.
        alive = {r["brokerId"]: r["alive"] for s in await self._sets([broker_name], clusters)
                 for r in s["replicas"]}
        addrs = sorted((int(i), a) for i, a in (group.get("brokerAddrs") or {}).items())
        return {"brokerName": broker_name, "clusterName": group.get("cluster") or cluster,
                "masterBrokerId": _int(ext.get("masterBrokerId")),
                "masterAddress": ext.get("masterAddress") or None,
                "masterEpoch": int(ext.get("masterEpoch") or 0),
                "syncStateSet": sync_state_set,
                "syncStateSetEpoch": int(ext.get("syncStateSetEpoch") or 0),
                "replicas": [{"brokerId": i, "brokerAddress": a, "alive": alive.get(i, False),
                              "inSync": i in sync_state_set} for i, a in addrs]}

    async def clean(self, broker_name: str, broker_ids: Sequence[int],
                    living: bool) -> dict[str, Any]:
        ext = {"clusterName": (await self._clusters()).get(broker_name) or "",
               "brokerName": broker_name, "isCleanLivingBroker": str(living).lower()}
        if broker_ids:
            ext["brokerControllerIdsToClean"] = ";".join(map(str, broker_ids))
        await self._ok(RequestCode.CLEAN_BROKER_DATA, ext)
        return {"brokerName": broker_name, "brokerIds": list(broker_ids),
                "cleanLivingBroker": living}
