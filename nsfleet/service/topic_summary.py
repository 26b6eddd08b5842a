"""The console's topic table in one answer (``GET /v1/topics/summary``): every topic with its kind
(``nsfleet.domain.topic_kinds``), the queue data of each group serving it and its
ORDER_TOPIC_CONFIG entry.

Kept per topic by the topic's change counter: when the fleet's counter moved since the last
answer, the index (every topic's counter, one MGET per thousand topics) says which topics to read
again, so a change of a few topics costs a few rows, not the whole table; each topic's JSON is
kept too. At the same fleet counter the last answer is served as it is.
"""

from __future__ import annotations

import asyncio

import msgspec

from nsfleet.domain.topic_kinds import topic_kind
from nsfleet.store import RouteStore
from nsfleet.store.topic_overview import TopicRows

QUEUE_FIELDS = ["brokerName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag"]


class TopicSummary:
    def __init__(self, store: RouteStore) -> None:
        self._store = store
        self._lock = asyncio.Lock()
        self._rev = -1
        self._body = b""
        self._rows: dict[str, TopicRows] = {}
        # topic -> ((its rev, kind, orderConf), its JSON object)
        self._encoded: dict[str, tuple[tuple[int, str, str | None], bytes]] = {}

    async def encoded(self) -> bytes:
        """The summary as compact JSON: ``{"rev", "queueFields", "topics": [{"topic", "kind",
        "queues": [[brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag], ...],
        "orderConf"}, ...]}``, topics sorted."""
        async with self._lock:
            rev = await self._store.rev()
            if rev != self._rev:
                self._body = await self._refresh(rev)
                self._rev = rev
            return self._body

    async def _refresh(self, rev: int) -> bytes:
        overview = self._store.topic_overview
        index = await overview.index()
        stale = [t for t, r in index.revs.items()
                 if (known := self._rows.get(t)) is None or known.rev != r]
        self._rows = {t: self._rows[t] for t in index.revs if t in self._rows}
        for rows in await overview.rows(stale) if stale else []:
            self._rows[rows.topic] = rows
        encoded: dict[str, tuple[tuple[int, str, str | None], bytes]] = {}
        for topic in index.revs:
            rows = self._rows[topic]
            key = (rows.rev, topic_kind(topic, index.names), index.order_conf.get(topic))
            known_json = self._encoded.get(topic)
            if known_json is None or known_json[0] != key:
                known_json = (key, msgspec.json.encode(
                    {"topic": topic, "kind": key[1], "queues": rows.queues, "orderConf": key[2]}))
            encoded[topic] = known_json
        self._encoded = encoded
        head = msgspec.json.encode({"rev": rev, "queueFields": QUEUE_FIELDS})
        return b"".join((head[:-1], b',"topics":[',
                         b",".join(e[1] for e in encoded.values()), b"]}"))
