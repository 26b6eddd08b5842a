"""Structural invariants of the Redis key schema (nsfleet/store/keys.py), checked by scanning
every key.

A removed group's queue rows still draining in chunks (``P:idx:cleanup:<name>``, see
docs/architecture.md "Bounded script time") are a consistent state, not orphans.

``orphans(redis, keys)`` returns a list of problems (empty when the schema is consistent): an index
entry without the row it points at, a row missing from its indexes, an empty container left behind,
or a key the schema does not know. Used by the stateful, concurrency and cluster tests.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from nsfleet.store.keys import Keys, escape, live_member

# Every value in one script call: a worker writing or draining meanwhile cannot show a half
# state (keys gone since the scan read as "none" and are left out). Streams are not read.
READ_ALL = """
local out = {}
for i, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k).ok
  local v = {}
  if t == 'hash' then v = redis.call('HGETALL', k)
  elseif t == 'set' then v = redis.call('SMEMBERS', k)
  elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1)
  elseif t == 'string' then v = {redis.call('GET', k)}
  elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') end
  out[i] = {t, v}
end
return out
"""


async def dump(redis: Any, keys: Keys) -> dict[str, Any]:
    """Every key of the namespace with its value (hash → dict, set → set, zset → dict, list),
    read at one instant."""
    names = sorted({k async for k in redis.scan_iter(match=f"{keys.prefix}:*", count=1000)})
    if not names:
        return {}
    out: dict[str, Any] = {}
    for name, (type_, flat) in zip(names, await redis.eval(READ_ALL, len(names), *names),
                                   strict=True):
        type_ = type_.decode() if isinstance(type_, bytes) else type_
        if type_ == "hash":
            out[name] = dict(zip(flat[::2], flat[1::2], strict=True))
        elif type_ == "set":
            out[name] = set(flat)
        elif type_ == "zset":
            out[name] = {m: float(s) for m, s in zip(flat[::2], flat[1::2], strict=True)}
        elif type_ == "list":
            out[name] = list(flat)
        elif type_ == "string":
            out[name] = flat[0]
    return out


def check(snapshot: dict[str, Any], keys: Keys) -> list[str]:
    """The problems found in a ``dump`` (see the module docstring)."""
    p = keys.prefix + ":"
    problems: list[str] = []
    rows: dict[str, dict[Any, Any]] = defaultdict(dict)
    for full, value in snapshot.items():
        key = full[len(p):]
        kind, _, rest = key.partition(":")
        if kind == "idx":
            sub, _, rest = rest.partition(":")
            kind = "idx:" + sub
        if kind == "queue":  # a topic may hold ':', a brokerName never does
            a, _, b = rest.rpartition(":")
            rows[kind][(a, b)] = value
        elif kind in ("broker", "idx:reg", "idx:tables", "idx:filters", "idx:conns",
                      "kv"):
            a, _, b = rest.partition(":")  # a cluster name never holds ':'
            rows[kind][(a, b)] = value
        elif kind in ("group", "idx:members", "idx:cluster", "idx:topic", "idx:broker-topics",
                      "idx:kv", "idx:member-clusters", "idx:mappings", "idx:worker",
                      "idx:cleanup"):
            rows[kind][rest] = value
        elif key in ("idx:clusters", "idx:topics", "idx:deadlines", "idx:kvns", "seq", "rev",
                     "config", "idx:cleanups", "idx:perm-clears", "idx:worker-addrs",
                     "nsaddr:extra", "idx:route-groups", "idx:filtered", "idx:group-ids",
                     "idx:group-names", "idx:group-seq"):
            rows[key][None] = value
        else:
            problems.append(f"unknown key {full}")
        if value in (None, {}, set(), []):
            problems.append(f"empty container {full}")

    def one(name: str) -> Any:
        return rows[name].get(None) or {}

    topics, clusters = set(one("idx:topics")), set(one("idx:clusters"))
    deadlines = one("idx:deadlines")
    queues, groups, members = rows["queue"], rows["group"], rows["idx:members"]
    broker_topics = rows["idx:broker-topics"]
    # A topic's set holds group numbers (or brokerNames, written before group numbers existed).
    group_names = one("idx:group-names")
    topic_idx = {t: {group_names.get(m, m) for m in members}
                 for t, members in rows["idx:topic"].items()}
    group_ids = one("idx:group-ids")
    if {v: k for k, v in group_ids.items()} != group_names:
        problems.append("idx:group-ids and idx:group-names are not each other's inverse")
    cluster_idx, regs = rows["idx:cluster"], rows["idx:reg"]

    for t in topics:
        if t not in topic_idx:
            problems.append(f"topic {t} listed in idx:topics without queue data")
    for t, names in topic_idx.items():
        if t not in topics:
            problems.append(f"idx:topic:{t} exists but {t} is not in idx:topics")
        for n in names:
            if (t, n) not in queues:
                problems.append(f"idx:topic:{t} lists {n} without its queue row")
    # A removed group's queue rows still to drain in chunks (P:idx:cleanup:<name>) are listed
    # there instead of under the group, which is gone.
    cleanups, cleanup = set(one("idx:cleanups")), rows["idx:cleanup"]
    for n in cleanups:
        if n not in cleanup:
            problems.append(f"idx:cleanups lists {n} without idx:cleanup:{n}")
        if n in groups:
            problems.append(f"group {n} registered while its old rows are still draining")
    for n in cleanup:
        if n not in cleanups:
            problems.append(f"idx:cleanup:{n} not listed in idx:cleanups")
    for (t, n), row in queues.items():
        if n not in topic_idx.get(t, ()):
            problems.append(f"queue row {t}/{n} missing from idx:topic:{t}")
        draining = t in cleanup.get(n, ())
        if not draining and t not in broker_topics.get(n, ()):
            problems.append(f"queue row {t}/{n} missing from idx:broker-topics:{n}")
        if not draining and n not in groups:
            problems.append(f"queue row {t}/{n} without group {n}")
        if row.get("topic") != t or row.get("brokerName") != n:
            problems.append(f"queue row {t}/{n} carries {row.get('topic')}/{row.get('brokerName')}")
    for n, ts in broker_topics.items():
        for t in ts:
            if (t, n) not in queues:
                problems.append(f"idx:broker-topics:{n} lists {t} without its queue row")
    for n, row in groups.items():
        if not members.get(n):
            problems.append(f"group {n} without members")
        if n not in cluster_idx.get(row.get("cluster"), ()):
            problems.append(f"group {n} not listed in its cluster {row.get('cluster')}")
    for n in members:
        if n not in groups:
            problems.append(f"idx:members:{n} without group row")
    for c, names in cluster_idx.items():
        if c not in clusters:
            problems.append(f"idx:cluster:{c} exists but {c} is not in idx:clusters")
        for n in names:
            if n not in groups:
                problems.append(f"cluster {c} lists {n} without its group row")
    for c in clusters:
        if c not in cluster_idx:
            problems.append(f"cluster {c} in idx:clusters without groups")
    for member in deadlines:
        c, _, a = member.partition("\t")
        if (c, a) not in regs:
            problems.append(f"deadline {c}/{a} without registration record")
    for c, a in regs:
        if live_member(c, a) not in deadlines:
            problems.append(f"registration record {c}/{a} without deadline")
    for n, addrs in rows["idx:member-clusters"].items():
        for a in addrs:
            if a not in members.get(n, {}).values():
                problems.append(f"idx:member-clusters:{n} lists {a}, not a member")
    route_groups = one("idx:route-groups")
    for n, row in groups.items():
        if route_groups.get(n) != group_route(row, members.get(n, {}),
                                              rows["idx:member-clusters"].get(n, {})):
            problems.append(f"idx:route-groups:{n} is {route_groups.get(n)!r}, not what group "
                            f"{n} shows")
    for n in route_groups:
        if n not in groups:
            problems.append(f"idx:route-groups lists {n} without its group row")
    filtered = {live_member(c, a) for c, a in rows["idx:filters"]}
    if set(one("idx:filtered")) != filtered:
        problems.append(f"idx:filtered is {sorted(one('idx:filtered'))}, filter lists exist for "
                        f"{sorted(filtered)}")
    for t, bnames in rows["idx:mappings"].items():
        for n in bnames:
            if (t, n) not in queues:
                problems.append(f"idx:mappings:{t} maps {n} without its queue row")
    for kind in ("broker", "idx:tables", "idx:filters", "idx:conns"):
        for c, a in rows[kind]:
            if (c, a) not in regs:
                problems.append(f"{kind} {c}/{a} without registration record")
    kvns, kv_tables = set(one("idx:kvns")), rows["idx:kv"]
    for ns, table in kv_tables.items():
        if not any(escape(n) == ns for n in kvns):
            problems.append(f"idx:kv:{ns} without its namespace in idx:kvns")
        for k in table:
            if (ns, escape(k)) not in rows["kv"]:
                problems.append(f"idx:kv:{ns} key {k} without its kv row")
    for ns, k in rows["kv"]:
        row = rows["kv"][(ns, k)]
        if kv_tables.get(ns, {}).get(row.get("key")) != row.get("value"):
            problems.append(f"kv row {ns}/{k} not mirrored in idx:kv:{ns}")
    return problems


def group_route(row: dict[str, str], members: dict[str, str],
                clusters: dict[str, str]) -> str:
    """A group's P:idx:route-groups entry as lua/includes/group_routes.lua derives it."""
    head = f"{row['cluster']}\t{row.get('enableActingMaster', 'false')}\t{row.get('zoneName', '')}"
    return "\n".join([head, *(f"{i}\t{a}\t{clusters.get(a, row['cluster'])}"
                              for i, a in sorted(members.items(), key=lambda m: int(m[0])))])


async def orphans(redis: Any, keys: Keys) -> list[str]:
    return check(await dump(redis, keys), keys)
