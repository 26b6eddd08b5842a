"""The controller's tables (RocketMQ 5 controller mode, docs/controller.md): broker sets, their
replicas and the replicas' liveness, changed only by ``lua/controller_*.lua``, each one step of
Java's ReplicasInfoManager with its event, so any worker may serve any request and two workers
acting on one failure make one election."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nsfleet.domain.controller import (
    BrokerSet,
    ControllerHeartbeat,
    Election,
    Outcome,
    Replica,
    id_set,
)
from nsfleet.store import scripts
from nsfleet.store.keys import replica_member
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.replies import Reply, Status
from nsfleet.store.script_calls import ScriptCalls, flag


@dataclass(frozen=True, slots=True)
class SetHealth:
    """A broker set as the scan sees it."""

    broker_name: str
    master_id: int | None
    master_epoch: int
    master_alive: bool
    sync_state_set_size: int
    any_alive: bool

    @property
    def wants_election(self) -> bool:
        """Its master is not alive while another replica is (scanNeedReelectBrokerSets)."""
        return self.master_id is not None and not self.master_alive and self.any_alive


def _election(name: str, status: Status, rest: list[Any]) -> Election:
    """controller.lua's elect() answer as an Election."""
    outcome = Outcome.ELECTED if status is Status.OK else Outcome(str(status))
    if outcome not in (Outcome.ELECTED, Outcome.STILL):
        return Election(outcome, name)
    master, addr, master_epoch, sss_epoch, sss, cluster, *flat = rest
    replicas = tuple(Replica(int(flat[i]), flat[i + 1], flat[i + 2] == "1")
                     for i in range(0, len(flat), 3))
    return Election(outcome, name, cluster, int(master), addr, int(master_epoch), id_set(sss),
                    int(sss_epoch), replicas)


@translating_redis_errors
class ControllerTables:
    def __init__(self, calls: ScriptCalls) -> None:
        self._calls = calls
        self._keys = calls.keys

    async def next_broker_id(self, broker_name: str) -> int:
        """GET_NEXT_BROKER_ID: 1 for an unknown set."""
        found = await self._calls.redis.hget(self._keys.ctl_set(broker_name), "nextBrokerId")
        return int(found) if found else 1

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int,
                              check_code: str) -> Status:
        """APPLY_BROKER_ID: OK, UNREGISTERED (an unknown set and an id other than 1) or TAKEN."""
        status, _ = await self._calls.call("controller_apply_id", scripts.ControllerApplyIdArgs(
            cluster, broker_name, broker_id, check_code))
        return status

    async def register(self, broker_name: str, broker_id: int, address: str) -> Reply:
        """CONTROLLER_REGISTER_BROKER: the script's reply (controller_register.lua)."""
        return await self._calls.call("controller_register", scripts.ControllerRegisterArgs(
            broker_name, broker_id, address))

    async def heartbeat(self, hb: ControllerHeartbeat, connection: str) -> None:
        await self._calls.call("controller_heartbeat", scripts.ControllerHeartbeatArgs(
            hb.cluster, hb.broker_name, hb.broker_addr, hb.broker_id, hb.epoch, hb.max_offset,
            hb.confirm_offset, hb.timeout_ms, hb.election_priority, connection))

    async def elect(self, broker_name: str, requester: int | None, *, designate: bool,
                    unclean: bool, expected_epoch: int | None = None) -> Election:
        """ELECT_MASTER from a broker or the admin (``requester``), or the controller's trigger
        (None), fenced by ``expected_epoch`` (the masterEpoch the trigger saw)."""
        status, rest = await self._calls.call("controller_elect", scripts.ControllerElectArgs(
            broker_name, "" if requester is None else requester, flag(designate), flag(unclean),
            "" if expected_epoch is None else expected_epoch))
        return _election(broker_name, status, rest)

    async def inactive(self, broker_name: str, broker_id: int, *, connection: str = "",
                       grace_ms: int = 0, unclean: bool) -> Election | None:
        """A replica's connection closed (``connection``) or its deadline passed: None while it
        is still alive; else, if it was its set's master, the election that followed (an
        Election with outcome FENCED when it was not the master)."""
        status, rest = await self._calls.call("controller_inactive", scripts.ControllerInactiveArgs(
            broker_name, broker_id, connection, grace_ms, flag(unclean)))
        if status is Status.KEPT:
            return None
        if not rest:
            return Election(Outcome.FENCED, broker_name)
        return _election(broker_name, Status(rest[0]), rest[1:])

    async def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int,
                                   sss_epoch: int, ids: Sequence[int]) -> Reply:
        return await self._calls.call(
            "controller_alter_sync_state_set", scripts.ControllerAlterSyncStateSetArgs(
                broker_name, master_id, master_epoch, sss_epoch, ids))

    async def clean(self, broker_name: str, ids: Sequence[int], *, living: bool) -> Reply:
        return await self._calls.call("controller_clean", scripts.ControllerCleanArgs(
            broker_name, flag(living), ids))

    async def import_set(self, s: BrokerSet, grace_ms: int) -> Reply:
        """A set as a Java controller holds it (controller_import.lua): OK, SAME, BEHIND or
        CONFLICT (with the fleet's masterEpoch or master)."""
        return await self._calls.call("controller_import", scripts.ControllerImportArgs(
            s.cluster, s.broker_name, "" if s.master_id is None else s.master_id,
            s.master_epoch, ";".join(map(str, s.sync_state_set)), s.sync_state_set_epoch,
            grace_ms, [f"{r.broker_id};{r.address};{flag(r.alive)}" for r in s.replicas]))

    async def scan(self, batch: int, *, reelect: bool
                   ) -> tuple[list[tuple[str, int]], list[SetHealth]]:
        """(replicas past their deadline, with ``reelect`` every broker set's health)."""
        _, (expired, flat) = await self._calls.call(
            "controller_scan", scripts.ControllerScanArgs(batch, flag(reelect)))
        return ([(expired[i], int(expired[i + 1])) for i in range(0, len(expired), 2)],
                [SetHealth(flat[i], int(flat[i + 1]) if flat[i + 1] else None,
                           int(flat[i + 2]), flat[i + 3] == "1", int(flat[i + 4]),
                           flat[i + 5] == "1") for i in range(0, len(flat), 6)])

    async def broker_set(self, broker_name: str, *, replicas: bool = False) -> BrokerSet | None:
        """One broker set (with its replicas when asked), or None when unknown."""
        redis, k = self._calls.redis, self._keys
        row = await redis.hgetall(k.ctl_set(broker_name))
        if not row:
            return None
        found: tuple[Replica, ...] = ()
        if replicas:
            ids = sorted(int(i) for i in await redis.smembers(k.ctl_ids(broker_name)))
            pipe = redis.pipeline(transaction=False)
            for i in ids:
                pipe.hget(k.ctl_replica(broker_name, i), "brokerAddress")
            pipe.time()
            for i in ids:
                pipe.zscore(k.ctl_deadlines, replica_member(broker_name, i))
            out = await pipe.execute()
            addrs, (seconds, micros), deadlines = out[:len(ids)], out[len(ids)], out[len(ids) + 1:]
            now = seconds * 1000 + micros // 1000
            found = tuple(Replica(i, a or "", d is not None and d >= now)
                          for i, a, d in zip(ids, addrs, deadlines, strict=True))
        master = row.get("masterBrokerId", "")
        return BrokerSet(broker_name, row.get("clusterName", ""), int(row.get("nextBrokerId", 1)),
                         int(master) if master else None, row.get("masterAddress", ""),
                         int(row.get("masterEpoch", 0)), id_set(row.get("syncStateSet", "")),
                         int(row.get("syncStateSetEpoch", 0)), found)

    async def read_config(self) -> dict[str, str]:
        """The controller's settings changed at run time, fleet-wide (P:ctl:config)."""
        return dict(await self._calls.redis.hgetall(self._keys.ctl_config))

    async def write_config(self, values: dict[str, str]) -> None:
        await self._calls.redis.hset(self._keys.ctl_config, mapping=values)

    async def broker_set_names(self) -> list[str]:
        return sorted(await self._calls.redis.smembers(self._keys.ctl_sets))
