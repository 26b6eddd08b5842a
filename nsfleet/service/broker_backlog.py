"""What brokers sent a worker while the store was away, kept for the replay when it is back
(``nsfleet.service.outage.StoreOutage`` owns the backlog and runs the replay).

A Java NameServer never loses a live broker to a store it does not have. While Redis is away a
worker answers registrations and heartbeats with an error naming the store (never SUCCESS for what
was not stored), but remembers the newest of them per broker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from nsfleet.domain.model import BrokerRegistration

BACKLOG_MAX_BROKERS = 10_000  # more brokers than any fleet has; bounds the worker's memory


@dataclass(slots=True)
class Remembered:
    """The newest thing one broker sent this worker while the store was away."""

    cluster: str
    addr: str
    at: float  # time.monotonic() when it arrived
    timeout_s: float  # the broker's heartbeat timeout: older than this, it proves nothing
    registration: BrokerRegistration | None = None  # None: a heartbeat only
    connection: str | None = None  # the remoting connection it came over


class BrokerBacklog:
    """The newest registration or heartbeat per broker that the store could not take."""

    def __init__(self, max_brokers: int = BACKLOG_MAX_BROKERS) -> None:
        self.max_brokers = max_brokers
        self._items: dict[tuple[str, str], Remembered] = {}

    def __len__(self) -> int:
        return len(self._items)

    def registration(self, reg: BrokerRegistration, connection: str | None,
                     timeout_s: float) -> None:
        assert reg.cluster is not None and reg.addr is not None
        self._put(Remembered(reg.cluster, reg.addr, time.monotonic(), timeout_s, reg,
                             connection))

    def heartbeat(self, cluster: str, addr: str, timeout_s: float) -> None:
        """A heartbeat keeps an earlier registration (the table it refers to) and refreshes
        when it proves the broker alive."""
        known = self._items.get((cluster, addr))
        if known is not None:
            known.at = time.monotonic()
            return
        self._put(Remembered(cluster, addr, time.monotonic(), timeout_s))

    def connection_closed(self, cluster: str, addr: str, connection: str) -> None:
        """A registration that came over a closed connection no longer keeps it open."""
        known = self._items.get((cluster, addr))
        if known is not None and known.connection == connection:
            known.connection = None

    def restore(self, item: Remembered) -> None:
        """Put back what a replay could not apply (the store went away again)."""
        self._put(item)

    def _put(self, item: Remembered) -> None:
        key = (item.cluster, item.addr)
        self._items.pop(key, None)
        self._items[key] = item
        while len(self._items) > self.max_brokers:
            del self._items[next(iter(self._items))]

    def take(self) -> list[Remembered]:
        """Everything remembered that still proves its broker alive (sent within its heartbeat
        timeout), oldest first; the backlog is emptied."""
        now = time.monotonic()
        items = [i for i in self._items.values() if now - i.at < i.timeout_s]
        self._items.clear()
        return items

