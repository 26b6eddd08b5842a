"""The console's topic table in one answer (``GET /v1/topics/summary``): every topic with its kind
(``nsfleet.domain.topic_kinds``), the queue data of each group serving it and its
ORDER_TOPIC_CONFIG entry.

Kept per topic by the change feed, through the route cache: a change message drops the rows of
the topics it names (every topic's, for "*" or whenever the cache cannot vouch for what it
saw), and an answer reads again only the topics without rows (``topic_summary.lua``), so a
change of a few topics costs a few rows, not the whole table; each topic's JSON is kept too.
Coherent by construction: an answer first reads ``P:rev`` and waits until the feed has delivered
every change up to it; rows read while a change of their topic arrived serve that answer only;
the last answer's topics are served again only while no change arrived since they were read.
Nothing is kept while the route cache is off or cannot vouch for the feed, nor when the feed
lags past ``FEED_CATCH_UP``: each answer then reads every row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec

from nsfleet.domain.topic_kinds import topic_kind
from nsfleet.service.route_cache import RouteCache
from nsfleet.store import RouteStore
from nsfleet.store.topic_summary_rows import TopicRows

QUEUE_FIELDS = ["brokerName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag"]
# How long an answer waits for the feed to deliver the changes Redis has counted, before it
# reads every row instead (the feed lags by a message in flight, milliseconds).
FEED_CATCH_UP = 1.0


def _answer(rev: int, topics_json: bytes) -> bytes:
    head = msgspec.json.encode({"rev": rev, "queueFields": QUEUE_FIELDS})
    return b"".join((head[:-1], b',"topics":[', topics_json, b"]}"))


class TopicSummary:
    def __init__(self, store: RouteStore, cache: RouteCache) -> None:
        self._store = store
        self._cache = cache
        cache.on_routes_changed.append(self._changed)
        self._lock = asyncio.Lock()
        # The topics of the last answer, while no change arrived since it was read.
        self._topics_json: bytes | None = None
        self._rows: dict[str, TopicRows] = {}  # topics no change named since they were read
        self._seq = 0  # changes told so far
        self._cleared_at = 0  # _seq of the last "any topic"
        self._filling = False
        self._changed_while_filling: set[str] = set()
        # topic -> (its rows, kind, orderConf, its JSON object)
        self._encoded: dict[str, tuple[TopicRows, str, str | None, bytes]] = {}

    def _changed(self, topics: Sequence[str] | None) -> None:
        """The route cache was told that the routes of ``topics`` may have changed (None:
        any's)."""
        self._seq += 1
        self._topics_json = None
        if topics is None:
            self._cleared_at = self._seq
            self._rows.clear()
        else:
            rows = self._rows
            if rows:  # a registration storm tells every worker millions of topics
                for topic in topics:
                    rows.pop(topic, None)
            if self._filling:
                self._changed_while_filling.update(topics)

    async def encoded(self) -> bytes:
        """The summary as compact JSON: ``{"rev", "queueFields", "topics": [{"topic", "kind",
        "queues": [[brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag], ...],
        "orderConf"}, ...]}``, topics sorted. ``rev`` is the fleet's change counter read first:
        the answer shows every change up to it."""
        async with self._lock:
            rev = await self._store.rev()  # raises while the store is away
            if not (self._cache.may_keep and await self._feed_reached(rev)):
                return _answer(rev, (await self._refresh(keep=False))[0])
            topics_json = self._topics_json
            if topics_json is None:
                topics_json, untold = await self._refresh(keep=True)
                if untold:
                    self._topics_json = topics_json
            return _answer(rev, topics_json)

    async def _feed_reached(self, rev: int) -> bool:
        """Whether the feed has delivered every change up to ``rev`` (waiting for it briefly):
        what it dropped is then all that changed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FEED_CATCH_UP
        while self._cache.feed.rev < rev:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._cache.watchers.wait_for_any_change(remaining)
        return True

    async def _refresh(self, *, keep: bool) -> tuple[bytes, bool]:
        """The topics part of the answer: the rows kept, and those of every other topic read
        again (with ``keep``, kept in turn unless a change of their topic arrived meanwhile);
        and whether it may be kept as it is (``keep``, and nothing told while it was read)."""
        started = self._seq
        reader = self._store.topic_summary_rows
        self._filling, self._changed_while_filling = True, set()
        try:
            index = await reader.index()
            known = dict(self._rows) if keep else {}  # as it was when the reads began
            read = await reader.rows([t for t in index.topics if t not in known])
        finally:
            self._filling = False
        kept = keep and self._cache.may_keep and self._cleared_at <= started
        rows = {t: known[t] for t in index.topics if t in known}
        for r in read:
            rows[r.topic] = r
            if kept and r.topic not in self._changed_while_filling:
                self._rows[r.topic] = r
        for topic in [t for t in self._rows if t not in rows]:  # gone since
            del self._rows[topic]
        encoded: dict[str, tuple[TopicRows, str, str | None, bytes]] = {}
        for topic in index.topics:
            topic_rows = rows[topic]
            kind, conf = topic_kind(topic, index.names), index.order_conf.get(topic)
            known_json = self._encoded.get(topic)
            if known_json is None or known_json[:3] != (topic_rows, kind, conf):
                known_json = (topic_rows, kind, conf, msgspec.json.encode(
                    {"topic": topic, "kind": kind, "queues": topic_rows.queues,
                     "orderConf": conf}))
            encoded[topic] = known_json
        self._encoded = encoded
        untold = kept and self._seq == started
        return b",".join(e[3] for e in encoded.values()), untold
