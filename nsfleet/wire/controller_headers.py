"""The controller's request headers (org.apache.rocketmq.remoting.protocol.header.controller),
decoded as every header is (``headers.py``); the fields a handler needs are checked there."""

from __future__ import annotations

from dataclasses import dataclass

from nsfleet.wire.headers import RequestHeader, _ext


@dataclass(frozen=True, slots=True)
class BrokerSetHeader(RequestHeader):
    """GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader: a broker set; the base of the
    headers that name one."""

    cluster_name: str | None = _ext("clusterName")
    broker_name: str | None = _ext("brokerName")


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdHeader(BrokerSetHeader):
    applied_broker_id: int | None = _ext("appliedBrokerId", "long")
    register_check_code: str | None = _ext("registerCheckCode")


@dataclass(frozen=True, slots=True)
class ControllerRegisterHeader(BrokerSetHeader):
    """RegisterBrokerToControllerRequestHeader."""

    broker_id: int | None = _ext("brokerId", "long")
    broker_address: str | None = _ext("brokerAddress")


@dataclass(frozen=True, slots=True)
class ElectMasterHeader(BrokerSetHeader):
    broker_id: int | None = _ext("brokerId", "long")
    designate_elect: bool = _ext("designateElect", "bool", False)


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetHeader(RequestHeader):
    broker_name: str | None = _ext("brokerName")
    master_broker_id: int | None = _ext("masterBrokerId", "long")
    master_epoch: int | None = _ext("masterEpoch", "int")


@dataclass(frozen=True, slots=True)
class CleanBrokerDataHeader(BrokerSetHeader):
    """CleanControllerBrokerDataRequestHeader."""

    broker_controller_ids_to_clean: str | None = _ext("brokerControllerIdsToClean")
    clean_living_broker: bool = _ext("isCleanLivingBroker", "bool", False)


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatHeader(RequestHeader):
    """BrokerHeartbeatRequestHeader: the NameServer reads who the broker is, the controller the
    rest too (a controller heartbeat carries its epoch and offsets)."""

    cluster_name: str | None = _ext("clusterName")
    broker_addr: str | None = _ext("brokerAddr")
    broker_name: str | None = _ext("brokerName")
    broker_id: int | None = _ext("brokerId", "long")
    epoch: int | None = _ext("epoch", "int")
    max_offset: int | None = _ext("maxOffset", "long")
    confirm_offset: int | None = _ext("confirmOffset", "long")
    heartbeat_timeout_mills: int | None = _ext("heartbeatTimeoutMills", "long")
    election_priority: int | None = _ext("electionPriority", "int")

    @property
    def for_controller(self) -> bool:
        return self.epoch is not None or self.max_offset is not None
