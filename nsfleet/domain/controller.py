"""RocketMQ 5's controller as nsfleet keeps it (docs/controller.md): a broker set's state
(Java's SyncStateInfo and BrokerReplicaInfo), its replicas, a controller heartbeat and an
election's outcome. Plain values: the store reads them from Redis, the front ends encode them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

FIRST_BROKER_ID = 1  # MixAll.FIRST_BROKER_CONTROLLER_ID
DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000  # a 904 without heartbeatTimeoutMills (Java's default)


@dataclass(frozen=True, slots=True)
class Replica:
    broker_id: int
    address: str
    alive: bool


@dataclass(frozen=True, slots=True)
class BrokerSet:
    """One broker set (``brokerName``) as the controller knows it."""

    broker_name: str
    cluster: str
    next_broker_id: int
    master_id: int | None  # None: no master
    master_address: str
    master_epoch: int
    sync_state_set: tuple[int, ...]  # ascending
    sync_state_set_epoch: int
    replicas: tuple[Replica, ...] = ()  # ascending by id; empty where not read


@dataclass(frozen=True, slots=True)
class ControllerHeartbeat:
    """A controller BROKER_HEARTBEAT's fields (BrokerHeartbeatRequestHeader)."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int
    epoch: int
    max_offset: int
    confirm_offset: int
    timeout_ms: int
    election_priority: int


class Outcome(StrEnum):
    ELECTED = "elected"  # a new master; epochs +1
    STILL = "still"  # the old master is still the choice (2011)
    UNKNOWN = "unknown"  # no such broker set (2010)
    NONE = "none"  # the controller's trigger found no candidate: the master cleared (2004)
    FAILED = "failed"  # a request found no candidate (2012)
    FENCED = "fenced"  # a trigger another worker's election overtook: nothing done


@dataclass(frozen=True, slots=True)
class Election:
    outcome: Outcome
    broker_name: str
    cluster: str = ""
    master_id: int | None = None
    master_address: str = ""
    master_epoch: int = 0
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int = 0
    replicas: tuple[Replica, ...] = ()

    @property
    def alive_addresses(self) -> list[str]:
        """Where NOTIFY_BROKER_ROLE_CHANGED goes: every alive replica (Java's
        notifyBrokerRoleChanged)."""
        return [r.address for r in self.replicas if r.alive and r.address]


def id_set(text: str) -> tuple[int, ...]:
    """"1;2" as ids, ascending."""
    return tuple(sorted(int(i) for i in text.split(";") if i))
