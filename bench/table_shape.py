"""Issue 42's two queue-data layouts, side by side through the product: layout 1 (rows, one
hash per (topic, broker group) row) against layout 2 (topics, Java's ``topicQueueTable``: one
hash per topic, a field per broker group), on one throwaway redis-server in one run, at Redis
level (docs/queue-data-layouts.md, docs/table-shape.md).

Both layouts are driven through the real ``nsfleet.store.RouteStore`` (the registration with its
probe, head, chunks of ``--chunk-rows`` rows and commit; unregister; the expiry sweep), one store
per layout, its layout chosen by setting ``P:layout`` before the store's first call and again
after every FLUSHALL. Each shape (B brokers x T topics, every broker serving every topic, a group
per broker) runs, per layout, on an emptied Redis:

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
scripts, the SSCAN (layout 1) / HVALS (layout 2) of a group's topics for
deleteTopicWithBrokerRegistration) and from the one client (wall). Route reads (``reads``) are
timed apart, on G groups x 50 topics, at G = 10, 60 and 300, by calling each layout's assembly
of the product's route.lua directly (``scripts.source("route", layout=...)``), as
bench/route_cost.py does (the worker's assembly of the route is left out), and, to read those by,
an EVALSHA of route.lua's head (its arguments and includes) that does nothing. At 300 groups a
topic's hash leaves the listpack encoding (``hash-max-listpack-entries``, default 128): the
300-group reads, and with ``--big`` the 300 x 10k shape, also run with it raised to 512. Layouts
alternate from round to round; medians are kept; ``layout2_over_layout1`` holds the ratios. The
issue's Redis-level targets are checked against layout 2's figures. Writes
bench/results/table_shape.json (``--out`` elsewhere).

    .venv/bin/python bench/table_shape.py [--rounds N] [--big]   # the real run
    .venv/bin/python bench/table_shape.py --quick                # a small try, to /tmp
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore, scripts
from nsfleet.store.keys import ORDER_TOPIC_CONFIG, Keys
from nsfleet.store.script_calls import CHUNK_ROWS

NAMESPACE = "shape"
KEYS = Keys(NAMESPACE)
CLUSTER = "DefaultCluster"
READ_TOPICS = 50
READS = 300  # per round, layout and group count
GROUP_COUNTS = (10, 60, 300)
LISTPACK_DEFAULT, LISTPACK_RAISED = 128, 512
TIMESTAMP = 1_700_000_000_000
LAYOUT_1, LAYOUT_2 = "layout 1", "layout 2"
RATIO = "layout2_over_layout1"
NOTHING = "an EVALSHA doing nothing"
OPS = ("first_registration", "unchanged_reregistration", "unchanged_reregistration_no_skip",
       "changed_reregistration", "unregister", "expiry")
# Commands the store sends outside scripts that no script of these operations sends: a group's
# topics read for deleteTopicWithBrokerRegistration (layout 1: SSCAN of its set; layout 2: HVALS
# of its lists). INFO commandstats also counts every command a script runs, within the script's
# own usec, so only EVALSHA and these are summed. Left out: the few reads of tiny keys the drains
# start with (SMEMBERS of P:idx:cleanups, HKEYS of P:idx:perm-clears), which scripts run too.
DIRECT = ("cmdstat_sscan", "cmdstat_hvals")
NO_WORSE = 1.10  # "no worse than layout 1": within this ratio (noise on a shared machine)
# The unchanged re-registration costs milliseconds a pass, where one step of Lua's collector
# (garbage of the calls before) shows: its passes are repeated and the median one kept.
UNCHANGED_PASSES = 5
QUICK_SHAPES = ["10x2000"]  # the smallest where used_memory is not noise (~100 KB)
QUICK_OUT = Path(tempfile.gettempdir()) / "table_shape-quick.json"


# --- the two layouts, both the product -----------------------------------------------------------


class Layout:
    """One store (``RouteStore``) kept in one queue-data layout: ``value`` is what ``P:layout``
    holds for it ("1" rows, "2" topics)."""

    def __init__(self, client: aioredis.Redis, value: str, chunk_rows: int) -> None:
        self.client = client
        self.value = value
        self.name = LAYOUT_1 if value == scripts.LAYOUT_ROWS else LAYOUT_2
        self.store = RouteStore(client, NAMESPACE, chunk_rows=chunk_rows)
        self.route_keys = [KEYS.prefix, KEYS.kv_table(ORDER_TOPIC_CONFIG)]
        self.route_sha = ""
        self.nothing_sha = ""

    async def reset(self) -> None:
        """An emptied Redis in this layout: ``P:layout`` set before any call of the store, so
        that neither the store's first call (lua/layout_init.lua) nor its scripts' fence moves
        it to the other layout."""
        await client_flush(self.client)
        await self.client.set(KEYS.layout, self.value)

    async def load(self) -> None:
        await self.reset()
        await self.store.load_scripts()  # learns the layout from P:layout
        if self.store.calls.layout != self.value:
            raise RuntimeError(f"{self.name}: the store took layout {self.store.calls.layout}")
        route = scripts.source("route", layout=self.value)
        self.route_sha = await self.client.script_load(route)
        head = route[:route.index("local MEMBER")]  # arguments and includes, nothing run
        self.nothing_sha = await self.client.script_load(head + "return {'none'}")

    async def register(self, reg: BrokerRegistration, delete_absent: bool) -> None:
        await self.store.register_broker(reg, delete_absent_topics=delete_absent)

    async def unregister(self, reg: BrokerRegistration) -> None:
        await self.store.unregister_broker(reg.cluster or "", reg.addr or "", reg.name or "")

    async def sweep(self) -> None:
        await self.store.sweep()

    async def evalsha(self, sha: str, topic: str) -> list[Any]:
        return list(await self.client.evalsha(sha, len(self.route_keys), *self.route_keys,
                                              *scripts.argv("route",
                                                            scripts.RouteArgs(topic, "1"))))

    async def route(self, topic: str) -> list[Any]:
        """This layout's route.lua, raw (``{"ok", conf, mappings, names, ...}``)."""
        return await self.evalsha(self.route_sha, topic)

    async def nothing(self, topic: str) -> list[Any]:
        return await self.evalsha(self.nothing_sha, topic)

    def reads(self) -> dict[str, Callable[[str], Awaitable[list[Any]]]]:
        """The route reads timed in this layout: its route.lua; in layout 2 also the empty
        EVALSHA (the same head in both layouts, so timed once)."""
        out = {f"{self.name} route.lua": self.route}
        if self.value == scripts.LAYOUT_TOPICS:
            out[NOTHING] = self.nothing
        return out


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


async def client_flush(client: aioredis.Redis) -> None:
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
        pipe.hincrby(KEYS.group(f"broker-{b:03d}"), "topicsEpoch", 1)
    await pipe.execute()


async def run_shape(client: aioredis.Redis, layout: Layout, brokers: int, topics: int
                    ) -> tuple[dict[str, Sample], int, dict[str, Any]]:
    """Every operation once on an emptied Redis: the samples, the memory the first registration
    added, and what the checks found."""
    a, b = table_a(topics), table_b(topics)
    await layout.reset()
    base = await used_memory(client)
    samples = {"first_registration": await timed(
        client, lambda: register_all(layout, brokers, a, 1))}
    memory = await used_memory(client) - base
    found = {"memory_usage": await memory_usage(client, layout, brokers, topics)}
    passes = [await timed(client, lambda: register_all(layout, brokers, a, 1))
              for _ in range(UNCHANGED_PASSES)]
    samples["unchanged_reregistration"] = sorted(passes, key=lambda x: x.redis_us)[
        UNCHANGED_PASSES // 2]
    await bump_epochs(client, brokers)
    samples["unchanged_reregistration_no_skip"] = await timed(
        client, lambda: register_all(layout, brokers, a, 2))
    samples["changed_reregistration"] = await timed(
        client, lambda: register_all(layout, brokers, b, 3, True))
    found["topics_after_change"] = await client.scard(KEYS.topics)
    assert found["topics_after_change"] == len(b), found
    if layout.value == scripts.LAYOUT_TOPICS:
        found["lists"] = await group_lists(client, "broker-000", a, b)
    samples["unregister"] = await timed(
        client, lambda: layout.unregister(broker(brokers - 1, b, 3)))
    await client.zadd(KEYS.deadlines, {f"{CLUSTER}\t{addr(brokers - 2)}": 1})
    samples["expiry"] = await timed(client, layout.sweep)
    route = await layout.route(b[0].topic_name)
    assert route[0] == "ok" and route[3].count("\n") + 1 == 2 * (brokers - 2), route[:5]
    assert not await client.scard(KEYS.cleanups)
    assert await client.get(KEYS.layout) == layout.value, "the store changed layout"
    return samples, memory, found


async def memory_usage(client: aioredis.Redis, layout: Layout, brokers: int, topics: int
                       ) -> dict[str, Any]:
    """Where a row's bytes go: MEMORY USAGE of one key of each kind, shared out per row (and
    a check that the store wrote this layout's keys, not the other's)."""
    t, name = "Topic-00000", "broker-000"

    async def usage(key: str) -> int:
        return int(await client.memory_usage(key, samples=0) or 0)

    out: dict[str, Any] = {"topic_list_per_row": round(
        await usage(KEYS.topics) / (brokers * topics), 1)}
    if layout.value == scripts.LAYOUT_TOPICS:
        assert not await client.exists(KEYS.queue(t, name)), "layout 2 wrote a row hash"
        out["topic_hash_per_row"] = round(await usage(KEYS.topic_routes(t)) / brokers, 1)
        out["topic_hash_encoding"] = await client.object("encoding", KEYS.topic_routes(t))
        out["group_lists_per_row"] = round(await usage(KEYS.group_topics(name)) / topics, 1)
    else:
        assert not await client.exists(KEYS.topic_routes(t)), "layout 1 wrote a topic hash"
        out["queue_row"] = await usage(KEYS.queue(t, name))
        out["route_index_per_row"] = round(await usage(KEYS.topic(t)) / brokers, 1)
        out["broker_topics_per_row"] = round(await usage(KEYS.broker_topics(name)) / topics, 1)
    return out


async def group_lists(client: aioredis.Redis, name: str, a: Iterable[TopicConfig],
                      b: Iterable[TopicConfig]) -> dict[str, int]:
    """Layout 2's lists of group ``name`` list every topic it has a row of (the cascade's
    premise; they may list more: docs/queue-data-layouts.md): how many fields and entries they
    hold, how many twice, how many without a row."""
    lists = await client.hgetall(KEYS.group_topics(name))
    listed = [t for text in lists.values() for t in text.split("\n") if t]
    topics = sorted({tc.topic_name for tc in (*a, *b)})
    pipe = client.pipeline(transaction=False)
    for t in topics:
        pipe.hexists(KEYS.topic_routes(t), name)
    rows = {t for t, has in zip(topics, await pipe.execute(), strict=True) if has}
    missing = rows - set(listed)
    assert not missing, f"rows not listed: {sorted(missing)[:5]}"
    return {"rows": len(rows), "fields": len(lists), "listed": len(listed),
            "listed_twice": len(listed) - len(set(listed)),
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
        f: dict[str, Any] = {
            "rows": rows[op], "redis_ms": round(redis_us / 1000, 2),
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
    """Both layouts at one shape, alternating from round to round; medians, and layout 2's
    figures over layout 1's."""
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
    one, two = out[LAYOUT_1], out[LAYOUT_2]
    out[RATIO] = {"bytes_per_row": round(two["bytes_per_row"] / one["bytes_per_row"], 3)} | {
        op: round(two[op]["redis_ms"] / max(one[op]["redis_ms"], 1e-3), 3) for op in OPS}
    out["checks"] = found
    return out


async def read_costs(client: aioredis.Redis, layout: Layout, groups: int, rnd: int
                     ) -> dict[str, tuple[float, float]]:
    """Redis µs and wall µs of one read by each of ``layout``'s reads, ``groups`` groups of one
    master each serving READ_TOPICS topics (the reads' order alternates by round)."""
    await layout.reset()
    table = tuple(TopicConfig(f"T{i}", 8, 8, 6) for i in range(READ_TOPICS))
    await register_all(layout, groups, table, 1)
    route = await layout.route("T0")
    assert route[0] == "ok" and route[3].count("\n") + 1 == 2 * groups, route[:5]
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
        out[key][RATIO] = round(
            out[key][f"{LAYOUT_2} route.lua"]["redis_us_per_read"]
            / out[key][f"{LAYOUT_1} route.lua"]["redis_us_per_read"], 3)
        print(f"reads at {key} groups: {out[key]}", flush=True)
    await set_listpack(client, LISTPACK_DEFAULT)
    return out


def target(what: str, measured: float, limit: float) -> dict[str, Any]:
    return {"target": what, "measured": measured, "limit": limit, "pass": measured <= limit}


def targets(shapes: dict[str, Any], reads: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets that are Redis-level, against layout 2's figures."""
    out = [target("route read missing the cache: Redis µs at 60 groups, layout 2 route.lua",
                  reads["60"][f"{LAYOUT_2} route.lua"]["redis_us_per_read"], 100)]
    if "60x10000" in shapes:
        out.insert(0, target("Redis memory per (topic, broker) row at 60 x 10k, bytes",
                             shapes["60x10000"][LAYOUT_2]["bytes_per_row"], 60))
    for key, shape in shapes.items():
        for op in ("unchanged_reregistration", "unchanged_reregistration_no_skip",
                   "unregister", "expiry"):
            out.append(target(f"{op} at {key}: layout 2's Redis time over layout 1's",
                              shape[RATIO][op], NO_WORSE))
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", action="store_true",
                        help="also 300 x 10k (~3M rows): hash-max-listpack-entries 128, then 512")
    parser.add_argument("--chunk-rows", type=int, default=CHUNK_ROWS,
                        help="rows per script call (default: the product's)")
    parser.add_argument("--shapes", nargs="*", default=["20x2000", "60x10000"],
                        help="BROKERSxTOPICS (smaller ones for a quick try)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small try: shape {QUICK_SHAPES[0]}, 1 round, results to "
                             f"{QUICK_OUT} (unless --out)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the results here, not to bench/results/table_shape.json")
    args = parser.parse_args()
    if args.quick:
        args.shapes, args.rounds, args.big = QUICK_SHAPES, 1, False
        args.out = args.out or QUICK_OUT
    shapes = [Shape(*map(int, s.split("x"))) for s in args.shapes]
    if args.big:
        shapes += [Shape(300, 10_000), Shape(300, 10_000, LISTPACK_RAISED)]
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        layouts = [Layout(client, scripts.LAYOUT_ROWS, args.chunk_rows),
                   Layout(client, scripts.LAYOUT_TOPICS, args.chunk_rows)]
        for layout in layouts:
            await layout.load()
        by_shape = {s.key: await shape_rounds(client, layouts, s, args.rounds) for s in shapes}
        reads = await read_rounds(client, layouts, args.rounds)
        await client.aclose()
    results = new_results(args)
    results["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    results.update({
        "timed_by": "Redis INFO commandstats (EVALSHA usec, plus SSCAN / HVALS sent outside "
                    "scripts) and the one client's wall time; memory: INFO memory used_memory "
                    "delta of the first registration",
        "layouts": {LAYOUT_1: "rows: a hash per (topic, group) row, P:layout \"1\"",
                    LAYOUT_2: "topics: a hash per topic, P:layout \"2\""},
        "chunk_rows": args.chunk_rows, "reads_per_round": READS, "read_topics": READ_TOPICS,
        "no_worse_means": f"layout 2 / layout 1 <= {NO_WORSE}",
        "shapes": by_shape, "reads": reads, "targets": targets(by_shape, reads)})
    if args.out is None:
        write_results("table_shape", results)
    else:
        text = json.dumps(results, indent=2) + "\n"
        args.out.write_text(text)
        print(text, end="")


if __name__ == "__main__":
    asyncio.run(main())
