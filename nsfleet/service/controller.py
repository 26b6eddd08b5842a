"""RocketMQ 5's controller on the fleet (docs/controller.md): automatic master failover for
brokers in controller mode, its state in Redis (``store.controller``), no Raft group to run.

Every worker answers every controller request as the leader: Redis orders the writes, and each
write is one script fenced by the epochs it was given. Elections happen on a broker's own
ELECT_MASTER, when the connection its heartbeats came over closes, when its deadline passes
(the scan, every ``scan_interval`` seconds in every worker) and for sets whose master is no
longer alive; the worker whose script elected tells the live replicas
(NOTIFY_BROKER_ROLE_CHANGED, through ``on_elected``). While Redis is away nothing is elected:
the scripts are the only way to elect, and the scan resumes with the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from nsfleet.domain.controller import (
    BrokerSet,
    ControllerHeartbeat,
    Election,
    Outcome,
    id_set,
)
from nsfleet.domain.errors import (
    ConfigBlacklisted,
    ConfigUnparsable,
    ControllerRefused,
    ImportRefused,
    NameServerError,
    ResponseCode,
)
from nsfleet.domain.java import parse_boolean
from nsfleet.domain.java_properties import parse_properties
from nsfleet.metrics import Metrics
from nsfleet.service.history import ChangeRecorder
from nsfleet.store import RouteStore
from nsfleet.store.controller_tables import SetHealth
from nsfleet.store.replies import Status

log = structlog.get_logger(__name__)
SCAN_BATCH = 100
REELECT_EVERY = 5  # scans: the look for masterless sets is O(sets), the expiry one O(due)
# What UPDATE_CONTROLLER_CONFIG may change here (ControllerConfig's fields that change what
# nsfleet's controller does) and what it may never change (ControllerConfig.configBlackList).
CONFIG_KEYS = frozenset({"enableElectUncleanMaster", "notifyBrokerRoleChanged"})
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath"})
# A replica whose connection's worker died is given this long past its deadline to find
# another worker (brokers look up the controller again every 10 s) before it counts as dead.
WORKER_LOSS_GRACE_MS = 30_000


@dataclass
class ControllerOptions:
    """ControllerConfig's values that change behaviour (their Java names in the comments)."""

    unclean: bool = False  # enableElectUncleanMaster
    default_unclean: bool = False  # --controller-elect-unclean: until the fleet's config says
    notify_role_changed: bool = True  # notifyBrokerRoleChanged
    scan_interval: float = 1.0  # scanNotActiveBrokerInterval (Java: 5 s)
    # A worker just started scans for nothing this long: brokers whose workers all restarted
    # (a rollout, a whole-fleet restart) need a moment to reconnect and heartbeat again, and
    # the presence keys of the workers they left outlive a quick restart.
    startup_grace: float = 15.0
    leader_address: str = ""  # what GET_METADATA_INFO names as leader: this worker
    leader_id: str = ""


def _refused(code: ResponseCode, remark: str) -> ControllerRefused:
    return ControllerRefused(code, remark)


def still_remark(election: Election) -> str:
    """CONTROLLER_MASTER_STILL_EXIST's remark."""
    return (f"The old master {election.master_id} is still alive, not need to elect new master "
            f"for broker {election.broker_name}")


class Controller:
    def __init__(self, store: RouteStore, metrics: Metrics, history: ChangeRecorder,
                 options: ControllerOptions | None = None) -> None:
        self._tables = store.controller
        self.metrics = metrics
        self.history = history
        self.options = options or ControllerOptions()
        # Told of every election this worker's scripts made (the remoting front end notifies).
        self.on_elected: list[Callable[[Election], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._scans = 0
        self._grace_until = 0.0  # monotonic time: see ControllerOptions.startup_grace
        self._reported: set[str] = set()  # broker sets with a SyncStateSet size gauge

    # --- requests ------------------------------------------------------------------------------

    async def update_config(self, text: str) -> None:
        """UPDATE_CONTROLLER_CONFIG: Java Properties text; the settings nsfleet's controller
        has (``CONFIG_KEYS``) apply to every worker at its next scan, the others are ignored as
        Java ignores a key no field has; the black list's keys are refused."""
        try:
            values = parse_properties(text)
        except ValueError:
            raise ConfigUnparsable() from None
        blocked = sorted(set(values) & CONFIG_BLACK_LIST)
        if blocked:
            raise ConfigBlacklisted(", ".join(blocked))
        known = {k: str(parse_boolean(v)).lower() for k, v in values.items()
                 if k in CONFIG_KEYS}
        if known:
            await self._tables.write_config(known)
            await self.history.record("controller config updated", **known)
        await self.refresh_config()

    async def refresh_config(self) -> None:
        """The fleet-wide settings (UPDATE_CONTROLLER_CONFIG), over the command line's."""
        found = await self._tables.read_config()
        o = self.options
        o.unclean = found.get("enableElectUncleanMaster", str(o.default_unclean).lower()) == "true"
        o.notify_role_changed = found.get("notifyBrokerRoleChanged", "true") == "true"

    def config_text(self) -> str:
        """GET_CONTROLLER_CONFIG: ControllerConfig's behaviour, as Java Properties text."""
        o = self.options
        values = {"configBlackList": ";".join(sorted(CONFIG_BLACK_LIST)),
                  "controllerType": "nsfleet", "electMasterMaxRetryCount": "1",
                  "enableControllerInNamesrv": "true",
                  "enableElectUncleanMaster": str(o.unclean).lower(),
                  "notifyBrokerRoleChanged": str(o.notify_role_changed).lower(),
                  "scanInactiveMasterInterval": str(round(o.scan_interval * REELECT_EVERY * 1000)),
                  "scanNotActiveBrokerInterval": str(round(o.scan_interval * 1000))}
        return "".join(f"{k}={v}\n" for k, v in sorted(values.items()))

    def metadata(self) -> dict[str, str]:
        """GET_METADATA_INFO: this worker is the leader (every worker is)."""
        o = self.options
        return {"group": "nsfleet", "controllerLeaderId": o.leader_id,
                "controllerLeaderAddress": o.leader_address, "isLeader": "true",
                "peers": f"{o.leader_id}:{o.leader_address};"}

    async def next_broker_id(self, cluster: str, name: str) -> dict[str, str]:
        next_id = await self._tables.next_broker_id(name)
        return {"clusterName": cluster, "brokerName": name, "nextBrokerId": str(next_id)}

    async def apply_broker_id(self, cluster: str, name: str, broker_id: int,
                              check_code: str) -> dict[str, str]:
        status = await self._tables.apply_broker_id(cluster, name, broker_id, check_code)
        if status is Status.UNREGISTERED:
            raise _refused(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"Broker-set: {name} hasn't been registered in controller, but "
                           f"broker try to apply brokerId: {broker_id}")
        if status is Status.TAKEN:
            raise _refused(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"Fail to apply brokerId: {broker_id} in broker-set: {name}")
        return {"clusterName": cluster, "brokerName": name}

    async def register(self, cluster: str, name: str, broker_id: int,
                       address: str) -> tuple[dict[str, str], tuple[int, ...], int]:
        """CONTROLLER_REGISTER_BROKER: (header, SyncStateSet, its epoch)."""
        status, rest = await self._tables.register(name, broker_id, address)
        if status is Status.UNKNOWN:
            raise _refused(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"Broker-set: {name} hasn't been registered in controller")
        if status is Status.UNASSIGNED:
            raise _refused(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}")
        master, addr, master_epoch, sss_epoch, sss = rest
        ext = {"clusterName": cluster, "brokerName": name}
        if master:
            ext |= {"masterBrokerId": master, "masterAddress": addr, "masterEpoch": master_epoch,
                    "syncStateSetEpoch": sss_epoch}
        return ext, id_set(sss), int(sss_epoch)

    async def heartbeat(self, hb: ControllerHeartbeat, connection: str) -> None:
        await self._tables.heartbeat(hb, connection)

    async def elect(self, name: str, broker_id: int | None, *, designate: bool) -> Election:
        """ELECT_MASTER from a broker or (``designate``) the admin: the new master, or
        (outcome STILL, 2011) the old one that stays."""
        election = await self._tables.elect(name, broker_id, designate=designate,
                                            unclean=self.options.unclean)
        if election.outcome is Outcome.UNKNOWN:
            raise _refused(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           "Broker hasn't been registered")
        if election.outcome is Outcome.FAILED:
            raise _refused(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                           "Failed to elect a new master")
        if election.outcome is Outcome.STILL:
            return election
        await self._elected(election, "requested by a broker" if not designate
                            else "designated by the admin")
        return election

    async def replica_info(self, name: str) -> BrokerSet:
        """GET_REPLICA_INFO."""
        found = await self._tables.broker_set(name)
        if found is None:
            raise _refused(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                           "Broker metadata is not existed")
        return found

    async def sync_state_data(self, names: Sequence[str]) -> list[BrokerSet]:
        """GET_SYNC_STATE_DATA: the known sets among ``names``, with their replicas."""
        found = [await self._tables.broker_set(n, replicas=True) for n in names]
        return [s for s in found if s is not None]

    async def broker_sets(self) -> list[BrokerSet]:
        """Every broker set, with its replicas (admin, console, metrics)."""
        return await self.sync_state_data(await self._tables.broker_set_names())

    async def alter_sync_state_set(self, name: str, master_id: int, master_epoch: int,
                                   ids: Sequence[int],
                                   sss_epoch: int) -> tuple[int, tuple[int, ...]]:
        """ALTER_SYNC_STATE_SET: (the new epoch, the new set)."""
        status, rest = await self._tables.alter_sync_state_set(name, master_id, master_epoch,
                                                               sss_epoch, ids)
        if status is Status.OK:
            return int(rest[0]), id_set(rest[1])
        why = "Rejecting alter syncStateSet request because"
        current = rest[0] if rest else ""
        code, remark = {
            Status.UNKNOWN: (ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                            "Broker metadata is not existed"),
            Status.SAME: (ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                          "The newSyncStateSet is equal with oldSyncStateSet, no needed to "
                          "update syncStateSet"),
            Status.MASTER: (ResponseCode.CONTROLLER_INVALID_MASTER,
                            f"{why} the current leader is:{{{current or 'null'}}}, "
                            f"not {{{master_id}}}"),
            Status.FENCED: (ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                                  f"{why} the current master epoch is:{{{current}}}, "
                                  f"not {{{master_epoch}}}"),
            Status.STALE: (ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               f"{why} the current syncStateSet epoch is:{{{current}}}, "
                               f"not {{{sss_epoch}}}"),
            Status.STRANGER: (ResponseCode.CONTROLLER_INVALID_REPLICAS,
                                f"{why} the replicas {{{current}}} don't exist"),
            Status.DEAD: (ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                               f"{why} the replicas {{{current}}} don't alive"),
            Status.LEADERLESS: (ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               f"{why} the newSyncStateSet don't contains origin leader "
                               f"{{{current}}}"),
        }[status]
        raise _refused(code, remark)

    async def clean(self, name: str, ids: Sequence[int], *, living: bool) -> None:
        """CLEAN_BROKER_DATA."""
        if living:  # Java reads the ids only when not cleaning living brokers: all go
            ids = ()
        status, rest = await self._tables.clean(name, ids, living=living)
        code = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        if status is Status.MASTER:
            raise ControllerRefused(code, f"Broker {name} is still alive, clean up failure")
        if status is Status.ALIVE:
            raise ControllerRefused(
                code, f"Broker [{name},  {rest[0]}] is still alive, clean up failure")
        if status is Status.UNKNOWN:
            raise ControllerRefused(
                code, f"Broker {name} is not existed,clean broker data failure.")
        await self.history.record("controller data cleaned", broker_name=name,
                                  broker_ids=";".join(map(str, ids)), living=living)

    async def import_set(self, s: BrokerSet, grace_ms: int) -> bool:
        """A set moved from a Java controller (controller_import.lua): True when written,
        False when the fleet held it already; refused (409) when the fleet has moved past it."""
        status, rest = await self._tables.import_set(s, grace_ms)
        if status is Status.SAME:
            return False
        if status is Status.BEHIND:
            raise ImportRefused(f"the fleet's masterEpoch of {s.broker_name} is {rest[0]}, newer "
                                f"than the imported {s.master_epoch}: nothing written")
        if status is Status.CONFLICT:
            wanted = "none" if s.master_id is None else s.master_id
            raise ImportRefused(f"the fleet's master of {s.broker_name} at masterEpoch "
                                f"{s.master_epoch} is {rest[0] or 'none'}, not {wanted}: "
                                "nothing written")
        await self.history.record("broker set imported", broker_name=s.broker_name,
                                  master_id=s.master_id, master_epoch=s.master_epoch,
                                  sync_state_set=";".join(map(str, s.sync_state_set)),
                                  sync_state_set_epoch=s.sync_state_set_epoch)
        log.info("controller broker set imported", broker_name=s.broker_name,
                 master_id=s.master_id, master_epoch=s.master_epoch)
        return True

    # --- failures noticed ----------------------------------------------------------------------

    async def connection_closed(self, replicas: Sequence[tuple[str, int]],
                                connection: str) -> None:
        """The connection ``replicas``' heartbeats came over closed (onChannelClose)."""
        for name, broker_id in replicas:
            election = await self._tables.inactive(name, broker_id, connection=connection,
                                                   unclean=self.options.unclean)
            if election is not None:
                await self._after_inactive(election, name, broker_id, "its connection closed")

    async def scan_once(self) -> None:
        """Expire replicas past their deadline, and every REELECT_EVERY scans re-elect sets
        whose master is not alive while another replica is (scanNeedReelectBrokerSets)."""
        self._scans += 1
        if self._scans % REELECT_EVERY == 1:
            await self.refresh_config()
        if time.monotonic() < self._grace_until:
            return
        expired, _ = await self._tables.scan(SCAN_BATCH, reelect=False)
        for name, broker_id in expired:
            election = await self._tables.inactive(name, broker_id, grace_ms=WORKER_LOSS_GRACE_MS,
                                                   unclean=self.options.unclean)
            if election is not None:
                await self._after_inactive(election, name, broker_id, "silent past its deadline")
        if self._scans % REELECT_EVERY != 1:
            return
        _, sets = await self._tables.scan(0, reelect=True)
        mastered: set[str] = set()  # sets given a master by this scan
        for health in sets:
            if health.wants_election:
                election = await self._tables.elect(
                    health.broker_name, None, designate=False, unclean=self.options.unclean,
                    expected_epoch=health.master_epoch)
                if election.outcome in (Outcome.ELECTED, Outcome.NONE):
                    await self._elected(election, "the master is not alive")
                if election.outcome is Outcome.ELECTED:
                    mastered.add(health.broker_name)
        self._report(sets, mastered)

    def _report(self, sets: Sequence[SetHealth], mastered: set[str]) -> None:
        m = self.metrics
        m.controller_sets_without_master.set(
            sum(not s.master_alive and s.broker_name not in mastered for s in sets))
        names = {s.broker_name for s in sets}
        for name in self._reported - names:  # a set cleaned away
            m.controller_sync_state_set_size.remove(name)
        for s in sets:
            m.controller_sync_state_set_size.labels(s.broker_name).set(
                1 if s.broker_name in mastered else s.sync_state_set_size)
        self._reported = names

    async def _after_inactive(self, election: Election, name: str, broker_id: int,
                              why: str) -> None:
        log.info("controller replica inactive", broker_name=name, broker_id=broker_id,
                 reason=why, was_master=election.outcome is not Outcome.FENCED)
        if election.outcome in (Outcome.ELECTED, Outcome.NONE):
            await self._elected(election, f"master {broker_id} {why}")

    async def _elected(self, election: Election, why: str) -> None:
        self.metrics.controller_elections.labels(str(election.outcome)).inc()
        fields = {"broker_name": election.broker_name, "reason": why,
                  "outcome": str(election.outcome)}
        if election.outcome is Outcome.ELECTED:
            fields |= {"master_id": election.master_id, "master_address": election.master_address,
                       "master_epoch": election.master_epoch}
        log.info("controller election", **fields)
        await self.history.record("master elected" if election.outcome is Outcome.ELECTED
                                  else "master lost", **fields)
        if election.outcome is Outcome.ELECTED and self.options.notify_role_changed:
            for callback in self.on_elected:
                callback(election)

    # --- running -------------------------------------------------------------------------------

    def start(self) -> None:
        self._grace_until = time.monotonic() + self.options.startup_grace
        self._task = asyncio.create_task(self._scan_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _scan_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.scan_interval)
            try:
                await self.scan_once()
            except NameServerError as exc:  # the store away: nothing is elected meanwhile
                log.warning("controller scan failed", error=exc.remark)


def election_header(election: Election) -> dict[str, str]:
    """ELECT_MASTER's response header (also a NOTIFY_BROKER_ROLE_CHANGED's)."""
    return {"masterBrokerId": str(election.master_id),
            "masterAddress": election.master_address,
            "masterEpoch": str(election.master_epoch),
            "syncStateSetEpoch": str(election.sync_state_set_epoch)}


