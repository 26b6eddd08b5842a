"""BrokerAgent: what a RocketMQ broker does towards its NameServers, over nsfleet's HTTP API.

The loop (registration, needRegister cycles, topic changes, unregistration) is the one every
agent shares, ``nsfleet.client.broker_loop.BrokerLoop``; here are the requests and the HTTP
specifics:

* ``interval`` is ``registerNameServerPeriod`` clamped like Java, ``max(10, min(period, 60))``;
  ``interval_bounds`` changes the clamp (``None`` turns it off, for tests and load generators).
  ``force_register`` (Java's default) registers every cycle instead of querying the DataVersion.
* a request goes to one worker and fails over to the next on a connection error, timeout or 5xx
  (the workers share Redis, so one successful registration reaches the whole fleet).

A topic table of exactly one topic cannot register a broker the fleet does not know: the
NameServer's single-topic guard (RouteInfoManager.registerBroker) refuses it (ApiError 409).
Real brokers always register their system topics (TBW102, SELF_TEST_TOPIC, ...) as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import aiohttp

from nsfleet.client.broker_loop import BrokerIdentity, BrokerLoop, topic_config_json
from nsfleet.client.http import FleetHttp
from nsfleet.domain.model import DataVersion, TopicConfig

DEFAULT_INTERVAL = 30.0  # BrokerConfig.registerNameServerPeriod
INTERVAL_BOUNDS = (10.0, 60.0)  # BrokerController's clamp of that period
REGISTER_TIMEOUT = 24.0  # BrokerConfig.registerBrokerTimeoutMills
REQUEST_TIMEOUT = 3.0  # query-data-version and unregister


def clamp_interval(period: float, bounds: tuple[float, float] | None = INTERVAL_BOUNDS) -> float:
    if period <= 0:
        raise ValueError("the heartbeat interval must be > 0")
    if bounds is None:
        return period
    lo, hi = bounds
    return max(lo, min(period, hi))


class BrokerAgent(BrokerLoop):
    def __init__(self, servers: str | Sequence[str], identity: BrokerIdentity,
                 topics: Iterable[TopicConfig] = (), *,
                 heartbeat_interval: float = DEFAULT_INTERVAL,
                 interval_bounds: tuple[float, float] | None = INTERVAL_BOUNDS,
                 initial_delay: float | None = None, force_register: bool = False,
                 request_timeout: float = REQUEST_TIMEOUT,
                 register_timeout: float = REGISTER_TIMEOUT,
                 session: aiohttp.ClientSession | None = None, shuffle: bool = False,
                 token: str | None = None) -> None:
        super().__init__(identity, topics,
                         interval=clamp_interval(heartbeat_interval, interval_bounds),
                         initial_delay=initial_delay, force_register=force_register)
        self.register_timeout = register_timeout
        self.http = FleetHttp(servers, timeout=request_timeout, session=session, shuffle=shuffle,
                              token=token)

    @property
    def current_server(self) -> str:
        return self.http.current

    @property
    def failovers(self) -> int:
        return self.http.failovers

    async def __aenter__(self) -> BrokerAgent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _registration_body(self, dv: DataVersion) -> dict[str, Any]:
        ident = self.identity
        body: dict[str, Any] = {
            **ident.key(), "dataVersion": dv.to_dict(),
            "topicConfigTable": {n: topic_config_json(t) for n, t in self._topics.items()}}
        optional = {"haServerAddr": ident.ha_server_addr, "zoneName": ident.zone_name,
                    "enableActingMaster": ident.enable_acting_master,
                    "heartbeatTimeoutMillis": ident.heartbeat_timeout_millis}
        body.update({k: v for k, v in optional.items() if v is not None})
        return body

    async def _send_registration(self, dv: DataVersion) -> dict[str, Any]:
        reply = await self.http.request("POST", "/v1/brokers/register",
                                        json_body=self._registration_body(dv),
                                        attempt_timeout=self.register_timeout)
        answer: dict[str, Any] = reply.json()
        return answer

    async def _data_version_changed(self, dv: DataVersion) -> bool:
        reply = await self.http.request("POST", "/v1/brokers/query-data-version",
                                        json_body={**self.identity.key(),
                                                   "dataVersion": dv.to_dict()})
        return bool(reply.json().get("changed"))

    async def _send_unregister(self) -> None:
        await self.http.request("POST", "/v1/brokers/unregister", json_body=self.identity.key())

    async def _close_transport(self) -> None:
        await self.http.close()
