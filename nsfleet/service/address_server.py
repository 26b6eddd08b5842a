"""RocketMQ's address server (``GET /rocketmq/nsaddr``): the NameServer list clients and brokers
fetch over HTTP instead of a fixed ``namesrvAddr`` (Java's DefaultTopAddressing, every 2 min).

The list is the remoting address of every worker alive now (each advertises its own, see
``presence``), then the fixed extra addresses of the fleet-wide setting (e.g. the Java
NameServers during a migration), as Java parses it: ``host:port;host:port``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nsfleet.domain import validation
from nsfleet.service.history import ChangeRecorder
from nsfleet.store import RouteStore
from nsfleet.store.address_tables import AddressTables

MAX_EXTRA = 64  # a list a client parses every 2 min: a few dozen addresses at most


@dataclass(frozen=True, slots=True)
class AddressList:
    workers: list[str]  # the live workers' advertised remoting addresses
    extra: list[str]  # the fixed extra addresses

    @property
    def nsaddr(self) -> str:
        """The answer's body: workers, then extra addresses no worker advertises."""
        return ";".join([*self.workers, *(a for a in self.extra if a not in self.workers)])


class AddressServer:
    def __init__(self, store: RouteStore, history: ChangeRecorder) -> None:
        """``history``: where changes of the extra addresses are recorded (the audit trail and
        the fleet's recent changes, as every change of the tables)."""
        self.tables = AddressTables.of(store)
        self.history = history

    async def current(self) -> AddressList:
        return AddressList(await self.tables.live_addresses(),
                           await self.tables.extra_addresses())

    async def change_extra(self, *, add: Iterable[str] = (), remove: Iterable[str] = (),
                           replace: bool = False) -> list[str]:
        """Change the fixed extra addresses fleet-wide (``replace``: the list becomes ``add``);
        the list after. ValidationError for anything that is not ``host:port``."""
        added = [validation.addr(a, "addresses") for a in add]
        removed = [validation.addr(a, "addresses") for a in remove]
        if len(set(added)) > MAX_EXTRA:
            raise validation.ValidationError("addresses", f"at most {MAX_EXTRA}")
        before = await self.tables.extra_addresses()
        after = await self.tables.change_extra(add=added, remove=removed, replace=replace)
        if len(after) > MAX_EXTRA:  # a concurrent add: undo ours rather than keep too many
            await self.tables.change_extra(add=before, replace=True)
            raise validation.ValidationError("addresses", f"at most {MAX_EXTRA} in all")
        if after != before:
            await self.history.record("address server extra addresses changed",
                                      added=sorted(set(after) - set(before)),
                                      removed=sorted(set(before) - set(after)), extra=after)
        return after
