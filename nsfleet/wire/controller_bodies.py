"""The controller's bodies as Java's fastjson writes them (fields in name order, Long map keys
bare): SyncStateSet, ElectMasterResponseBody, BrokerReplicasInfo; and the SyncStateSet a master
proposes."""

from __future__ import annotations

from typing import Any

from nsfleet.domain.controller import BrokerSet, Election
from nsfleet.domain.errors import BodyDecodeError
from nsfleet.wire.fastjson import dumps_legacy, loads_lenient


def sync_state_set(ids: tuple[int, ...], epoch: int) -> bytes:
    return dumps_legacy({"syncStateSet": list(ids), "syncStateSetEpoch": epoch})


def elect_master_body(election: Election, *, with_group: bool = True) -> bytes:
    """ElectMasterResponseBody: the member group (every replica's address) when a master was
    elected; the SyncStateSet alone when the old one stays (2011)."""
    body: dict[str, Any] = {}
    if with_group:
        body["brokerMemberGroup"] = {
            "brokerAddrs": {r.broker_id: r.address for r in election.replicas},
            "brokerName": election.broker_name, "cluster": election.cluster}
    body["syncStateSet"] = list(election.sync_state_set)
    return dumps_legacy(body)


def replicas_info(sets: list[BrokerSet]) -> bytes:
    """BrokerReplicasInfo (GET_SYNC_STATE_DATA)."""
    table: dict[str, Any] = {}
    for s in sets:
        def identity(r: Any, name: str = s.broker_name) -> dict[str, Any]:
            return {"alive": r.alive, "brokerAddress": r.address, "brokerId": r.broker_id,
                    "brokerName": name}
        info: dict[str, Any] = {
            "inSyncReplicas": [identity(r) for r in s.replicas
                               if r.broker_id in s.sync_state_set]}
        if s.master_address:
            info["masterAddress"] = s.master_address
        if s.master_id is not None:
            info["masterBrokerId"] = s.master_id
        info["masterEpoch"] = s.master_epoch
        info["notInSyncReplicas"] = [identity(r) for r in s.replicas
                                     if r.broker_id not in s.sync_state_set]
        info["syncStateSetEpoch"] = s.sync_state_set_epoch
        table[s.broker_name] = info
    return dumps_legacy({"replicasInfoTable": table})


def read_sync_state_set(body: bytes | None) -> tuple[list[int], int]:
    """The SyncStateSet an ALTER_SYNC_STATE_SET proposes: (ids, the epoch it was read at)."""
    try:
        parsed = loads_lenient(body or b"")
        ids = [int(i) for i in parsed.get("syncStateSet") or []]
        return ids, int(parsed.get("syncStateSetEpoch") or 0)
    except (ValueError, TypeError, AttributeError) as exc:
        raise BodyDecodeError(f"not a SyncStateSet: {exc}") from None


def read_names(body: bytes | None) -> list[str]:
    """GET_SYNC_STATE_DATA's body: a JSON list of broker set names."""
    try:
        parsed = loads_lenient(body) if body else []
    except ValueError as exc:
        raise BodyDecodeError(f"not a list of broker names: {exc}") from None
    if not isinstance(parsed, list):
        raise BodyDecodeError("not a list of broker names")
    return [str(n) for n in parsed]
