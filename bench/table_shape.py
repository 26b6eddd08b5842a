"""Issue 42, item 1, "measure before switching": today's row layout against the candidate, Java's
own table shape (``topicQueueTable``: one hash per topic, a field per broker group), side by side
on one throwaway redis-server in one run, at Redis level.

Today's layout is driven through the real product (``nsfleet.store.RouteStore``: the registration
with its probe, head, chunks and commit; unregister; the expiry sweep; route.lua). The candidate is
the Lua under ``bench/table_shape/`` (its keys: ``bench/table_shape/includes/table_keys.lua``),
called the way the product calls its scripts: the same probe / head / chunks of ``--chunk-rows``
rows (one argument per chunk, a line per row) / commit, the same table encoding and digest
(the product's own encoder), two chunk calls in flight. Each shape (B brokers x T topics, every
broker serving every topic, a group per broker) runs, per layout, on an emptied Redis (FLUSHALL):

* ``first_registration``: every broker registers its table (the memory it adds is
  ``bytes_per_row``, INFO memory ``used_memory`` delta over B x T);
* ``unchanged_reregistration``: every broker sends the same table and DataVersion again (five
  passes, the median one kept). Both layouts skip the queue data on the registration record's
  digest (register_broker.lua's probe: a few commands); the worker's memo of unchanged chunks
  (store/unchanged_chunks.py) never answers here, as no change feed is attached, so each
  registration costs its probe;
* ``unchanged_reregistration_no_skip``: the same table under a new DataVersion after every
  group's ``topicsEpoch`` was bumped (not timed), so the digest cannot be trusted: every row is
  compared and none written;
* ``changed_reregistration``: a new DataVersion, deleteTopicWithBrokerRegistration on, and a table
  with a tenth of the topics' queue data changed, a twentieth removed and a twenty-fifth added;
* ``unregister``: one broker (its group) unregisters, with the drains its cascade leaves;
* ``expiry``: another broker's deadline is put in the past and the sweep removes it.

Each is timed by Redis (INFO commandstats: the scripts' usec, and the few commands sent outside
scripts, the SSCAN / HVALS of a group's topics for deleteTopicWithBrokerRegistration) and from the
one client (wall). Route reads (``reads``) are timed apart, on G groups x 50 topics, at G = 10, 60
and 300, by calling each layout's route script directly, as bench/route_cost.py does (the
worker's assembly is left out): today's route.lua, the candidate's route.lua, its variant reading
every member's deadline in one ZMSCORE (route_deadlines.lua), and to read those by, the floor of
a read over the candidate layout and an EVALSHA that does nothing. At 300 groups a topic's hash
leaves the listpack encoding (``hash-max-listpack-entries``, default 128): the 300-group reads,
and with ``--big`` the 300 x 10k shape, also run with it raised to 512. Layouts alternate from
round to round; medians are kept. The issue's Redis-level targets are checked against the
figures. Writes bench/results/table_shape.json.

    .venv/bin/python bench/table_shape.py [--rounds N] [--big]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    BrokerRegistration,
    DataVersion,
    TopicConfig,
)
from nsfleet.redis_server import RedisServer
from nsfleet.runtime.table_thread import in_table_thread
from nsfleet.store import RouteStore, scripts
from nsfleet.store.keys import ORDER_TOPIC_CONFIG
from nsfleet.store.registration import OFF_LOOP_TOPICS
from nsfleet.store.script_calls import flag

NAMESPACE = "shape"
CLUSTER = "DefaultCluster"
CHUNK = 800
READ_TOPICS = 50
READS = 300  # per round, layout and group count
GROUP_COUNTS = (10, 60, 300)
LISTPACK_DEFAULT, LISTPACK_RAISED = 128, 512
TIMESTAMP = 1_700_000_000_000
CANDIDATE_DIR = Path(__file__).resolve().parent / "table_shape"
INCLUDE_DIRS = (CANDIDATE_DIR / "includes", scripts.lua_dir() / "includes")
OPS = ("first_registration", "unchanged_reregistration", "unchanged_reregistration_no_skip",
       "changed_reregistration", "unregister", "expiry")
# Commands the clients send outside scripts that no script of these operations sends: a group's
# topics read for deleteTopicWithBrokerRegistration (today: SSCAN of its set; the candidate: HVALS
# of its lists). INFO commandstats also counts every command a script runs, within the script's
# own usec, so only EVALSHA and these are summed. Left out: the few reads of tiny keys the drains
# start with (SMEMBERS of P:idx:cleanups, HKEYS of P:idx:perm-clears), which scripts run too.
DIRECT = ("cmdstat_sscan", "cmdstat_hvals")
NO_WORSE = 1.10
# The unchanged re-registration costs milliseconds a pass, where one step of Lua's collector
# (garbage of the calls before) shows: its passes are repeated and the median one kept.
UNCHANGED_PASSES = 5  # "no worse than today": within this ratio (noise on a shared machine)


# --- the candidate's scripts and their arguments (ARGV order, as nsfleet/store/scripts.py) ------


class RegisterBrokerArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    id: int
    ha_addr: str
    zone: str
    timeout_ms: int
    acting_master: str
    dv_counter: int
    dv_timestamp: int
    state_version: int
    filter_count: int
    want_kv: str
    topics_sent: int
    connection: str
    mapping_count: int
    digest: str
    mode: str
    row_budget: int
    filters: Sequence[str]


class RegisterTopicsArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    generation: str
    force: str
    clear_write: str
    chunk: str
    topics: bytes | str
    mappings: bytes | str
    absent: str
    fresh: str


class RegisterCommitArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    id: int
    generation: str
    digest: str
    want_kv: str
    epoch: int
    synced: str
    added_epoch: int
    chunks: str


class UnregisterBrokerArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    connection: str
    row_budget: int


class SweepArgs(NamedTuple):
    now_ms: int | str
    batch: int
    guard_share: float
    guard_max_hold_ms: int
    row_budget: int


class DrainCleanupArgs(NamedTuple):
    name: str
    limit: int


class RouteArgs(NamedTuple):
    topic: str
    order_conf: str


ARGS: dict[str, type[tuple[Any, ...]]] = {
    "register_broker": RegisterBrokerArgs, "register_topics": RegisterTopicsArgs,
    "register_commit": RegisterCommitArgs, "unregister_broker": UnregisterBrokerArgs,
    "sweep": SweepArgs, "drain_cleanup": DrainCleanupArgs, "route": RouteArgs,
    "route_deadlines": RouteArgs,
}
REST = frozenset({"register_broker"})  # its last field's items are the last ARGV items


# Read figures to judge the candidate's by (as bench/route_cost.py's floor): what any route read
# over the candidate layout needs, appended to route.lua's own includes and arguments.
READ_FLOOR = """
local flat = rcall('HGETALL', k_topic_routes(arg_topic))
local names = {}
for i = 1, #flat, 2 do names[#names + 1] = flat[i] end
table.sort(names)
hmget(k_route_groups(), names)
return {'none'}
"""
ARGS_OF = {"read_floor": "route", "read_nothing": "route"}  # extra scripts: whose ARGV they take


def prelude(name: str) -> str:
    """A local ``arg_<field>`` per argument, as scripts.args_prelude writes the product's."""
    fields = ARGS[name]._fields  # type: ignore[attr-defined]
    named = fields[:-1] if name in REST else fields
    lines = [f"local arg_{f} = ARGV[{i}]" for i, f in enumerate(named, 1)]
    if name in REST:
        lines += [f"local arg_{fields[-1]} = {{}}",
                  f"for i = {len(named) + 1}, #ARGV do arg_{fields[-1]}[i - {len(named)}] = ARGV[i]"
                  " end"]
    return "\n".join(lines) + "\n"


def candidate_source(name: str) -> str:
    """bench/table_shape/<name>.lua as Redis runs it: its arguments named, every ``--- @include``
    inlined once, depth-first, from bench/table_shape/includes/ or else the product's
    lua/includes/."""
    done: set[str] = set()

    def expand(text: str) -> str:
        def inline(match: re.Match[str]) -> str:
            inc = match.group(1)
            if inc in done:
                return ""
            done.add(inc)
            path = next(d / f"{inc}.lua" for d in INCLUDE_DIRS if (d / f"{inc}.lua").exists())
            return expand(path.read_text())

        return scripts.INCLUDE_RE.sub(inline, text)

    header, end, body = (CANDIDATE_DIR / f"{name}.lua").read_text().partition("]]\n")
    return expand(header + end + prelude(name) + body)


def argv(name: str, args: tuple[Any, ...]) -> list[Any]:
    if type(args) is not ARGS[name]:
        raise TypeError(f"{name}.lua takes {ARGS[name].__name__}")
    return [*args[:-1], *args[-1]] if name in REST else list(args)


# --- the two layouts, behind one interface -------------------------------------------------------


class Layout(Protocol):
    name: str

    async def load(self) -> None: ...
    async def register(self, reg: BrokerRegistration, delete_absent: bool) -> None: ...
    async def unregister(self, reg: BrokerRegistration) -> None: ...
    async def sweep(self) -> None: ...
    async def route(self, topic: str) -> list[Any]: ...
    def reads(self) -> dict[str, Callable[[str], Awaitable[list[Any]]]]: ...


class Today:
    """Today's row layout, through the product."""

    name = "today"

    def __init__(self, client: aioredis.Redis, chunk_rows: int) -> None:
        self.client = client
        self.store = RouteStore(client, NAMESPACE, chunk_rows=chunk_rows)
        self.keys = [self.store.keys.prefix, self.store.keys.kv_table(ORDER_TOPIC_CONFIG)]
        self.route_sha = ""

    async def load(self) -> None:
        await self.store.load_scripts()
        self.route_sha = await self.client.script_load(scripts.source("route"))

    async def register(self, reg: BrokerRegistration, delete_absent: bool) -> None:
        await self.store.register_broker(reg, delete_absent_topics=delete_absent)

    async def unregister(self, reg: BrokerRegistration) -> None:
        await self.store.unregister_broker(reg.cluster or "", reg.addr or "", reg.name or "")

    async def sweep(self) -> None:
        await self.store.sweep()

    async def route(self, topic: str) -> list[Any]:
        reply = await self.client.evalsha(self.route_sha, 2, *self.keys, *scripts.argv(
            "route", scripts.RouteArgs(topic, "1")))
        return list(reply)

    def reads(self) -> dict[str, Callable[[str], Awaitable[list[Any]]]]:
        return {"today route.lua": self.route}


class Candidate:
    """The candidate layout, through bench/table_shape/*.lua, driven as the product drives its
    scripts (nsfleet/store/registration.py and departures.py), its table encoded by the product's
    own encoder (the same validation, chunks and digest, in the same table thread)."""

    name = "candidate"

    def __init__(self, client: aioredis.Redis, chunk_rows: int) -> None:
        self.client = client
        self.chunk_rows = chunk_rows
        self.encoder = RouteStore(client, NAMESPACE, chunk_rows=chunk_rows).registration
        self.prefix = f"nsfleet:{{{NAMESPACE}}}"
        self.kv_keys = [f"{self.prefix}:idx:kvns", f"{self.prefix}:idx:kv:{ORDER_TOPIC_CONFIG}"]
        self.shas: dict[str, str] = {}

    async def load(self) -> None:
        for name in ARGS:
            self.shas[name] = await self.client.script_load(candidate_source(name))
        route = candidate_source("route")
        head = route[:route.index("local MEMBER")]
        self.shas["read_floor"] = await self.client.script_load(head + READ_FLOOR)
        self.shas["read_nothing"] = await self.client.script_load(head + "return {'none'}")

    async def call(self, name: str, args: tuple[Any, ...], keys: Sequence[str] = ()
                   ) -> list[Any]:
        keys = [self.prefix, *keys]
        return list(await self.client.evalsha(self.shas[name], len(keys), *keys,
                                              *argv(ARGS_OF.get(name, name), args)))

    async def call_many(self, name: str, calls: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
        """As ScriptCalls.call_many: two calls in flight, until one answers "stale"."""
        replies: dict[int, list[Any]] = {}
        pending = iter(enumerate(calls))
        stopped = False

        async def worker() -> None:
            nonlocal stopped
            for i, args in pending:
                if stopped:
                    return
                replies[i] = await self.call(name, args)
                stopped = stopped or replies[i][0] == "stale"

        await asyncio.gather(*(worker() for _ in range(min(2, len(calls)))))
        return [replies[i] for i in sorted(replies)]

    async def register(self, reg: BrokerRegistration, delete_absent: bool) -> None:
        """As BrokerRegistrar.register_broker for a table of at least PROBE_MIN_TOPICS topics
        (a probe first; the candidate has no "full" mode for small tables), with no connection
        and no memo of unchanged chunks (none answers without a change feed)."""
        if len(reg.topic_configs) > OFF_LOOP_TOPICS:
            table = await in_table_thread(self.encoder._encoded_table, reg, delete_absent)
        else:
            table = self.encoder._encoded_table(reg, delete_absent)
        rows, mappings, topic_chunks, mapping_chunks, digest = table
        dv = reg.data_version
        acting = "" if reg.enable_acting_master is None else str(reg.enable_acting_master).lower()
        filters = reg.filter_server_list
        mode = "probe"
        for _ in range(5):
            reply = await self.call("register_broker", RegisterBrokerArgs(
                reg.cluster or "", reg.addr or "", reg.name or "", reg.broker_id or 0,
                reg.ha_server_addr or "", reg.zone_name or "",
                reg.heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MS, acting, dv.counter,
                dv.timestamp, dv.state_version, -1 if filters is None else len(filters), "1",
                reg.topics_sent, "", len(mappings), digest, mode, self.chunk_rows,
                list(filters or ())), self.kv_keys)
            if reply[0] == "drain":
                await self.drain_cleanups(reg.name or "")
            elif reply[0] == "full":
                mode = "head"
            else:
                break
        if reply[0] == "head":
            await self.write_chunks(reg, reply[1:], [r[0] for r in rows], topic_chunks,
                                    mapping_chunks, digest, delete_absent)
        elif reply[0] != "ok":
            raise RuntimeError(f"candidate register_broker: {reply[0]}")

    async def write_chunks(self, reg: BrokerRegistration, head: list[Any], topics: list[str],
                           topic_chunks: list[bytes], mapping_chunks: list[bytes], digest: str,
                           delete_absent: bool) -> None:
        """As BrokerRegistrar._register_in_chunks, over the candidate's scripts."""
        generation, force, clear_write, writer, _, fresh, epoch = head
        cluster, addr, name = reg.cluster or "", reg.addr or "", reg.name or ""

        def chunk(number: str, text: bytes | str, mappings: bytes | str, absent: str,
                  fresh: str) -> RegisterTopicsArgs:
            return RegisterTopicsArgs(cluster, addr, name, generation, force, clear_write,
                                      number, text, mappings, absent, fresh)

        expected = added = int(epoch)
        stale = False
        if writer == "1":
            calls = [chunk(str(i), text, "[]", "", fresh)
                     for i, text in enumerate(topic_chunks, 1)]
            calls += [chunk("", "", text, "", fresh) for text in mapping_chunks]
            for reply in await self.call_many("register_topics", calls):
                stale = stale or reply[0] == "stale"
                if reply[0] == "ok":
                    expected += int(reply[2])
                    added += int(reply[3])
            if delete_absent and not stale:
                incoming = set(topics)
                lists = await self.client.hvals(f"{self.prefix}:idx:group-topics:{name}")
                absent = sorted({t for text in lists for t in text.split("\n")} - incoming)
                n = self.chunk_rows
                calls = [chunk("", "", "[]", "\n".join(absent[i:i + n]), "0")
                         for i in range(0, len(absent), n)]
                for reply in await self.call_many("register_topics", calls):
                    if reply[0] == "ok":
                        expected += int(reply[2])
        await self.call("register_commit", RegisterCommitArgs(
            cluster, addr, name, reg.broker_id or 0, generation, digest, "1", expected,
            flag(force == "1" and writer == "1"), added,
            str(len(topic_chunks)) if writer == "1" else ""), self.kv_keys)

    async def drain_cleanups(self, only: str | None = None) -> None:
        names = [only] if only else await self.client.smembers(f"{self.prefix}:idx:cleanups")
        for name in sorted(names):
            left = 1
            while left:
                _, _, left = await self.call("drain_cleanup",
                                             DrainCleanupArgs(name, self.chunk_rows))

    async def unregister(self, reg: BrokerRegistration) -> None:
        name = reg.name or ""
        reply = await self.call("unregister_broker", UnregisterBrokerArgs(
            reg.cluster or "", reg.addr or "", name, "", self.chunk_rows))
        if reply[0] == "ok" and reply[2] == "1":
            await self.drain_cleanups(name)

    async def sweep(self) -> None:
        reply = await self.call("sweep", SweepArgs("", 100, 0.0, 120_000, self.chunk_rows))
        if reply[3] == "1":
            await self.drain_cleanups()

    async def route(self, topic: str) -> list[Any]:
        return await self.call("route", RouteArgs(topic, "1"), self.kv_keys[1:])

    def reads(self) -> dict[str, Callable[[str], Awaitable[list[Any]]]]:
        """The candidate's route.lua; its variant with the deadlines in one ZMSCORE; and, to
        read the figures by, the floor of a route read over this layout (the topic's hash, its
        groups sorted and their P:idx:route-groups entries, nothing else) and an EVALSHA that
        does nothing."""
        def script(name: str) -> Callable[[str], Awaitable[list[Any]]]:
            async def read(topic: str) -> list[Any]:
                return await self.call(name, RouteArgs(topic, "1"), self.kv_keys[1:])
            return read

        return {"candidate route.lua": script("route"),
                "candidate route_deadlines.lua": script("route_deadlines"),
                "floor: HGETALL, sort, HMGET of the entries": script("read_floor"),
                "an EVALSHA doing nothing": script("read_nothing")}


# --- measuring -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Sample:
    redis_us: float  # usec (INFO commandstats) of the scripts and of the DIRECT commands
    script_us: float  # EVALSHA and EVAL only
    script_calls: int
    wall_s: float  # from the one client, its Python included


async def timed(client: aioredis.Redis, op: Callable[[], Awaitable[None]]) -> Sample:
    """What ``op`` cost Redis, and its wall time."""
    await client.config_resetstat()
    started = time.perf_counter()
    await op()
    wall = time.perf_counter() - started
    stats = await client.info("commandstats")
    evals = [stats[k] for k in ("cmdstat_evalsha", "cmdstat_eval") if k in stats]
    script_us = sum(int(v["usec"]) for v in evals)
    direct_us = sum(int(stats[k]["usec"]) for k in DIRECT if k in stats)
    return Sample(script_us + direct_us, script_us, sum(int(v["calls"]) for v in evals), wall)


async def used_memory(client: aioredis.Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def flush(client: aioredis.Redis) -> None:
    await client.execute_command("FLUSHALL", "SYNC")


def table_a(topics: int) -> tuple[TopicConfig, ...]:
    return tuple(TopicConfig(f"Topic-{i:05d}", 8, 8, 6) for i in range(topics))


def table_b(topics: int) -> tuple[TopicConfig, ...]:
    """Table A changed: a tenth of the topics' queue data (writeQueueNums 16), a twentieth of
    the topics removed and a twenty-fifth added, spread over the table, so chunk boundaries move
    (topics change chunks) and the table has fewer chunks at some sizes."""
    out: list[TopicConfig] = []
    for i in range(topics):
        if i % 20 != 7:
            out.append(TopicConfig(f"Topic-{i:05d}", 8, 16 if i % 10 == 3 else 8, 6))
        if i % 25 == 13:
            out.append(TopicConfig(f"Topic-{i:05d}-new", 8, 8, 6))
    return tuple(out)


def addr(b: int) -> str:
    return f"10.0.{b // 250}.{b % 250}:10911"


def broker(b: int, table: tuple[TopicConfig, ...], counter: int) -> BrokerRegistration:
    """Broker ``b``, master of its own group, registering ``table`` under DataVersion
    ``counter``."""
    return BrokerRegistration(CLUSTER, addr(b), f"broker-{b:03d}", 0,
                              data_version=DataVersion(counter, TIMESTAMP + counter, 0),
                              topic_configs=table)


async def register_all(layout: Layout, brokers: int, table: tuple[TopicConfig, ...],
                       counter: int, delete_absent: bool = False) -> None:
    for b in range(brokers):
        await layout.register(broker(b, table, counter), delete_absent)


async def bump_epochs(client: aioredis.Redis, brokers: int) -> None:
    """Every group's topicsEpoch moves, as after a row changed by another path: no registration
    record's digest is trusted any more."""
    pipe = client.pipeline(transaction=False)
    for b in range(brokers):
        pipe.hincrby(f"nsfleet:{{{NAMESPACE}}}:group:broker-{b:03d}", "topicsEpoch", 1)
    await pipe.execute()


async def run_shape(client: aioredis.Redis, layout: Layout, brokers: int, topics: int
                    ) -> tuple[dict[str, Sample], int, dict[str, Any]]:
    """Every operation once on an emptied Redis: the samples, the memory the first registration
    added, and what the checks found."""
    a, b = table_a(topics), table_b(topics)
    await flush(client)
    base = await used_memory(client)
    samples = {"first_registration": await timed(
        client, lambda: register_all(layout, brokers, a, 1))}
    memory = await used_memory(client) - base
    found = {"memory_usage": await memory_usage(client, layout.name, brokers, topics)}
    passes = [await timed(client, lambda: register_all(layout, brokers, a, 1))
              for _ in range(UNCHANGED_PASSES)]
    samples["unchanged_reregistration"] = sorted(passes, key=lambda x: x.redis_us)[
        UNCHANGED_PASSES // 2]
    await bump_epochs(client, brokers)
    samples["unchanged_reregistration_no_skip"] = await timed(
        client, lambda: register_all(layout, brokers, a, 2))
    samples["changed_reregistration"] = await timed(
        client, lambda: register_all(layout, brokers, b, 3, True))
    found["topics_after_change"] = await client.scard(f"nsfleet:{{{NAMESPACE}}}:idx:topics")
    assert found["topics_after_change"] == len(b), found
    if layout.name == "candidate":
        found["lists"] = await candidate_lists(client, "broker-000", a, b)
    samples["unregister"] = await timed(
        client, lambda: layout.unregister(broker(brokers - 1, b, 3)))
    await client.zadd(f"nsfleet:{{{NAMESPACE}}}:idx:deadlines",
                      {f"{CLUSTER}\t{addr(brokers - 2)}": 1})
    samples["expiry"] = await timed(client, layout.sweep)
    route = await layout.route(b[0].topic_name)
    assert route[0] == "ok" and len(route[3]) == brokers - 2, route[:5]
    assert not await client.scard(f"nsfleet:{{{NAMESPACE}}}:idx:cleanups")
    return samples, memory, found


async def memory_usage(client: aioredis.Redis, layout: str, brokers: int, topics: int
                       ) -> dict[str, Any]:
    """Where a row's bytes go: MEMORY USAGE of one key of each kind, shared out per row."""
    p, t, name = f"nsfleet:{{{NAMESPACE}}}", "Topic-00000", "broker-000"

    async def usage(key: str) -> int:
        return int(await client.memory_usage(key, samples=0) or 0)

    out: dict[str, Any] = {"topic_list_per_row": round(
        await usage(f"{p}:idx:topics") / (brokers * topics), 1)}
    if layout == "candidate":
        out["topic_hash_per_row"] = round(await usage(f"{p}:topic:{t}") / brokers, 1)
        out["topic_hash_encoding"] = await client.object("encoding", f"{p}:topic:{t}")
        out["group_lists_per_row"] = round(await usage(f"{p}:idx:group-topics:{name}") / topics,
                                           1)
    else:
        out["queue_row"] = await usage(f"{p}:queue:{t}:{name}")
        out["route_index_per_row"] = round(await usage(f"{p}:idx:topic:{t}") / brokers, 1)
        out["broker_topics_per_row"] = round(
            await usage(f"{p}:idx:broker-topics:{name}") / topics, 1)
    return out


async def candidate_lists(client: aioredis.Redis, name: str, a: Iterable[TopicConfig],
                          b: Iterable[TopicConfig]) -> dict[str, int]:
    """The candidate's lists of group ``name`` list every topic it has a row of (the cascade's
    premise); how many entries they hold, how many in "+", how many twice."""
    p = f"nsfleet:{{{NAMESPACE}}}"
    lists = await client.hgetall(f"{p}:idx:group-topics:{name}")
    listed = [t for text in lists.values() for t in text.split("\n")]
    topics = sorted({tc.topic_name for tc in (*a, *b)})
    pipe = client.pipeline(transaction=False)
    for t in topics:
        pipe.hexists(f"{p}:topic:{t}", name)
    rows = {t for t, has in zip(topics, await pipe.execute(), strict=True) if has}
    missing = rows - set(listed)
    assert not missing, f"rows not listed: {sorted(missing)[:5]}"
    extra = lists.get("+", "")
    return {"rows": len(rows), "listed": len(listed), "in_extra_list": len(extra.split("\n"))
            if extra else 0, "listed_twice": len(listed) - len(set(listed)),
            "listed_without_row": len(set(listed) - rows)}


# --- rounds, medians, targets --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    brokers: int
    topics: int
    listpack: int = LISTPACK_DEFAULT  # hash-max-listpack-entries

    @property
    def key(self) -> str:
        raised = "" if self.listpack == LISTPACK_DEFAULT else f" listpack-{self.listpack}"
        return f"{self.brokers}x{self.topics}{raised}"


async def set_listpack(client: aioredis.Redis, entries: int) -> None:
    await client.config_set("hash-max-listpack-entries", entries)


def op_rows(shape: Shape) -> dict[str, int]:
    """The rows each operation writes, compares or removes: a registration's whole table per
    broker (the changed table is B), a cascade the group's rows."""
    a, b = shape.topics, len(table_b(shape.topics))
    return {"first_registration": shape.brokers * a, "unchanged_reregistration": shape.brokers * a,
            "unchanged_reregistration_no_skip": shape.brokers * a,
            "changed_reregistration": shape.brokers * b, "unregister": b, "expiry": b}


def figures(runs: list[tuple[dict[str, Sample], int]], shape: Shape) -> dict[str, Any]:
    """Medians over the rounds of one layout at one shape."""
    rows = op_rows(shape)
    out: dict[str, Any] = {"bytes_per_row": round(
        statistics.median(m for _, m in runs) / rows["first_registration"], 1)}
    for op in OPS:
        samples = [s[op] for s, _ in runs]
        redis_us = statistics.median(x.redis_us for x in samples)
        f = {"rows": rows[op], "redis_ms": round(redis_us / 1000, 2),
             "redis_us_per_row": round(redis_us / rows[op], 3),
             "script_ms": round(statistics.median(x.script_us for x in samples) / 1000, 2),
             "script_calls": int(statistics.median(x.script_calls for x in samples)),
             "wall_ms": round(statistics.median(x.wall_s for x in samples) * 1000, 1)}
        if op not in ("unregister", "expiry"):
            f["redis_us_per_broker"] = round(redis_us / shape.brokers, 1)
        out[op] = f
    return out


async def shape_rounds(client: aioredis.Redis, layouts: Sequence[Layout], shape: Shape,
                       rounds: int) -> dict[str, Any]:
    """Both layouts at one shape, alternating from round to round; medians, and the candidate's
    figures over today's."""
    await set_listpack(client, shape.listpack)
    runs: dict[str, list[tuple[dict[str, Sample], int]]] = {x.name: [] for x in layouts}
    found: dict[str, Any] = {}
    for rnd in range(rounds):
        for layout in layouts if rnd % 2 == 0 else layouts[::-1]:
            samples, memory, found[layout.name] = await run_shape(
                client, layout, shape.brokers, shape.topics)
            runs[layout.name].append((samples, memory))
            print(f"{shape.key} round {rnd + 1}/{rounds} {layout.name}: "
                  f"first {samples['first_registration'].redis_us / 1e6:.2f} s Redis, "
                  f"{memory / (shape.brokers * shape.topics):.0f} B/row", flush=True)
    await set_listpack(client, LISTPACK_DEFAULT)
    rows = shape.brokers * shape.topics
    out: dict[str, Any] = {"brokers": shape.brokers, "topics": shape.topics, "rows": rows,
                           "hash_max_listpack_entries": shape.listpack}
    for name, r in runs.items():
        out[name] = figures(r, shape)
    today, cand = out["today"], out["candidate"]
    out["candidate_over_today"] = {"bytes_per_row": round(
        cand["bytes_per_row"] / today["bytes_per_row"], 3)} | {
        op: round(cand[op]["redis_ms"] / max(today[op]["redis_ms"], 1e-3), 3) for op in OPS}
    out["checks"] = found
    return out


async def read_costs(client: aioredis.Redis, layout: Layout, groups: int, rnd: int
                     ) -> dict[str, tuple[float, float]]:
    """Redis µs and wall µs of one read by each of ``layout``'s read scripts, ``groups`` groups
    of one master each serving READ_TOPICS topics (the variants' order alternates by round)."""
    await flush(client)
    table = tuple(TopicConfig(f"T{i}", 8, 8, 6) for i in range(READ_TOPICS))
    await register_all(layout, groups, table, 1)
    route = await layout.route("T0")
    assert route[0] == "ok" and len(route[3]) == groups, route[:5]
    out: dict[str, tuple[float, float]] = {}
    variants = list(layout.reads().items())
    for label, read in variants if rnd % 2 == 0 else variants[::-1]:
        await client.config_resetstat()
        started = time.perf_counter()
        for i in range(READS):
            await read(f"T{i % READ_TOPICS}")
        wall = time.perf_counter() - started
        stats = await client.info("commandstats")
        out[label] = (int(stats["cmdstat_evalsha"]["usec"]) / READS, wall / READS * 1e6)
    return out


async def read_rounds(client: aioredis.Redis, layouts: Sequence[Layout], rounds: int
                      ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for groups, listpack in [*((g, LISTPACK_DEFAULT) for g in GROUP_COUNTS),
                             (GROUP_COUNTS[-1], LISTPACK_RAISED)]:
        await set_listpack(client, listpack)
        times: dict[str, list[tuple[float, float]]] = {}
        for rnd in range(rounds):
            for layout in layouts if rnd % 2 == 0 else layouts[::-1]:
                for label, t in (await read_costs(client, layout, groups, rnd)).items():
                    times.setdefault(label, []).append(t)
        key = str(groups) if listpack == LISTPACK_DEFAULT else f"{groups} listpack-{listpack}"
        out[key] = {label: {"redis_us_per_read": round(statistics.median(r for r, _ in t), 1),
                            "wall_us_per_read": round(statistics.median(w for _, w in t), 1)}
                    for label, t in times.items()}
        out[key]["candidate_over_today"] = round(
            out[key]["candidate route.lua"]["redis_us_per_read"]
            / out[key]["today route.lua"]["redis_us_per_read"], 3)
        print(f"reads at {key} groups: {out[key]}", flush=True)
    await set_listpack(client, LISTPACK_DEFAULT)
    return out


def target(what: str, measured: float, limit: float) -> dict[str, Any]:
    return {"target": what, "measured": measured, "limit": limit, "pass": measured <= limit}


def targets(shapes: dict[str, Any], reads: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets that are Redis-level, against the candidate's figures."""
    out = [target(f"route read missing the cache: Redis µs at 60 groups, {label}",
                  reads["60"][label]["redis_us_per_read"], 100)
           for label in ("candidate route.lua", "candidate route_deadlines.lua")]
    if "60x10000" in shapes:
        out.insert(0, target("Redis memory per (topic, broker) row at 60 x 10k, bytes",
                             shapes["60x10000"]["candidate"]["bytes_per_row"], 60))
    for key, shape in shapes.items():
        for op in ("unchanged_reregistration", "unchanged_reregistration_no_skip",
                   "unregister", "expiry"):
            out.append(target(f"{op} at {key}: candidate's Redis time over today's",
                              shape["candidate_over_today"][op], NO_WORSE))
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", action="store_true",
                        help="also 300 x 10k (~3M rows): hash-max-listpack-entries 128, then 512")
    parser.add_argument("--chunk-rows", type=int, default=CHUNK)
    parser.add_argument("--shapes", nargs="*", default=["20x2000", "60x10000"],
                        help="BROKERSxTOPICS (smaller ones for a quick try)")
    args = parser.parse_args()
    shapes = [Shape(*map(int, s.split("x"))) for s in args.shapes]
    if args.big:
        shapes += [Shape(300, 10_000), Shape(300, 10_000, LISTPACK_RAISED)]
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        layouts: list[Layout] = [Today(client, args.chunk_rows),
                                 Candidate(client, args.chunk_rows)]
        for layout in layouts:
            await layout.load()
        by_shape = {s.key: await shape_rounds(client, layouts, s, args.rounds) for s in shapes}
        reads = await read_rounds(client, layouts, args.rounds)
        await client.aclose()
    results = new_results(args)
    results.update({
        "timed_by": "Redis INFO commandstats (EVALSHA usec, plus SSCAN / HVALS sent outside "
                    "scripts) and the one client's wall time; memory: INFO memory used_memory "
                    "delta of the first registration",
        "chunk_rows": args.chunk_rows, "reads_per_round": READS, "read_topics": READ_TOPICS,
        "no_worse_means": f"candidate/today <= {NO_WORSE}",
        "shapes": by_shape, "reads": reads, "targets": targets(by_shape, reads)})
    write_results("table_shape", results)


if __name__ == "__main__":
    asyncio.run(main())
