"""The console's topic table in one answer (``GET /v1/topics/summary``): every topic with its kind
(``nsfleet.domain.topic_kinds``), the queue data of each group serving it and its
ORDER_TOPIC_CONFIG entry. Read whole from the store only when the fleet's change counter moved
since the last read (what the answer shows changes only with it), so a console refreshing every
few seconds costs one GET of ``P:rev``.
"""

from __future__ import annotations

import asyncio
import json

from nsfleet.domain.topic_kinds import topic_kind
from nsfleet.store import RouteStore

QUEUE_FIELDS = ["brokerName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag"]


class TopicSummary:
    def __init__(self, store: RouteStore) -> None:
        self._store = store
        self._lock = asyncio.Lock()
        self._rev = -1
        self._body = b""

    async def encoded(self) -> bytes:
        """The summary as compact JSON: ``{"rev", "queueFields", "topics": [{"topic", "kind",
        "queues": [[brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag], ...],
        "orderConf"}, ...]}``, topics sorted."""
        async with self._lock:
            rev = await self._store.rev()
            if rev != self._rev:
                self._body = await self._read(rev)
                self._rev = rev
            return self._body

    async def _read(self, rev: int) -> bytes:
        info = await self._store.cluster_info()
        own = set(info.cluster_addr_table) | set(info.broker_addr_table)
        rows = await self._store.topic_overview.read()
        topics = [{"topic": r.topic, "kind": topic_kind(r.topic, own),
                   "queues": [list(q) for q in r.queues], "orderConf": r.order_conf}
                  for r in rows]
        return json.dumps({"rev": rev, "queueFields": QUEUE_FIELDS, "topics": topics},
                          separators=(",", ":")).encode()
