"""Structural invariants of the Redis key schema (nsfleet/store/keys.py, docs/key-schema.md),
checked by scanning every key.

The queue data (topicQueueTable) is checked in the layout ``P:layout`` names
(docs/queue-data-layouts.md): absent or ``"1"``, layout 1 (one hash per (topic, group) row);
``"2"``, layout 2 (one hash per topic); ``"moving"``, the move from 1 to 2 under way, where layout
1's keys hold the queue data and layout 2's may be partly written. Every other invariant is the
same in both layouts.

A removed group's queue rows still draining in chunks (``P:idx:cleanup:<name>`` in layout 1,
``P:idx:cleanup-topics:<name>`` in layout 2; see docs/architecture.md "Bounded script time") are
a consistent state, not orphans. Layout 2's lists are hashes, field -> topics joined by "\\n": a
superset of the group's rows (a listed topic may have no row, or be listed twice); a field
``"#"``, when present, is a counter holding an integer, not a list.

``orphans(redis, keys)`` returns a list of problems (empty when the schema is consistent): an index
entry without the row it points at, a row missing from its indexes, an empty container left behind,
a key of the other layout, or a key the schema does not know. ``check(dump(...), keys)`` is the
same on a snapshot. Used by the stateful, concurrency and cluster tests.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from nsfleet.store.keys import ROUTE_GROUPS_HASHTABLE, Keys, escape, live_member

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


# Keys "<kind>:<a>:<b>" (a: a cluster name or KV namespace, which never hold ':').
PAIR_KINDS = frozenset({"broker", "idx:reg", "idx:tables", "idx:filters", "idx:conns", "kv"})
# Keys "<kind>:<id>" (the id a brokerName, cluster, topic, namespace or worker).
ONE_KINDS = frozenset({
    "group", "idx:members", "idx:cluster", "idx:kv", "idx:member-clusters", "idx:mappings",
    "idx:worker",
    "idx:topic", "idx:broker-topics", "idx:cleanup",  # layout 1
    "topic", "idx:group-topics", "idx:cleanup-topics",  # layout 2
})
# Keys without an id.
SINGLE_KEYS = frozenset({
    "idx:clusters", "idx:topics", "idx:deadlines", "idx:kvns", "seq", "rev", "config",
    "idx:cleanups", "idx:perm-clears", "idx:worker-addrs", "nsaddr:extra", "idx:route-groups",
    "idx:filtered", "layout", "layout-move",
    "idx:group-ids", "idx:group-names", "idx:group-seq",  # layout 1
})
# The queue data's own keys in each layout (the kinds above), reported when left in the other
# layout. Layout 1's group numbers (P:idx:group-ids, -names, -seq) are not among them: layout 2
# neither reads nor writes them, so a store that starts in layout 2 never has them, but one moved
# from layout 1 may keep them until the move deletes them: tolerated there, not required.
LAYOUT_KINDS = {
    "1": ("queue", "idx:topic", "idx:broker-topics", "idx:cleanup"),
    "2": ("topic", "idx:group-topics", "idx:cleanup-topics"),
}
LAYOUTS = ("1", "2", "moving")
# A layout 2 row: readQueueNums, writeQueueNums, perm, topicSysFlag as decimal strings.
TOPIC_ROW = re.compile(r"-?[0-9]+(?:\t-?[0-9]+){3}")
# The field of a group's lists hash that counts, not lists (docs/queue-data-layouts.md).
COUNTER = "#"
INTEGER = re.compile(r"-?[0-9]+")


@dataclass
class Snapshot:
    """A ``dump`` sorted by kind: ``rows[kind][id]`` is a key's value (id a string, a pair, or
    None for a key without an id) and ``names[kind]`` the full names of its keys."""

    rows: dict[str, dict[Any, Any]] = field(default_factory=lambda: defaultdict(dict))
    names: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def one(self, name: str) -> Any:
        return self.rows[name].get(None) or {}


def parse(snapshot: dict[str, Any], keys: Keys) -> tuple[Snapshot, list[str]]:
    """The snapshot by kind, and the problems of single keys: unknown, empty."""
    p = keys.prefix + ":"
    out, problems = Snapshot(), []
    for full, value in snapshot.items():
        key = full[len(p):]
        kind, _, rest = key.partition(":")
        if kind == "idx":
            sub, _, rest = rest.partition(":")
            kind = "idx:" + sub
        if kind == "queue":  # a topic may hold ':', a brokerName never does
            a, _, b = rest.rpartition(":")
            out.rows[kind][(a, b)] = value
        elif kind in PAIR_KINDS:
            a, _, b = rest.partition(":")
            out.rows[kind][(a, b)] = value
        elif kind in ONE_KINDS:
            out.rows[kind][rest] = value
        elif key in SINGLE_KEYS:
            kind = key
            out.rows[kind][None] = value
        else:
            problems.append(f"unknown key {full}")
            kind = ""
        if kind:
            out.names[kind].append(full)
        if value in (None, {}, set(), []):
            problems.append(f"empty container {full}")
    return out, problems


def check(snapshot: dict[str, Any], keys: Keys) -> list[str]:
    """The problems found in a ``dump`` (see the module docstring)."""
    s, problems = parse(snapshot, keys)
    layout = s.rows["layout"].get(None) or "1"
    if layout not in LAYOUTS:
        problems.append(f"P:layout is {layout!r}, not a layout: its queue data is not checked")
    else:
        problems += check_layout_keys(s, layout)
    if layout in ("1", "moving"):
        problems += check_rows_layout(s)
    if layout == "moving":
        problems += check_topic_values(s)
    elif layout == "2":
        problems += check_topics_layout(s)
    problems += check_groups(s)
    problems += check_brokers(s)
    problems += check_kv(s)
    return problems


def check_layout_keys(s: Snapshot, layout: str) -> list[str]:
    """No key of the other layout (either layout's keys while moving), and the move's record
    only while moving."""
    problems = []
    for other in ("1", "2"):
        if layout in (other, "moving"):
            continue
        for kind in LAYOUT_KINDS[other]:
            for name in s.names[kind]:
                problems.append(f"a layout {other} key left in layout {layout}: {name}")
    if layout != "moving":
        for name in s.names["layout-move"]:
            problems.append(f"the move's record {name} in layout {layout}")
    return problems


def check_rows_layout(s: Snapshot) -> list[str]:
    """Layout 1's queue data: P:queue:<t>:<b> rows, the route index by group number, the
    groups' topic sets and the cleanup records."""
    problems = []
    topics, queues = set(s.one("idx:topics")), s.rows["queue"]
    groups, broker_topics = s.rows["group"], s.rows["idx:broker-topics"]
    # A topic's set holds group numbers (or brokerNames, written before group numbers existed).
    group_names = s.one("idx:group-names")
    topic_idx = {t: {group_names.get(m, m) for m in members}
                 for t, members in s.rows["idx:topic"].items()}
    if {v: k for k, v in s.one("idx:group-ids").items()} != group_names:
        problems.append("idx:group-ids and idx:group-names are not each other's inverse")
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
    cleanup = s.rows["idx:cleanup"]
    problems += check_cleanup_records(s, cleanup, "idx:cleanup")
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
    problems += check_mappings(s, set(queues))
    return problems


def check_topics_layout(s: Snapshot) -> list[str]:
    """Layout 2's queue data: P:topic:<t> hashes (a field per group with a row), the groups'
    topic lists (a superset of their rows: a listed topic without a row is fine, and a topic
    may be listed twice) and the cleanup records (lists of a removed group still draining)."""
    problems = check_topic_values(s)
    topics, topic_rows = set(s.one("idx:topics")), s.rows["topic"]
    groups, cleanups = s.rows["group"], set(s.one("idx:cleanups"))
    group_lists = lists_of(s, "idx:group-topics", problems)
    cleanup_lists = lists_of(s, "idx:cleanup-topics", problems)
    for t in topics:
        if t not in topic_rows:
            problems.append(f"topic {t} listed in idx:topics without queue data")
    for t, row in topic_rows.items():
        if t not in topics:
            problems.append(f"topic:{t} exists but {t} is not in idx:topics")
        for n in row:
            if n in cleanups and t in cleanup_lists.get(n, ()):
                continue  # draining: listed in the cleanup record, the group is gone
            if n not in groups:
                problems.append(f"queue row {t}/{n} without group {n}")
            if t not in group_lists.get(n, ()):
                problems.append(f"queue row {t}/{n} missing from idx:group-topics:{n}")
    # A group's lists go with the group: deleted with it, or renamed to its cleanup record
    # when its rows are left to drain.
    for n in group_lists:
        if n not in groups:
            problems.append(f"idx:group-topics:{n} without group row")
    problems += check_cleanup_records(s, cleanup_lists, "idx:cleanup-topics")
    problems += check_mappings(s, {(t, n) for t, row in topic_rows.items() for n in row})
    return problems


def check_topic_values(s: Snapshot) -> list[str]:
    """Every field of every P:topic:<t> hash holds "rq\\twq\\tperm\\tflag", four integers."""
    problems = []
    for t, row in s.rows["topic"].items():
        if not isinstance(row, dict):
            problems.append(f"topic:{t} is not a hash")
            continue
        for n, value in row.items():
            if not TOPIC_ROW.fullmatch(value):
                problems.append(f"topic:{t} row of {n} is {value!r}, not four integers")
    return problems


def lists_of(s: Snapshot, kind: str, problems: list[str]) -> dict[str, set[str]]:
    """The topics each brokerName's lists (``kind``: hashes, field → topics joined by "\\n")
    name; a field that names no topic, or a counter ``"#"`` not an integer, is a problem."""
    out: dict[str, set[str]] = {}
    for n, lists in s.rows[kind].items():
        if not isinstance(lists, dict):
            problems.append(f"{kind}:{n} is not a hash")
            continue
        out[n] = set()
        for f, text in lists.items():
            if f == COUNTER:
                if not INTEGER.fullmatch(text):
                    problems.append(f"{kind}:{n} counter {COUNTER} is {text!r}, not an integer")
                continue
            listed = [t for t in text.split("\n") if t]
            if not listed:
                problems.append(f"{kind}:{n} field {f} lists no topic: {text!r}")
            out[n].update(listed)
    return out


def check_cleanup_records(s: Snapshot, records: dict[str, Any], kind: str) -> list[str]:
    """P:idx:cleanups names exactly the brokerNames with a cleanup record (``kind``)."""
    problems = []
    cleanups = set(s.one("idx:cleanups"))
    for n in cleanups:
        if n not in records:
            problems.append(f"idx:cleanups lists {n} without {kind}:{n}")
    for n in records:
        if n not in cleanups:
            problems.append(f"{kind}:{n} not listed in idx:cleanups")
    return problems


def check_mappings(s: Snapshot, queue_rows: set[tuple[str, str]]) -> list[str]:
    """A static topic's mapping of a group only beside the group's row of the topic."""
    problems = []
    for t, bnames in s.rows["idx:mappings"].items():
        for n in bnames:
            if (t, n) not in queue_rows:
                problems.append(f"idx:mappings:{t} maps {n} without its queue row")
    return problems


def check_groups(s: Snapshot) -> list[str]:
    """Groups (brokerAddrTable), their members and clusters (clusterAddrTable)."""
    problems = []
    groups, members = s.rows["group"], s.rows["idx:members"]
    clusters, cluster_idx = set(s.one("idx:clusters")), s.rows["idx:cluster"]
    for n in s.one("idx:cleanups"):
        if n in groups:
            problems.append(f"group {n} registered while its old rows are still draining")
    for n, row in groups.items():
        if not members.get(n):
            problems.append(f"group {n} without members")
        if n not in cluster_idx.get(row.get("cluster"), ()):
            problems.append(f"group {n} not listed in its cluster {row.get('cluster')}")
    for n in members:
        if n not in groups:
            problems.append(f"idx:members:{n} without group row")
    # route.lua lists a group's members unread while no deadline has passed: each must have one.
    deadlines = set(s.one("idx:deadlines"))
    for n, by_id in members.items():
        cluster = groups.get(n, {}).get("cluster", "")
        for a in by_id.values():
            member_cluster = s.rows["idx:member-clusters"].get(n, {}).get(a, cluster)
            if live_member(member_cluster, a) not in deadlines:
                problems.append(f"member {a} of {n} without a deadline under "
                                f"{member_cluster}")
    for c, names in cluster_idx.items():
        if c not in clusters:
            problems.append(f"idx:cluster:{c} exists but {c} is not in idx:clusters")
        for n in names:
            if n not in groups:
                problems.append(f"cluster {c} lists {n} without its group row")
    for c in clusters:
        if c not in cluster_idx:
            problems.append(f"cluster {c} in idx:clusters without groups")
    for n, addrs in s.rows["idx:member-clusters"].items():
        for a in addrs:
            if a not in members.get(n, {}).values():
                problems.append(f"idx:member-clusters:{n} lists {a}, not a member")
    route_groups = s.one("idx:route-groups")
    for n, row in groups.items():
        if route_groups.get(n) != group_route(row, members.get(n, {}),
                                              s.rows["idx:member-clusters"].get(n, {})):
            problems.append(f"idx:route-groups:{n} is {route_groups.get(n)!r}, not what group "
                            f"{n} shows")
    for n in route_groups:
        if n not in groups and n != ROUTE_GROUPS_HASHTABLE:
            problems.append(f"idx:route-groups lists {n} without its group row")
    if list(route_groups) == [ROUTE_GROUPS_HASHTABLE]:
        problems.append(f"idx:route-groups holds only {ROUTE_GROUPS_HASHTABLE}")
    return problems


def check_brokers(s: Snapshot) -> list[str]:
    """Brokers (brokerLiveTable): registration records, deadlines, filter servers."""
    problems = []
    deadlines, regs = s.one("idx:deadlines"), s.rows["idx:reg"]
    for member in deadlines:
        c, _, a = member.partition("\t")
        if (c, a) not in regs:
            problems.append(f"deadline {c}/{a} without registration record")
    for c, a in regs:
        if live_member(c, a) not in deadlines:
            problems.append(f"registration record {c}/{a} without deadline")
    filtered = {live_member(c, a) for c, a in s.rows["idx:filters"]}
    if set(s.one("idx:filtered")) != filtered:
        problems.append(f"idx:filtered is {sorted(s.one('idx:filtered'))}, filter lists exist "
                        f"for {sorted(filtered)}")
    for kind in ("broker", "idx:tables", "idx:filters", "idx:conns"):
        for c, a in s.rows[kind]:
            if (c, a) not in regs:
                problems.append(f"{kind} {c}/{a} without registration record")
    return problems


def check_kv(s: Snapshot) -> list[str]:
    """KV config: rows and their per-namespace tables mirror each other."""
    problems = []
    kvns, kv_tables, kv_rows = set(s.one("idx:kvns")), s.rows["idx:kv"], s.rows["kv"]
    for ns, table in kv_tables.items():
        if not any(escape(n) == ns for n in kvns):
            problems.append(f"idx:kv:{ns} without its namespace in idx:kvns")
        for k in table:
            if (ns, escape(k)) not in kv_rows:
                problems.append(f"idx:kv:{ns} key {k} without its kv row")
    for (ns, k), row in kv_rows.items():
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
