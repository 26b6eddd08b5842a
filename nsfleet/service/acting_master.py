"""The acting-master route rewrite (RouteInfoManager.pickupTopicRouteData, with
``namesrvConfig.supportActingMaster``).

When a broker group with ``enableActingMaster`` has lost its master and its queue data for the
topic is read-only, RocketMQ presents the group's lowest-id member as id 0 (the "acting master"),
so clients that only talk to id 0 can still read. The rewrite is skipped for the
``rmq_sys_SYNC_BROKER_MEMBER_*`` topics, and applies only when at least one listed group lacks id 0.

This is a pure function over a route already read from the store: the stored tables are never
changed, and ``route`` itself is not modified.
"""

from __future__ import annotations

import msgspec

from nsfleet.domain.model import MASTER_ID, SYNC_BROKER_MEMBER_PREFIX, TopicRouteData, is_writeable


def apply_acting_master(route: TopicRouteData, topic: str) -> TopicRouteData:
    """``route`` with acting masters presented as id 0; ``route`` itself when nothing changes."""
    if topic.startswith(SYNC_BROKER_MEMBER_PREFIX) or not route.broker_datas \
            or not route.queue_datas:
        return route
    if not any(b.broker_addrs and MASTER_ID not in b.broker_addrs for b in route.broker_datas):
        return route
    # Java looks at the first QueueData of the group (there is one per group and topic).
    perms: dict[str, int] = {}
    for q in route.queue_datas:
        perms.setdefault(q.broker_name, q.perm)
    rewritten = []
    changed = False
    for b in route.broker_datas:
        perm = perms.get(b.broker_name)
        if (b.broker_addrs and MASTER_ID not in b.broker_addrs and b.enable_acting_master
                and perm is not None and not is_writeable(perm)):
            addrs = dict(b.broker_addrs)
            addrs[MASTER_ID] = addrs.pop(min(addrs))
            b = msgspec.structs.replace(b, broker_addrs=addrs)
            changed = True
        rewritten.append(b)
    return msgspec.structs.replace(route, broker_datas=rewritten) if changed else route
