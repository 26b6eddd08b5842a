"""Where a registration storm's Redis time goes (issue 32): the per-row cost of each write in
nsfleet's row layout, next to the floors the issue measured, all on one throwaway redis-server
in one run, with no worker in between.

Every variant writes B brokers x T topics (every broker serving every topic) as Lua calls of
800 rows, the way register_topics.lua receives them (one argument per chunk, a tab-separated line
per row), and is timed by Redis itself (INFO commandstats: EVALSHA usec, so client and socket
costs are left out):

* the issue's floors: ``rows4`` (a 4-field hash per row), ``rows4+topic-sadd+chunk-list`` (one
  SADD per row into a per-topic set, the broker's topic list as one field per chunk),
  ``...+broker-sadd`` (a SADD per row into a per-broker set as well), ``hash-per-topic`` (one
  hash per topic, a field per broker: not a row table);
* nsfleet's layout, built up write by write: ``rows6`` (the row hash with its identifying
  fields, what spark-redis reads), ``+topic-sadd`` (``P:idx:topic:<t>``, the route index: the
  group's number, so the set is an intset, one SADD per row after the chunk's rows),
  ``+broker-and-topic-lists`` (``P:idx:broker-topics:<name>`` and ``P:idx:topics``, one
  variadic SADD each per chunk), ``+change-message`` (INCR ``P:rev`` and the message naming the
  chunk's topics: what nsfleet writes), and beside it ``+revs-per-topic``, what nsfleet wrote
  before issue 32's last change (a counter key ``P:rev:topic:<t>`` per topic, one MSET per
  chunk, then the message);
* other route indexes, each beside ``rows6+broker-and-topic-lists`` (the layout with no route
  index): the topic's set of brokerNames instead of numbers (what nsfleet wrote before group
  numbers), a count of groups per
  topic in one hash (what a route read visiting every group would still need, for the topic
  list), 64 bucket sets of "topic<TAB>group" written by one variadic SADD per bucket and chunk,
  and a bitmap per group over numbered topics written by one BITFIELD per chunk;
* ``nsfleet``: the real thing, RouteStore.register_broker (register_broker.lua's head,
  register_topics.lua per chunk, register_commit.lua), every script call counted;
* ``rows6+topic-sadd`` once more as native commands, a MULTI of 800 rows at a time: Redis's CPU
  per row beside the Lua variant's shows what redis.call costs on top of the commands (no
  script time: compare ``redis_cpu_us_per_row``).

Rounds alternate the variants and medians are kept; each figure is also given as a ratio to
``rows4`` measured in the same run, since this machine is shared. Writes
bench/results/storm_floor.json.

    .venv/bin/python bench/storm_floor.py [--brokers 60] [--topics 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore

P = "nsfleet:{floor}"
CHUNK = 800

# Each variant's loop body sees: P (prefix), name (brokerName), one row as t (topic), rq, wq, pm
# (perm), fl (topicSysFlag) and bk (the topic's bucket, for the bucket variant); `rows` collects
# the chunk's topics for the per-chunk writes after the loop. A chunk is one argument of text, a
# tab-separated line per row, read with string.gmatch as nsfleet's scripts read theirs
# (lua/includes/queues.lua; the bucket is a sixth field nsfleet's lines lack).
LOOP = """
local P, name, rows, buckets = KEYS[1], ARGV[2], {}, {}
for t, rq, wq, pm, fl, bk in string.gmatch(ARGV[1],
    '([^\\t\\n]*)\\t([^\\t\\n]*)\\t([^\\t\\n]*)\\t([^\\t\\n]*)\\t([^\\t\\n]*)\\t([^\\t\\n]*)\\n') do
  %s
  rows[#rows + 1] = t
end
%s
return #rows
"""
HSET4 = ("redis.call('HSET', P..':queue:'..t..':'..name, 'readQueueNums', rq, "
         "'writeQueueNums', wq, 'perm', pm, 'topicSysFlag', fl)")
HSET6 = ("redis.call('HSET', P..':queue:'..t..':'..name, 'topic', t, 'brokerName', name, "
         "'readQueueNums', rq, 'writeQueueNums', wq, 'perm', pm, 'topicSysFlag', fl)")
TOPIC_SADD = "redis.call('SADD', P..':idx:topic:'..t, name)"
# nsfleet's layout writes the route index after the chunk's rows (lua/includes/queues.lua: the
# sets one after another cost ~0.3 us a row less than a SADD beside each row), naming the group
# by its number (lua/includes/group_ids.lua: "-<n>"; ARGV[4] is the broker's number), so that
# each set is an intset.
TOPIC_SADDS = ("local id = '-'..ARGV[4] "
               "for _, t in ipairs(rows) do redis.call('SADD', P..':idx:topic:'..t, id) end")
TOPIC_SADDS_BY_NAME = ("for _, t in ipairs(rows) do "
                       "redis.call('SADD', P..':idx:topic:'..t, name) end")
CHUNK_LIST = ("redis.call('HSET', P..':idx:chunks:'..name, ARGV[3], table.concat(rows, ','))")
LISTS = ("redis.call('SADD', P..':idx:broker-topics:'..name, unpack(rows)) "
         "redis.call('SADD', P..':idx:topics', unpack(rows))")
MESSAGE = ("redis.call('PUBLISH', P..':changes', "
           "redis.call('INCR', P..':rev')..' '..table.concat(rows, ','))")
REVS = ("local rev = redis.call('INCR', P..':rev') local sets = {} "
        "for _, t in ipairs(rows) do sets[#sets + 1] = P..':rev:topic:'..t "
        "sets[#sets + 1] = rev end redis.call('MSET', unpack(sets)) "
        "redis.call('PUBLISH', P..':changes', rev..' '..table.concat(rows, ','))")

# Other route indexes, each beside `+broker-and-topic-lists`, its layout without a route index:
# the index by brokerName (what nsfleet wrote before group numbers), a count
# of groups per topic in one hash (what a route read going through every group would still need
# for the topic list), 64 bucket sets of "topic<TAB>group" (one variadic SADD per bucket and chunk:
# bk is the topic's bucket) and a bitmap per group over numbered topics (one BITFIELD per chunk).
COUNT = "redis.call('HINCRBY', P..':idx:topic-counts', t, 1)"
BUCKET = ("local b = buckets[bk] if not b then b = {} buckets[bk] = b end "
          "b[#b + 1] = t..'\\t'..name")
PAIR_SETS = ("for b, members in pairs(buckets) do "
             "redis.call('SADD', P..':idx:pairs:'..b, unpack(members)) end")
BITMAP = """
local ids = redis.call('HMGET', P..':idx:topic-numbers', unpack(rows))
local new, sets = {}, {}
for i, t in ipairs(rows) do
  if not ids[i] then
    ids[i] = redis.call('INCR', P..':idx:topic-number')
    new[#new + 1] = t new[#new + 1] = ids[i]
  end
  sets[#sets + 1] = 'SET' sets[#sets + 1] = 'u1' sets[#sets + 1] = ids[i] sets[#sets + 1] = 1
end
if #new > 0 then redis.call('HSET', P..':idx:topic-numbers', unpack(new)) end
redis.call('BITFIELD', P..':idx:group-bits:'..name, unpack(sets))
"""
BUCKETS = 64

NATIVE = "rows6+topic-sadd as native commands in a MULTI"
VARIANTS: dict[str, tuple[str, str]] = {
    "rows4": (HSET4, ""),
    "rows4+topic-sadd+chunk-list": (f"{HSET4} {TOPIC_SADD}", CHUNK_LIST),
    "rows4+topic-sadd+chunk-list+broker-sadd": (
        f"{HSET4} {TOPIC_SADD} redis.call('SADD', P..':idx:broker-topics:'..name, t)",
        CHUNK_LIST),
    "hash-per-topic": ("redis.call('HSET', P..':route:'..t, name, "
                       "rq..','..wq..','..pm..','..fl)", ""),
    "rows6": (HSET6, ""),
    "rows6+topic-sadd": (HSET6, TOPIC_SADDS),
    "rows6+topic-sadd+broker-and-topic-lists": (HSET6, f"{TOPIC_SADDS} {LISTS}"),
    "rows6+topic-sadd+broker-and-topic-lists+change-message": (
        HSET6, f"{TOPIC_SADDS} {LISTS} {MESSAGE}"),
    "rows6+topic-sadd+broker-and-topic-lists+revs-per-topic": (
        HSET6, f"{TOPIC_SADDS} {LISTS} {REVS}"),
    "rows6+broker-and-topic-lists": (HSET6, LISTS),
    "rows6+topic-sadd-by-name+broker-and-topic-lists": (HSET6, f"{TOPIC_SADDS_BY_NAME} {LISTS}"),
    "rows6+topic-count+broker-and-topic-lists": (f"{HSET6} {COUNT}", LISTS),
    f"rows6+pair-sets-{BUCKETS}+broker-and-topic-lists": (f"{HSET6} {BUCKET}",
                                                          f"{LISTS} {PAIR_SETS}"),
    "rows6+group-bitmap+broker-and-topic-lists": (HSET6, f"{LISTS} {BITMAP}"),
}


def chunks(topics: int) -> list[str]:
    # The numbers as strings, as nsfleet sends them (a Lua tostring per field costs ~1 us a row).
    names = [f"Topic-{i:05d}" for i in range(topics)]
    return ["".join(f"{t}\t8\t8\t6\t0\t{zlib.crc32(t.encode()) % BUCKETS}\n"
                    for t in names[s:s + CHUNK])
            for s in range(0, topics, CHUNK)]


async def script_usec(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(stats[n]["usec"]) for n in ("cmdstat_evalsha", "cmdstat_eval") if n in stats)


async def used_memory(client: aioredis.Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def redis_cpu_s(client: aioredis.Redis) -> float:
    stats = await client.info("cpu")
    return float(stats["used_cpu_user"]) + float(stats["used_cpu_sys"])


async def measured(client: aioredis.Redis, write: Callable[[], Awaitable[None]]
                   ) -> tuple[float, float, float]:
    """Seconds of Redis script time, seconds of Redis CPU and bytes of memory that ``write``
    cost, from an empty Redis."""
    await client.execute_command("FLUSHALL", "SYNC")
    base_mem = await used_memory(client)
    await client.config_resetstat()
    cpu = await redis_cpu_s(client)
    await write()
    return (await script_usec(client) / 1e6, await redis_cpu_s(client) - cpu,
            await used_memory(client) - base_mem)


def lua_variant(client: aioredis.Redis, src: str, brokers: int, table: list[str]
                ) -> Callable[[], Awaitable[None]]:
    async def write() -> None:
        sha = await client.script_load(src)
        for b in range(brokers):
            for i, text in enumerate(table):
                await client.evalsha(sha, 1, P, text, f"broker-{b:03d}", str(i), str(b + 1))
    return write


def native_variant(client: aioredis.Redis, brokers: int, topics: int
                   ) -> Callable[[], Awaitable[None]]:
    """``rows6+topic-sadd`` as native commands, a MULTI of 800 rows at a time: what Lua's
    redis.call costs beside Redis's own work per command (compare their Redis CPU)."""
    async def write() -> None:
        for b in range(brokers):
            name, number = f"broker-{b:03d}", f"-{b + 1}"
            for start in range(0, topics, CHUNK):
                pipe = client.pipeline(transaction=True)
                chunk = [f"Topic-{i:05d}" for i in range(start, min(start + CHUNK, topics))]
                for t in chunk:
                    pipe.hset(f"{P}:queue:{t}:{name}", mapping={
                        "topic": t, "brokerName": name, "readQueueNums": "8",
                        "writeQueueNums": "8", "perm": "6", "topicSysFlag": "0"})
                for t in chunk:
                    pipe.sadd(f"{P}:idx:topic:{t}", number)
                await pipe.execute()
    return write


def nsfleet_registrations(client: aioredis.Redis, brokers: int, topics: int
                          ) -> Callable[[], Awaitable[None]]:
    """The real registration path, without a worker."""
    async def write() -> None:
        store = RouteStore(client, "bench")
        configs = tuple(TopicConfig(f"Topic-{i:05d}", 8, 8, 6) for i in range(topics))
        for b in range(brokers):
            await store.register_broker(BrokerRegistration(
                "DefaultCluster", f"10.0.{b // 250}.{b % 250}:10911", f"broker-{b:03d}", 0,
                data_version=DataVersion(1, 1_700_000_000_000, 0), topic_configs=configs))
    return write


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=60)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = args.brokers * args.topics
    table = chunks(args.topics)
    samples: dict[str, list[tuple[float, float, float]]] = {}
    calls = 0
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        writes = {name: lua_variant(client, LOOP % (body, after), args.brokers, table)
                  for name, (body, after) in VARIANTS.items()}
        writes[NATIVE] = native_variant(client, args.brokers, args.topics)
        writes["nsfleet"] = nsfleet_registrations(client, args.brokers, args.topics)
        for rnd in range(args.rounds):
            for name, write in writes.items():
                samples.setdefault(name, []).append(await measured(client, write))
            stats = await client.info("commandstats")  # of the last write: nsfleet's
            calls = sum(int(stats[n]["calls"]) for n in ("cmdstat_evalsha", "cmdstat_eval")
                        if n in stats)
            print(f"round {rnd + 1}/{args.rounds} done", flush=True)
        await client.aclose()

    def median(name: str, i: int) -> float:
        return statistics.median(x[i] for x in samples[name])

    floor = median("rows4", 0)
    figures: dict[str, Any] = {}
    for name in samples:
        s, cpu, m = median(name, 0), median(name, 1), median(name, 2)
        figures[name] = {
            "us_per_row": round(s / rows * 1e6, 2) if s else None,
            "seconds_at_600k_rows": round(s / rows * 600_000, 2) if s else None,
            "redis_cpu_us_per_row": round(cpu / rows * 1e6, 2),
            "bytes_per_row": round(m / rows, 1),
            "over_rows4": round(s / floor, 2) if s else None,
        }
        f = figures[name]
        print(f"{name:46s} {f['us_per_row'] or 0:6.2f} us/row  "
              f"{f['seconds_at_600k_rows'] or 0:5.2f} s at 600k rows  "
              f"cpu {f['redis_cpu_us_per_row']:6.2f} us/row  "
              f"{f['bytes_per_row']:6.1f} B/row  x{f['over_rows4']}")
    results = new_results(args)
    results.update({
        "rows": rows,
        "chunk_rows": CHUNK,
        "timed_by": "Redis INFO commandstats (EVALSHA usec): Redis time only, no client",
        "nsfleet_script_calls": calls,
        "native_over_lua_redis_cpu": round(
            figures[NATIVE]["redis_cpu_us_per_row"]
            / figures["rows6+topic-sadd"]["redis_cpu_us_per_row"], 2),
        "variants": figures,
    })
    write_results("storm_floor", results)


if __name__ == "__main__":
    asyncio.run(main())
