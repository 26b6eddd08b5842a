"""Recording the fleet's recent changes: each change of the tables is logged on the audit trail
(``audit``) and appended to the fleet-wide history (``P:history``, ``nsfleet.store.history``),
with the client address and account that asked.

A history write never fails the request it records: it is bounded by ``APPEND_TIMEOUT`` and a
failure is logged and counted (``nsfleet_redis_errors_total{operation="history"}``), the change
itself having been made. Only changes are recorded, so an unchanged re-registration or heartbeat
costs nothing here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from nsfleet.domain.audit import audit, client_account, client_address
from nsfleet.metrics import Metrics
from nsfleet.store.history import ChangeHistory, HistoryEntry, RecordedChange

log = structlog.get_logger(__name__)
APPEND_TIMEOUT = 1.0  # seconds a history write may add to the request it records


class ChangeRecorder:
    def __init__(self, history: ChangeHistory, metrics: Metrics) -> None:
        self._history = history
        self._metrics = metrics

    async def record(self, action: str, **fields: Any) -> None:
        """Audit one change and append it to the history."""
        audit(action, **fields)
        await self.append([HistoryEntry(action, self._detail(fields))])

    async def record_many(self, changes: list[tuple[str, dict[str, Any]]]) -> None:
        """Audit several changes and append them in one round trip."""
        for action, fields in changes:
            audit(action, **fields)
        await self.append([HistoryEntry(action, self._detail(fields))
                           for action, fields in changes])

    @staticmethod
    def _detail(fields: dict[str, Any]) -> dict[str, Any]:
        detail = {k: v for k, v in fields.items() if v is not None}
        remote, account = client_address.get(), client_account.get()
        if remote != "-":
            detail["remote"] = remote
        if account != "-":
            detail["account"] = account
        return detail

    async def append(self, changes: list[HistoryEntry]) -> None:
        if not changes:
            return
        try:
            async with asyncio.timeout(APPEND_TIMEOUT):
                await self._history.append(changes)
        except Exception as exc:  # the change is made: its record must not fail the request
            self._metrics.redis_errors.labels("history").inc()
            log.warning("change history not written", error=str(exc) or type(exc).__name__,
                        changes=len(changes))

    async def recent(self, count: int, before: str | None = None) -> list[RecordedChange]:
        return await self._history.recent(count, before=before)
