"""What a RocketMQ broker does towards its NameServers, whatever the protocol (BrokerController,
BrokerOuterAPI); ``BrokerAgent`` (HTTP) and ``RemotingBrokerAgent`` (remoting) only send the
requests.

* ``start()`` sends a full registration (``forceRegister=true`` at start) and raises when no
  NameServer accepted it; then a background task runs a cycle every ``interval`` seconds, the
  first after ``initial_delay``.
* each cycle: with ``force_register`` a full registration; otherwise ``needRegister``: the
  DataVersion is queried, and a full registration follows only when the NameServer reports it
  changed or does not know the broker (expired, unregistered, Redis flushed). A slave that has
  not learnt its master yet registers every cycle, since only a registration answers masterAddr.
  A cycle that fails is counted (``stats``) and the loop goes on: the next may get through.
* topic changes (:meth:`put_topic`, :meth:`remove_topic`, :meth:`set_topics`) bump the
  DataVersion (counter + 1, timestamp = now) and wake the task, which registers at once, as a
  broker's ``registerIncrementBrokerData`` does after a topic update.
* ``close()`` stops the loop and unregisters (Java: UNREGISTER_BROKER on shutdown).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from nsfleet.domain.model import DataVersion, TopicConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """The broker's REGISTER_BROKER header. ``ha_server_addr`` is the broker's own HA listener
    (the agent's ``ha_server_addr`` property is the *master's*, learnt from registration)."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int = 0
    ha_server_addr: str | None = None
    zone_name: str | None = None
    enable_acting_master: bool | None = False
    heartbeat_timeout_millis: int | None = None

    def key(self) -> dict[str, Any]:
        return {"clusterName": self.cluster, "brokerAddr": self.broker_addr,
                "brokerName": self.broker_name, "brokerId": self.broker_id}


@dataclass(slots=True)
class AgentStats:
    registrations: int = 0
    heartbeats: int = 0  # DataVersion queries that answered
    errors: int = 0  # cycles in which no NameServer answered
    last_error: str | None = None
    fenced: int = 0  # registrations refused by stateVersion fencing (registerBroker)


def topic_config_json(tc: TopicConfig) -> dict[str, Any]:
    return {"topicName": tc.topic_name, "readQueueNums": tc.read_queue_nums,
            "writeQueueNums": tc.write_queue_nums, "perm": tc.perm,
            "topicSysFlag": tc.topic_sys_flag, "order": tc.order}


def _now_ms() -> int:
    return int(time.time() * 1000)


class BrokerLoop(abc.ABC):
    def __init__(self, identity: BrokerIdentity, topics: Iterable[TopicConfig], *,
                 interval: float, initial_delay: float | None,
                 force_register: bool = False) -> None:
        self.identity = identity
        self.interval = interval
        # Java waits 10 s before the first periodic registration; by default one interval here.
        self.initial_delay = interval if initial_delay is None else initial_delay
        self.force_register = force_register
        self._topics: dict[str, TopicConfig] = {t.topic_name: t for t in topics}
        self._dv = DataVersion(0, _now_ms(), 0)
        self._registered_dv: DataVersion | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one request cycle at a time
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        self.order_topic_conf: dict[str, str] | None = None  # kvTable of ORDER_TOPIC_CONFIG
        self.registration_id: int | None = None
        self.stats = AgentStats()

    # --- what the protocol sends -------------------------------------------------------------

    @abc.abstractmethod
    async def _send_registration(self, dv: DataVersion) -> dict[str, Any]:
        """REGISTER_BROKER of the table under ``dv``; the answer with the HTTP API's keys
        (``fenced``, ``masterAddr``, ``haServerAddr``, ``kvTable``, ``registrationId``)."""

    @abc.abstractmethod
    async def _data_version_changed(self, dv: DataVersion) -> bool:
        """QUERY_DATA_VERSION: True when the NameServer holds another (or none)."""

    @abc.abstractmethod
    async def _send_unregister(self) -> None: ...

    @abc.abstractmethod
    async def _close_transport(self) -> None: ...

    # --- state -------------------------------------------------------------------------------

    @property
    def data_version(self) -> DataVersion:
        return replace(self._dv)

    @property
    def topics(self) -> dict[str, TopicConfig]:
        return dict(self._topics)

    @property
    def registered(self) -> bool:
        return self._registered_dv is not None

    def put_topic(self, topic: TopicConfig) -> None:
        self._topics[topic.topic_name] = topic
        self._changed()

    def remove_topic(self, name: str) -> None:
        """Drop a topic from the table. The fleet keeps its queue data unless the NameServer
        config deleteTopicWithBrokerRegistration is on, as in Java."""
        if self._topics.pop(name, None) is not None:
            self._changed()

    def set_topics(self, topics: Iterable[TopicConfig]) -> None:
        self._topics = {t.topic_name: t for t in topics}
        self._changed()

    def _changed(self) -> None:
        # DataVersion.nextVersion(): counter + 1, timestamp = now.
        self._dv = DataVersion(self._dv.counter + 1, max(_now_ms(), self._dv.timestamp),
                               self._dv.state_version)
        self._wake.set()

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Register (raising when no NameServer accepted it), then run the loop."""
        if self._task is not None:
            return
        try:
            await self.register()
        except BaseException:
            await self._close_transport()
            raise
        self._task = asyncio.create_task(self._run(),
                                         name=f"broker-agent-{self.identity.broker_addr}")

    async def close(self, *, unregister: bool = True) -> bool:
        """Stop the loop and unregister; True when a NameServer confirmed the unregistration."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        done = False
        if unregister and self._registered_dv is not None:
            try:
                await self._send_unregister()
                done = True
                self._registered_dv = None
            except Exception as exc:  # shutting down: report, never raise
                log.warning("unregister of %s failed: %s", self.identity.broker_addr, exc)
        await self._close_transport()
        return done

    async def _run(self) -> None:
        delay = self.initial_delay
        while True:
            # A topic change wakes the loop early so that it registers at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            delay = self.interval
            try:
                await self.heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep beating: the next cycle may reach a NameServer
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                log.warning("broker %s: heartbeat cycle failed: %s",
                            self.identity.broker_addr, exc)

    # --- the cycle ---------------------------------------------------------------------------

    async def register(self) -> dict[str, Any]:
        """One full registration now; returns the NameServer's answer."""
        async with self._lock:
            self._wake.clear()
            sent = replace(self._dv)
            answer = await self._send_registration(sent)
            self.stats.registrations += 1
            if answer.get("fenced"):
                # A newer incarnation owns this broker id: Java answers with an empty result.
                self.stats.fenced += 1
            else:
                # handleRegisterBrokerResult: a slave learns its master and the HA address.
                self.master_addr = answer.get("masterAddr")
                self.ha_server_addr = answer.get("haServerAddr")
                self.order_topic_conf = answer.get("kvTable")
                self.registration_id = answer.get("registrationId")
            self._registered_dv = sent
            return answer

    async def heartbeat(self) -> bool:
        """One periodic cycle now; True when it sent a full registration."""
        if self.force_register or self._needs_full_registration():
            await self.register()
            return True
        async with self._lock:
            changed = await self._data_version_changed(replace(self._dv))
            self.stats.heartbeats += 1
        if changed:  # also when the fleet no longer knows the broker
            await self.register()
        return changed

    def _needs_full_registration(self) -> bool:
        if self._registered_dv != self._dv:
            return True
        return self.identity.broker_id != 0 and self.master_addr is None
