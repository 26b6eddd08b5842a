"""BrokerAgent: what a RocketMQ broker does towards its NameServers, over nsfleet's HTTP API.

Behaviour (BrokerController / BrokerOuterAPI):

* ``start()`` sends a full registration (``forceRegister=true`` at start) and raises when no
  worker accepted it, then a background task runs every ``interval`` seconds.
* ``interval`` is ``registerNameServerPeriod`` clamped like Java, ``max(10, min(period, 60))``;
  ``interval_bounds`` changes the clamp (``None`` turns it off, for tests and load generators).
* each cycle: with ``force_register`` (Java's default) a full registration; otherwise
  ``needRegister``: POST /v1/brokers/query-data-version, and a full registration only when the
  fleet reports ``changed`` or does not know the broker (expired, unregistered, Redis flushed).
  A slave that has not learnt its master yet registers every cycle, since only a registration
  answers masterAddr.
* topic changes (:meth:`put_topic`, :meth:`remove_topic`, :meth:`set_topics`) bump the
  DataVersion (counter + 1, timestamp = now) and wake the task, which registers at once, as a
  broker's ``registerIncrementBrokerData`` does after a topic update.
* a request goes to one worker and fails over to the next on a connection error, timeout or 5xx
  (the workers share Redis, so one successful registration reaches the whole fleet).
* ``close()`` unregisters (Java: UNREGISTER_BROKER on shutdown, 3 s timeout).

A topic table of exactly one topic cannot register a broker the fleet does not know: the
NameServer's single-topic guard (RouteInfoManager.registerBroker) refuses it (ApiError 409).
Real brokers always register their system topics (TBW102, SELF_TEST_TOPIC, ...) as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiohttp

from nsfleet.client.http import FleetHttp
from nsfleet.domain.model import DataVersion, TopicConfig

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 30.0  # BrokerConfig.registerNameServerPeriod
INTERVAL_BOUNDS = (10.0, 60.0)  # BrokerController's clamp of that period
REGISTER_TIMEOUT = 24.0  # BrokerConfig.registerBrokerTimeoutMills
REQUEST_TIMEOUT = 3.0  # query-data-version and unregister


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
    heartbeats: int = 0  # query-data-version calls that answered
    errors: int = 0  # cycles in which no worker answered
    last_error: str | None = None
    fenced: int = 0  # registrations refused by stateVersion fencing (registerBroker)


def clamp_interval(period: float, bounds: tuple[float, float] | None = INTERVAL_BOUNDS) -> float:
    if period <= 0:
        raise ValueError("the heartbeat interval must be > 0")
    if bounds is None:
        return period
    lo, hi = bounds
    return max(lo, min(period, hi))


def topic_config_json(tc: TopicConfig) -> dict[str, Any]:
    return {"topicName": tc.topic_name, "readQueueNums": tc.read_queue_nums,
            "writeQueueNums": tc.write_queue_nums, "perm": tc.perm,
            "topicSysFlag": tc.topic_sys_flag, "order": tc.order}


def _now_ms() -> int:
    return int(time.time() * 1000)


class BrokerAgent:
    def __init__(self, servers: str | Sequence[str], identity: BrokerIdentity,
                 topics: Iterable[TopicConfig] = (), *,
                 heartbeat_interval: float = DEFAULT_INTERVAL,
                 interval_bounds: tuple[float, float] | None = INTERVAL_BOUNDS,
                 initial_delay: float | None = None, force_register: bool = False,
                 request_timeout: float = REQUEST_TIMEOUT,
                 register_timeout: float = REGISTER_TIMEOUT,
                 session: aiohttp.ClientSession | None = None, shuffle: bool = False,
                 token: str | None = None) -> None:
        self.identity = identity
        self.interval = clamp_interval(heartbeat_interval, interval_bounds)
        # Java waits 10 s before the first periodic registration; by default one interval here.
        self.initial_delay = self.interval if initial_delay is None else initial_delay
        self.force_register = force_register
        self.register_timeout = register_timeout
        self.http = FleetHttp(servers, timeout=request_timeout, session=session, shuffle=shuffle,
                              token=token)
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

    @property
    def current_server(self) -> str:
        return self.http.current

    @property
    def failovers(self) -> int:
        return self.http.failovers

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
        """Register (raising FleetUnavailable or ApiError on failure), then run the loop."""
        if self._task is not None:
            return
        try:
            await self.register()
        except BaseException:
            await self.http.close()
            raise
        self._task = asyncio.create_task(self._run(),
                                         name=f"broker-agent-{self.identity.broker_addr}")

    async def close(self, *, unregister: bool = True) -> bool:
        """Stop the loop and unregister; True when a worker confirmed the unregistration."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        done = False
        if unregister and self._registered_dv is not None:
            try:
                await self.http.request("POST", "/v1/brokers/unregister",
                                        json_body=self.identity.key())
                done = True
                self._registered_dv = None
            except Exception as exc:  # shutting down: report, never raise
                log.warning("unregister of %s failed: %s", self.identity.broker_addr, exc)
        await self.http.close()
        return done

    async def __aenter__(self) -> BrokerAgent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
            except Exception as exc:  # keep beating: the next cycle may reach a worker
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                log.warning("broker %s: heartbeat cycle failed: %s",
                            self.identity.broker_addr, exc)

    # --- requests ----------------------------------------------------------------------------

    def _registration_body(self) -> dict[str, Any]:
        ident = self.identity
        body: dict[str, Any] = {
            **ident.key(), "dataVersion": self._dv.to_dict(),
            "topicConfigTable": {n: topic_config_json(t) for n, t in self._topics.items()}}
        optional = {"haServerAddr": ident.ha_server_addr, "zoneName": ident.zone_name,
                    "enableActingMaster": ident.enable_acting_master,
                    "heartbeatTimeoutMillis": ident.heartbeat_timeout_millis}
        body.update({k: v for k, v in optional.items() if v is not None})
        return body

    async def register(self) -> dict[str, Any]:
        """One full registration now; returns the worker's answer."""
        async with self._lock:
            self._wake.clear()
            sent = replace(self._dv)
            reply = await self.http.request("POST", "/v1/brokers/register",
                                            json_body=self._registration_body(),
                                            attempt_timeout=self.register_timeout)
            answer: dict[str, Any] = reply.json()
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
            reply = await self.http.request("POST", "/v1/brokers/query-data-version",
                                            json_body={**self.identity.key(),
                                                       "dataVersion": self._dv.to_dict()})
            self.stats.heartbeats += 1
            changed = bool(reply.json().get("changed"))
        if changed:  # also when the fleet no longer knows the broker
            await self.register()
        return changed

    def _needs_full_registration(self) -> bool:
        if self._registered_dv != self._dv:
            return True
        return self.identity.broker_id != 0 and self.master_addr is None
