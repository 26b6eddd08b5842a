"""The NameServer as both front ends (HTTP and RocketMQ remoting) see it.

Wraps RouteStore with what depends on the worker: the fleet-wide NamesrvConfig flags, the default
broker timeout, the route cache and the acting-master route rewrite. Protocol modules only decode
requests and encode answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from nsfleet.acting_master import apply_acting_master
from nsfleet.config import Settings
from nsfleet.metrics import Metrics
from nsfleet.model import RegisterResult, TopicRouteData
from nsfleet.namesrv_config import NamesrvConfig
from nsfleet.route_cache import Entry, RouteCache
from nsfleet.store import BrokerRegistration, RouteStore


class FeatureDisabled(Exception):
    """A topic list was asked for while enableAllTopicList / enableTopicList is false."""


@dataclass(slots=True)
class RouteAnswer:
    """A topic's route as served, with its encodings memoised per cache entry."""

    route: TopicRouteData
    rev: int
    _memo: dict[str, bytes]

    def encoded(self, encoding: str, encode: Callable[[TopicRouteData], bytes]) -> bytes:
        data = self._memo.get(encoding)
        if data is None:
            data = self._memo[encoding] = encode(self.route)
        return data


class NameServer:
    def __init__(self, settings: Settings, store: RouteStore, cache: RouteCache,
                 config: NamesrvConfig, metrics: Metrics) -> None:
        self.settings = settings
        self.store = store
        self.cache = cache
        self.config = config
        self.metrics = metrics
        self.started = time.monotonic()

    async def register_broker(self, reg: BrokerRegistration, *,
                              static_topics: bool = False) -> RegisterResult:
        """Register with the fleet's defaults. ``static_topics``: the body carried static-topic
        mappings, which (as in Java) turns deleteTopicWithBrokerRegistration off for this call."""
        if reg.heartbeat_timeout_millis is None:
            reg.heartbeat_timeout_millis = int(self.settings.broker_timeout * 1000)
        return await self.store.register_broker(
            reg,
            delete_absent_topics=(self.config.flag("deleteTopicWithBrokerRegistration")
                                  and not static_topics),
            return_order_conf=self.config.flag("returnOrderTopicConfigToBroker"))

    async def route(self, topic: str) -> RouteAnswer | None:
        """The route clients get: cached, with orderTopicConf and the acting-master rewrite
        applied as the fleet config says."""
        entry = await self.cache.get(topic, order_conf=self.config.flag("orderMessageEnable"))
        return self._answer(topic, entry)

    def cached_route(self, topic: str) -> tuple[bool, RouteAnswer | None]:
        """(True, the route) when it is cached, (False, None) when Redis must be asked."""
        entry = self.cache.peek(topic, order_conf=self.config.flag("orderMessageEnable"))
        return (False, None) if entry is None else (True, self._answer(topic, entry))

    def _answer(self, topic: str, entry: Entry) -> RouteAnswer | None:
        if entry.read is None:
            return None
        route = entry.read.route
        memo_key = "acting" if self.config.flag("supportActingMaster") else "plain"
        if memo_key == "acting":
            route = apply_acting_master(route, topic)
        return RouteAnswer(route, entry.read.rev, entry.encoded.setdefault(memo_key, {}))

    def waiting_for_service(self) -> bool:
        """needWaitForService: routes are refused for waitSecondsForService after start."""
        return (self.config.flag("needWaitForService")
                and time.monotonic() - self.started < self.config.number("waitSecondsForService"))

    def check_all_topic_list(self) -> None:
        if not self.config.flag("enableAllTopicList"):
            raise FeatureDisabled("disable")

    def check_topic_list(self) -> None:
        if not self.config.flag("enableTopicList"):
            raise FeatureDisabled("disable")
