"""Human-readable renderings of the admin commands' JSON (rich tables)."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table
from rich.text import Text

from nsfleet.domain.model import PERM_INHERIT, PERM_READ, PERM_WRITE


def _table(*columns: str, title: str) -> Table:
    # Wide enough for the title: rich otherwise folds it to the width of narrow columns.
    return Table(*columns, title=Text(title), min_width=len(title) + 4)


def _row(table: Table, *cells: str) -> None:
    # Text, not str: a cell (a KV value, say) must never be read as rich markup.
    table.add_row(*(Text(c) for c in cells))


def perm_text(perm: int) -> str:
    """PermName.perm2String: "RWX" with '-' for missing bits (X = inherit)."""
    return "".join(c if perm & bit else "-"
                   for c, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))


def role(broker_id: int) -> str:
    return "MASTER" if broker_id == 0 else "SLAVE"


def seconds_text(ms: float) -> str:
    return f"{ms / 1000:.1f} s"


def _addrs_text(addrs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(addrs.items(), key=lambda kv: int(kv[0])))


REMOTING_NO_HEARTBEATS = ("Last Heartbeat: no NameServer request over remoting carries it (mqadmin "
                          "asks each broker); --server http://HOST:8080 shows it")


def cluster_table(info: dict[str, Any], live: list[dict[str, Any]], *,
                  heartbeats_known: bool = True) -> Table:
    """clusterList: one row per broker of every group, with its last heartbeat (when the
    protocol tells it: not over remoting, which the caption says)."""
    beats = {(b["clusterName"], b["brokerAddr"]): b for b in live}
    now = time.time() * 1000
    table = _table("Cluster", "Broker Name", "BID", "Role", "Addr", "Zone", "Last Heartbeat",
                   title="Clusters")
    groups = info.get("brokerAddrTable", {})
    for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
        for name in sorted(names):
            group = groups.get(name) or {}
            addrs = group.get("brokerAddrs") or {}
            if not addrs:  # a group left behind without members (Java shows it too)
                _row(table, cluster, name, "-", "-", "-", group.get("zoneName") or "", "-")
            for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0])):
                beat = beats.get((cluster, addr))
                age = seconds_text(now - beat["lastUpdateTimestamp"]) + " ago" if beat else "-"
                _row(table, cluster, name, str(bid), role(int(bid)), addr,
                     group.get("zoneName") or "", age)
    if not heartbeats_known:
        table.caption = REMOTING_NO_HEARTBEATS
    return table


def broker_table(brokers: list[dict[str, Any]]) -> Table:
    now = time.time() * 1000
    table = _table("Cluster", "Broker Name", "BID", "Role", "Addr", "Last Heartbeat",
                   "Expires In", "Timeout", "DV Counter", title=f"Live brokers ({len(brokers)})")
    for b in brokers:
        dv = b.get("dataVersion") or {}
        known = "lastUpdateTimestamp" in b  # not over remoting: no request lists it
        _row(table, b["clusterName"], b["brokerName"], str(b["brokerId"]),
             role(int(b["brokerId"])), b["brokerAddr"],
             seconds_text(now - b["lastUpdateTimestamp"]) + " ago" if known else "-",
             seconds_text(b["deadline"] - now) if known else "-",
             seconds_text(b["heartbeatTimeoutMillis"]) if known else "-",
             str(dv.get("counter", 0)) if known else "-")
    if any("lastUpdateTimestamp" not in b for b in brokers):
        table.caption = REMOTING_NO_HEARTBEATS
    return table


def changes_table(changes: list[dict[str, Any]]) -> Table:
    """The fleet's recent changes, newest first: local time, worker, action, audit fields."""
    table = _table("Time", "Worker", "Action", "Detail", title=f"Recent changes ({len(changes)})")
    for c in changes:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c["time"] / 1000))
        detail = " ".join(f"{k}={v}" for k, v in sorted(c["detail"].items()))
        _row(table, f"{when}.{c['time'] % 1000:03d}", c["worker"], c["action"], detail)
    return table


def route_tables(topic: str, route: dict[str, Any]) -> list[Table]:
    """topicRoute -l: the queue datas joined with their broker groups."""
    groups = {b["brokerName"]: b for b in route.get("brokerDatas", [])}
    queues = _table("Cluster", "Broker Name", "Broker Addrs", "Read", "Write", "Perm",
                    "Sys Flag", title=f"Route of {topic}")
    for q in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"]):
        group = groups.get(q["brokerName"], {})
        _row(queues, group.get("cluster", "-"), q["brokerName"],
             _addrs_text(group.get("brokerAddrs", {})), str(q["readQueueNums"]),
             str(q["writeQueueNums"]), perm_text(q["perm"]), str(q.get("topicSysFlag", 0)))
    if route.get("orderTopicConf"):
        queues.caption = Text(f"orderTopicConf: {route['orderTopicConf']}")
    return [queues]


def list_table(title: str, column: str, items: list[str]) -> Table:
    table = _table(column, title=f"{title} ({len(items)})")
    for item in items:
        _row(table, item)
    return table


def pairs_table(title: str, columns: tuple[str, str], rows: list[tuple[str, str]]) -> Table:
    table = _table(*columns, title=title)
    for a, b in rows:
        _row(table, a, b)
    return table


def broker_set_tables(sets: list[dict[str, Any]]) -> list[Table]:
    """getSyncStateSet: each controller broker set's master, epochs and SyncStateSet, then
    every replica with its role, liveness and whether it is in sync."""
    summary = _table("Broker Set", "Cluster", "Master", "Master Addr", "Master Epoch",
                     "SyncStateSet", "SSS Epoch", title=f"Broker sets ({len(sets)})")
    replicas = _table("Broker Set", "BID", "Role", "Addr", "Alive", "In Sync",
                      title=f"Replicas ({sum(len(s['replicas']) for s in sets)})")
    for s in sets:
        master = s["masterBrokerId"]
        _row(summary, s["brokerName"], s["clusterName"] or "-",
             "none" if master is None else str(master), s["masterAddress"] or "-",
             str(s["masterEpoch"]), ";".join(map(str, s["syncStateSet"])) or "-",
             str(s["syncStateSetEpoch"]))
        for r in s["replicas"]:
            _row(replicas, s["brokerName"], str(r["brokerId"]),
                 "MASTER" if r["brokerId"] == master else "SLAVE", r["brokerAddress"],
                 "alive" if r["alive"] else "not alive", "yes" if r["inSync"] else "no")
    return [summary, replicas]
