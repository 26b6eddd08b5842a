"""What clients read: a topic's route (from this worker's cache, with orderTopicConf and the
acting-master rewrite as the fleet config says), cluster info, the topic lists and the console's
topic summary. While the store is away, each is answered from the worker's last coherent view."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nsfleet.domain import validation
from nsfleet.domain.errors import FeatureDisabled, NotReady, TopicRouteNotFound
from nsfleet.domain.model import ClusterInfo, TopicRouteData
from nsfleet.service.acting_master import apply_acting_master
from nsfleet.service.context import ServiceContext, ServicePart
from nsfleet.service.route_cache import Entry
from nsfleet.service.topic_summary import TopicSummary

ABSENT_ETAG = "0"  # the ETag of "no route"


def standard_route_json(route: TopicRouteData) -> bytes:
    """The route as the HTTP API answers it: standard, compact JSON with sorted keys."""
    return json.dumps(route.to_dict(), separators=(",", ":"), sort_keys=True).encode()


@dataclass(slots=True)
class RouteAnswer:
    """A topic's route as served, with its encodings memoised per cache entry."""

    route: TopicRouteData
    expires: float  # time.monotonic() when it may change with no announcement (a deadline)
    _memo: dict[str, bytes]

    @property
    def etag(self) -> str:
        """Changes whenever the answered bytes change, and only then: a digest of the body, the
        same on every worker."""
        tag = self._memo.get("etag")  # memoised with the body: hashing 10 KB per read shows
        if tag is None:
            body = self.encoded("standard-json", standard_route_json)
            tag = self._memo["etag"] = hashlib.blake2b(body, digest_size=8).hexdigest().encode()
        return tag.decode()

    def encoded(self, encoding: str, encode: Callable[[TopicRouteData], bytes]) -> bytes:
        data = self._memo.get(encoding)
        if data is None:
            data = self._memo[encoding] = encode(self.route)
        return data


class RouteReads(ServicePart):
    def __init__(self, ctx: ServiceContext, *, started: float) -> None:
        super().__init__(ctx)
        self.started = started  # time.monotonic() of the worker's start (needWaitForService)
        self._topic_summary = TopicSummary(ctx.store, ctx.cache)

    def _check_ready(self) -> None:
        """needWaitForService: routes are refused for waitSecondsForService after start."""
        if (self.config.flag("needWaitForService")
                and time.monotonic() - self.started < self.config.number("waitSecondsForService")):
            raise NotReady

    async def route(self, topic: str | None) -> RouteAnswer:
        """The route clients get (cached, with orderTopicConf and the acting-master rewrite as
        the fleet config says); TopicRouteNotFound for an unknown or impossible topic name."""
        self._check_ready()
        if not validation.routable(topic):
            raise TopicRouteNotFound(topic)
        assert topic is not None
        entry = await self._cache.get(topic, order_conf=self.config.flag("orderMessageEnable"))
        return self._answer(topic, entry)

    def cached_route(self, topic: str | None) -> RouteAnswer | None:
        """The answer ``route`` would give when it needs no Redis call (raising the same
        errors), else None."""
        self._check_ready()
        # Only ``route`` fills the cache, after the same name check: a hit needs no check.
        entry = self._cache.peek(topic, order_conf=self.config.flag("orderMessageEnable"))
        if entry is None:
            if not validation.routable(topic):
                raise TopicRouteNotFound(topic)
            return None
        assert topic is not None
        return self._answer(topic, entry)

    def _answer(self, topic: str, entry: Entry) -> RouteAnswer:
        if entry.read is None:
            raise TopicRouteNotFound(topic)
        route = entry.read.route
        memo_key = "acting" if self.config.flag("supportActingMaster") else "plain"
        if memo_key == "acting":
            route = apply_acting_master(route, topic)
        return RouteAnswer(route, entry.expires,
                           entry.encoded.setdefault(memo_key, {}))

    async def cluster_info(self) -> ClusterInfo:
        return await self._cache.answer("cluster_info", self._store.cluster_info, "cluster_info")

    async def system_topic_list(self) -> tuple[list[str], str | None]:
        return await self._cache.answer("topics:system", self._store.system_topic_list,
                                        "topic_list")

    def _check_list(self, flag: str) -> None:
        if not self.config.flag(flag):
            raise FeatureDisabled

    async def all_topics(self) -> list[str]:
        self._check_list("enableAllTopicList")
        return await self._topics("all_topics", self._store.all_topics)

    async def unit_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("unit_topics", lambda: self._store.topic_list("unit"))

    async def has_unit_sub_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("has_unit_sub_topics",
                                  lambda: self._store.topic_list("unit-sub"))

    async def has_unit_sub_ununit_topics(self) -> list[str]:
        self._check_list("enableTopicList")
        return await self._topics("has_unit_sub_ununit_topics",
                                  lambda: self._store.topic_list("unit-sub-ununit"))

    async def topics_by_cluster(self, cluster: str | None) -> list[str]:
        self._check_list("enableTopicList")
        if not validation.is_valid(validation.name, cluster):
            return []  # a cluster name no registration accepts has no topics
        assert cluster is not None
        return await self._topics(f"cluster:{cluster}",
                                  lambda: self._store.topic_list("cluster", cluster))

    async def _topics(self, name: str, read: Callable[[], Awaitable[list[str]]]) -> list[str]:
        """A topic list, answered from the last coherent view while the store is away."""
        return await self._cache.answer(f"topics:{name}", read, "topic_list")

    async def topic_summary(self) -> bytes:
        """Every topic with its kind and queue data, as JSON (``TopicSummary``); refused like
        the topic list when enableAllTopicList is off."""
        self._check_list("enableAllTopicList")
        return await self._topic_summary.encoded()
