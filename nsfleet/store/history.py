"""The fleet's recent changes (``P:history``): a capped Redis stream every worker appends to after
a write that changed something, so each worker shows the same history (console, ``GET
/v1/changes``, ``nsfleet admin changes``).

One entry per change: fields ``action`` (what happened, as the audit log names it), ``worker``
(the worker that did it), ``detail`` (JSON object of the audit fields). The stream entry id gives
the time (epoch ms of the Redis clock). XADD MAXLEN ~ keeps roughly the last ``HISTORY_LENGTH``
entries, trimmed a whole node at a time, so an append stays O(1).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from nsfleet.store.redis_errors import translating_redis_errors

HISTORY_LENGTH = 10_000  # entries kept (about: MAXLEN ~)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One change to record: what happened and its audit fields."""

    action: str
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RecordedChange:
    """One entry read back: ``id`` is the stream id ``<ms>-<seq>``, ``time_ms`` its time."""

    id: str
    time_ms: int
    action: str
    worker: str
    detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "time": self.time_ms, "action": self.action,
                "worker": self.worker, "detail": self.detail}


def _fields(change: HistoryEntry, worker: str) -> dict[str, str]:
    return {"action": change.action, "worker": worker,
            "detail": json.dumps(change.detail, separators=(",", ":"), sort_keys=True,
                                 default=str)}


def _decode(entry_id: str, fields: dict[str, str]) -> RecordedChange:
    try:
        detail = json.loads(fields.get("detail") or "{}")
    except ValueError:
        detail = {"unreadable": fields.get("detail")}
    return RecordedChange(entry_id, int(entry_id.split("-", 1)[0]), fields.get("action", "?"),
                          fields.get("worker", "?"), detail if isinstance(detail, dict) else {})


@translating_redis_errors
class ChangeHistory:
    """Appends to and reads the capped stream of one namespace. ``worker`` names the worker
    that appends (its NameServer sets it), on every entry."""

    def __init__(self, redis: Redis | RedisCluster, key: str, *,
                 length: int = HISTORY_LENGTH) -> None:
        self.redis = redis
        self.key = key
        self.length = length
        self.worker = "-"

    async def append(self, changes: Sequence[HistoryEntry]) -> None:
        """Append entries, in order (one round trip for any number)."""
        if len(changes) == 1:
            await self.redis.xadd(self.key, _fields(changes[0], self.worker), maxlen=self.length,
                                  approximate=True)
            return
        pipe = self.redis.pipeline(transaction=False)
        for change in changes:
            pipe.xadd(self.key, _fields(change, self.worker), maxlen=self.length, approximate=True)
        await pipe.execute()

    async def recent(self, count: int, *, before: str | None = None) -> list[RecordedChange]:
        """The newest ``count`` entries, newest first; with ``before`` (an entry id), those
        older than it (the next page)."""
        top = f"({before}" if before else "+"
        entries = await self.redis.xrevrange(self.key, max=top, min="-", count=count)
        return [_decode(entry_id, fields) for entry_id, fields in entries]
