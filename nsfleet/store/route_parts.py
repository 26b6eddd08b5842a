"""The parts of route.lua's replies that recur from route to route, parsed once per worker: a
group's entry and a group's queue-data row, keyed by the very strings route.lua returned for them
(lua/route.lua's header). The BrokerData and QueueData made of them are shared by every route
that lists them unchanged, and so are their dicts (nsfleet.domain.model.SharedDicts).

Why: while a storm re-registers brokers, every topic's route changes and almost every read
misses the cache; at 300 groups each such read cost its worker ~0.8 ms of CPU putting together
the same 300 groups again, and ~0.3 ms writing their dicts (bench/route_assembly.py).

Coherent by construction: a part is found by the text it was made of, so no reply is ever
answered with a part older than itself. The tables are bounded; past ``MAX_PARTS`` one is
emptied and fills again (a part dropped is only made again)."""

from __future__ import annotations

from typing import Final

import msgspec

from nsfleet.domain.model import (
    MASTER_ID,
    PERM_WRITE,
    SHARED_DICTS,
    BrokerData,
    QueueData,
    is_writeable,
)

# Far more groups and row variants than a cluster has (a group's part is ~0.5 KB).
MAX_PARTS: Final = 16_384


class GroupPart(msgspec.Struct, gc=False, frozen=True):
    """One group's route entry ("<cluster>\\t<enableActingMaster>\\t<zoneName>", then
    "\\n<id>\\t<addr>\\t<member cluster>" per member), parsed; ``broker`` lists every member, as
    a route shows the group while all of them are live (None: no member)."""

    cluster: str
    acting: bool
    zone: str | None
    members: tuple[tuple[int, str], ...]  # (id, address), in the entry's order
    broker: BrokerData | None


class RouteParts:
    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], GroupPart] = {}
        self._queues: dict[tuple[str, str, bool], QueueData] = {}

    def group(self, name: str, entry: str) -> GroupPart:
        """Group ``name``'s part, from its entry ("" when it has no group row: no member)."""
        key = (name, entry)
        part = self._groups.get(key)
        if part is None:
            part = self._groups[key] = self._parse_group(name, entry)
            if part.broker is not None:
                SHARED_DICTS.add(part.broker)
        return part

    def broker(self, name: str, part: GroupPart, addrs: dict[int, str]) -> BrokerData:
        """The group as a route shows it while ``addrs`` are its members still live."""
        if part.broker is not None and len(addrs) == len(part.members):
            return part.broker
        return BrokerData(part.cluster, name, addrs, part.acting, part.zone)

    def queue(self, name: str, row: str, part: GroupPart, addrs: dict[int, str]) -> QueueData:
        """Group ``name``'s QueueData from its row "<readQueueNums>\\t<writeQueueNums>\\t<perm>
        \\t<topicSysFlag>" while ``addrs`` are its members still live: an acting-master group
        without its master shows no write perm (as the sweep will store it:
        lua/includes/cascade.lua)."""
        write_cleared = part.acting and MASTER_ID not in addrs
        key = (name, row, write_cleared)
        queue = self._queues.get(key)
        if queue is None:
            if len(self._queues) >= MAX_PARTS:
                self._queues.clear()
            rq, wq, perm, sysflag = map(int, row.split("\t"))
            if write_cleared and is_writeable(perm):
                perm -= PERM_WRITE
            queue = self._queues[key] = QueueData(name, rq, wq, perm, sysflag)
            SHARED_DICTS.add(queue)
        return queue

    def _parse_group(self, name: str, entry: str) -> GroupPart:
        if len(self._groups) >= MAX_PARTS:
            self._groups.clear()
        if not entry:
            return GroupPart("", False, None, (), None)
        head, *lines = entry.split("\n")
        cluster, acting, zone = head.split("\t", 2)
        members = tuple((int(i), addr) for i, addr, _ in (line.split("\t", 2) for line in lines))
        addrs = dict(members)
        broker = BrokerData(cluster, name, addrs, acting == "true", zone or None) if addrs \
            else None
        return GroupPart(cluster, acting == "true", zone or None, members, broker)
