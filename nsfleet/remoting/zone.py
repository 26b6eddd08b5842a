"""Zone filtering of a route (ZoneRouteRPCHook.doAfterResponse).

A broker group is kept when it has no master (no id 0) or its zone equals the requested zone
(ignoring case); a dropped group loses its queue data and the filter servers of its addresses.
Java skips (drops silently, keeping its queue data) only a group whose ``brokerAddrs`` is *null*;
an empty map has no master, so such a group is kept. nsfleet's map is never null.
"""

from __future__ import annotations

import msgspec

from nsfleet.domain.model import MASTER_ID, TopicRouteData


def filter_by_zone(route: TopicRouteData, zone: str) -> TopicRouteData:
    kept, dropped_names, dropped_addrs = [], set(), set()
    for b in route.broker_datas:
        if MASTER_ID not in b.broker_addrs or (b.zone_name or "").lower() == zone.lower():
            kept.append(b)
        else:
            dropped_names.add(b.broker_name)
            dropped_addrs.update(b.broker_addrs.values())
    return msgspec.structs.replace(
        route, broker_datas=kept,
        queue_datas=[q for q in route.queue_datas if q.broker_name not in dropped_names],
        filter_server_table={a: f for a, f in route.filter_server_table.items()
                             if a not in dropped_addrs})
