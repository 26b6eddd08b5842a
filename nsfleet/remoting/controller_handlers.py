"""One handler per controller request code (RocketMQ 5 controller mode, docs/controller.md), as
Java's ControllerRequestProcessor answers them: the same codes, remarks, response headers (a
controller answer carries its response header's fields even when it refuses) and fastjson
bodies. A header field Java requires (@CFNotNull) and the request lacks is Java's decode error.
"""

from __future__ import annotations

from typing import Any

from nsfleet.domain.controller import DEFAULT_HEARTBEAT_TIMEOUT_MS, ControllerHeartbeat, Outcome
from nsfleet.domain.errors import BadRequest, ControllerRefused, ResponseCode
from nsfleet.remoting.handlers import Connection, Endpoint, broker_heartbeat, ok
from nsfleet.service.controller import election_header, still_remark
from nsfleet.service.nameserver import NameServer
from nsfleet.wire import controller_bodies as bodies
from nsfleet.wire.codec import RemotingCommand, RequestCode, make_response
from nsfleet.wire.controller_headers import (
    AlterSyncStateSetHeader,
    ApplyBrokerIdHeader,
    BrokerHeartbeatHeader,
    BrokerSetHeader,
    CleanBrokerDataHeader,
    ControllerRegisterHeader,
    ElectMasterHeader,
)
from nsfleet.wire.headers import BrokerIdentityHeader, EmptyHeader


def _required(header: Any, *names: tuple[str, str]) -> None:
    """RemotingCommand.checkFields: the first @CFNotNull field missing is a decode error."""
    for attr, java in names:
        if getattr(header, attr) is None:
            raise BadRequest(f"the custom field <{java}> is null")


async def get_metadata_info(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                            conn: Connection) -> RemotingCommand:
    return ok(cmd, ns.controller.metadata())


async def get_next_broker_id(ns: NameServer, h: BrokerSetHeader, cmd: RemotingCommand,
                             conn: Connection) -> RemotingCommand:
    _required(h, ("cluster_name", "clusterName"), ("broker_name", "brokerName"))
    assert h.cluster_name is not None and h.broker_name is not None
    return ok(cmd, await ns.controller.next_broker_id(h.cluster_name, h.broker_name))


async def apply_broker_id(ns: NameServer, h: ApplyBrokerIdHeader, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    _required(h, ("cluster_name", "clusterName"), ("broker_name", "brokerName"),
              ("applied_broker_id", "appliedBrokerId"),
              ("register_check_code", "registerCheckCode"))
    assert h.cluster_name and h.broker_name is not None and h.applied_broker_id is not None
    return ok(cmd, await ns.controller.apply_broker_id(
        h.cluster_name, h.broker_name, h.applied_broker_id, h.register_check_code or ""))


async def register_broker(ns: NameServer, h: ControllerRegisterHeader, cmd: RemotingCommand,
                          conn: Connection) -> RemotingCommand:
    _required(h, ("cluster_name", "clusterName"), ("broker_name", "brokerName"),
              ("broker_id", "brokerId"), ("broker_address", "brokerAddress"))
    assert h.cluster_name is not None and h.broker_name is not None
    assert h.broker_id is not None and h.broker_address is not None
    ext, sss, epoch = await ns.controller.register(h.cluster_name, h.broker_name, h.broker_id,
                                                   h.broker_address)
    return ok(cmd, ext, bodies.sync_state_set(sss, epoch))


async def elect_master(ns: NameServer, h: ElectMasterHeader, cmd: RemotingCommand,
                       conn: Connection) -> RemotingCommand:
    _required(h, ("cluster_name", "clusterName"), ("broker_name", "brokerName"))
    assert h.broker_name is not None
    election = await ns.controller.elect(h.broker_name, h.broker_id,
                                         designate=h.designate_elect)
    if election.outcome is Outcome.STILL:
        return make_response(cmd, ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                             remark=still_remark(election), ext_fields=election_header(election),
                             body=bodies.elect_master_body(election, with_group=False))
    return ok(cmd, election_header(election), bodies.elect_master_body(election))


async def get_replica_info(ns: NameServer, h: BrokerSetHeader, cmd: RemotingCommand,
                           conn: Connection) -> RemotingCommand:
    _required(h, ("broker_name", "brokerName"))
    assert h.broker_name is not None
    s = await ns.controller.replica_info(h.broker_name)
    ext = {"masterEpoch": str(s.master_epoch)}
    if s.master_id is not None:
        ext = {"masterBrokerId": str(s.master_id), "masterAddress": s.master_address, **ext}
    return ok(cmd, ext, bodies.sync_state_set(s.sync_state_set, s.sync_state_set_epoch))


async def get_sync_state_data(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                              conn: Connection) -> RemotingCommand:
    names = bodies.read_names(cmd.body)
    if not names:  # Java answers an empty request with an empty response
        return make_response(cmd, ResponseCode.SUCCESS)
    return ok(cmd, body=bodies.replicas_info(await ns.controller.sync_state_data(names)))


async def alter_sync_state_set(ns: NameServer, h: AlterSyncStateSetHeader, cmd: RemotingCommand,
                               conn: Connection) -> RemotingCommand:
    _required(h, ("broker_name", "brokerName"), ("master_broker_id", "masterBrokerId"),
              ("master_epoch", "masterEpoch"))
    assert h.broker_name is not None and h.master_broker_id is not None
    assert h.master_epoch is not None
    ids, epoch = bodies.read_sync_state_set(cmd.body)
    new_epoch, sss = await ns.controller.alter_sync_state_set(
        h.broker_name, h.master_broker_id, h.master_epoch, ids, epoch)
    return ok(cmd, {"newSyncStateSetEpoch": str(new_epoch)}, bodies.sync_state_set(sss, new_epoch))


async def clean_broker_data(ns: NameServer, h: CleanBrokerDataHeader, cmd: RemotingCommand,
                            conn: Connection) -> RemotingCommand:
    _required(h, ("broker_name", "brokerName"))
    assert h.broker_name is not None
    text = h.broker_controller_ids_to_clean or ""
    try:
        ids = [int(i) for i in text.split(";")] if text.strip() else []
    except ValueError as exc:
        raise ControllerRefused(
            ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
            "Please set the option <brokerControllerIdsToClean> according to the format, "
            f"exception: java.lang.NumberFormatException: {exc}") from None
    await ns.controller.clean(h.broker_name, ids, living=h.clean_living_broker)
    return ok(cmd)


async def get_controller_config(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                                conn: Connection) -> RemotingCommand:
    return ok(cmd, body=ns.controller.config_text().encode())


async def update_controller_config(ns: NameServer, h: EmptyHeader, cmd: RemotingCommand,
                                   conn: Connection) -> RemotingCommand:
    if cmd.body:
        await ns.controller.update_config(cmd.body.decode("utf-8", errors="replace"))
    return ok(cmd)


async def heartbeat(ns: NameServer, h: BrokerHeartbeatHeader, cmd: RemotingCommand,
                    conn: Connection) -> RemotingCommand:
    """BROKER_HEARTBEAT: the controller's when it carries the controller's fields (a broker in
    controller mode, oneway), else the NameServer's."""
    if not h.for_controller:
        return await broker_heartbeat(ns, BrokerIdentityHeader(
            h.cluster_name, h.broker_addr, h.broker_name, h.broker_id), cmd, conn)
    if h.broker_id is None:
        raise ControllerRefused(ResponseCode.CONTROLLER_INVALID_REQUEST,
                                "Heart beat with empty brokerId")
    _required(h, ("cluster_name", "clusterName"), ("broker_name", "brokerName"),
              ("broker_addr", "brokerAddr"))
    assert h.cluster_name is not None and h.broker_name is not None
    assert h.broker_addr is not None
    hb = ControllerHeartbeat(
        h.cluster_name, h.broker_name, h.broker_addr, h.broker_id,
        h.epoch if h.epoch is not None else -1, h.max_offset or 0, h.confirm_offset or 0,
        h.heartbeat_timeout_mills or DEFAULT_HEARTBEAT_TIMEOUT_MS,
        h.election_priority if h.election_priority is not None else 2**31 - 1)
    await ns.controller.heartbeat(hb, conn.id)
    conn.controller_replicas.add((h.broker_name, h.broker_id))
    return make_response(cmd, ResponseCode.SUCCESS, remark="Heart beat success")


# Java creates every controller answer from its response header class, so even refusals carry
# "extFields" (response_header=True).
CONTROLLER_HANDLERS: dict[int, Endpoint] = {
    RequestCode.CONTROLLER_GET_METADATA_INFO: Endpoint(EmptyHeader, get_metadata_info),
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: Endpoint(BrokerSetHeader, get_next_broker_id,
                                                        response_header=True),
    RequestCode.CONTROLLER_APPLY_BROKER_ID: Endpoint(ApplyBrokerIdHeader, apply_broker_id,
                                                     response_header=True),
    RequestCode.CONTROLLER_REGISTER_BROKER: Endpoint(ControllerRegisterHeader, register_broker,
                                                     response_header=True),
    RequestCode.CONTROLLER_ELECT_MASTER: Endpoint(ElectMasterHeader, elect_master,
                                                  response_header=True),
    RequestCode.CONTROLLER_GET_REPLICA_INFO: Endpoint(BrokerSetHeader, get_replica_info,
                                                      response_header=True),
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: Endpoint(EmptyHeader, get_sync_state_data),
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: Endpoint(
        AlterSyncStateSetHeader, alter_sync_state_set, response_header=True),
    RequestCode.CLEAN_BROKER_DATA: Endpoint(CleanBrokerDataHeader, clean_broker_data),
    RequestCode.GET_CONTROLLER_CONFIG: Endpoint(EmptyHeader, get_controller_config),
    RequestCode.UPDATE_CONTROLLER_CONFIG: Endpoint(EmptyHeader, update_controller_config),
    RequestCode.BROKER_HEARTBEAT: Endpoint(BrokerHeartbeatHeader, heartbeat),
}
