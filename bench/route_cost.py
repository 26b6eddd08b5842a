"""What one route read missing the cache costs Redis (issues 32 and 42): route.lua's Redis time
per read by the number of groups in the route and members per group, beside, in the same rounds,
the floor of the store's layout (layout 2, one hash per topic: the topic's hash whole and the
groups' route entries in one HMGET, returned as route.lua returns them, nothing else) and an
EVALSHA of route.lua's head alone (its arguments and includes, nothing run), timed by Redis
itself (INFO commandstats, EVALSHA usec). route.lua only reads; the worker puts the route
together (store/table_reads.py), which this leaves out. Before issue 42 the floor was the row
layout's (the groups of the topic, their names and each group's queue row).

Each group is a master, or a master and a slave, in one cluster, every group serving every
topic. Rounds alternate the variants; medians are kept. Reads ask for no orderTopicConf, the
NameServer's default (orderMessageEnable false). Writes bench/results/route_cost.json.

    .venv/bin/python bench/route_cost.py [--groups 10 60 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore, scripts

TOPICS = 50
READS = 300  # per round and variant
# The floor: what any atomic route read over layout 2 needs (the topic's hash, then each group's
# route entry), with route.lua's own includes (its text up to its first statement).
ROUTE = scripts.source("route", layout=scripts.LAYOUT_TOPICS)
HEAD = ROUTE[:ROUTE.index("local topic = arg_topic")]
FLOOR = HEAD + """
local rows = rcall('HGETALL', k_topic_routes(arg_topic))
local names = {}
for i = 1, #rows, 2 do names[#names + 1] = rows[i] end
local entries = rcall('HMGET', k_route_groups(), unpack(names))
return {table.concat(rows, '\\n'), table.concat(entries, '\\r')}
"""
VARIANTS = {"route.lua": ROUTE, "floor": FLOOR, "head": HEAD + "return {'none'}"}


async def populate(store: RouteStore, groups: int, members: int) -> None:
    topics = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(TOPICS)]
    for g in range(groups):
        for broker_id in range(members):
            await store.register_broker(BrokerRegistration(
                "c1", f"10.{broker_id}.{g // 250}.{g % 250}:10911", f"broker-{g}", broker_id,
                f"10.{broker_id}.{g // 250}.{g % 250}:10912", "", 3_600_000, None,
                DataVersion(1, 100, 0), topics, []))


def route_args(topic: str) -> list[Any]:
    """route.lua's ARGV for a read of ``topic``, without its orderTopicConf (the default)."""
    return scripts.argv("route", scripts.RouteArgs(topic, "0"))


async def usec_per_read(client: aioredis.Redis, sha: str, keys: list[str]) -> float:
    await client.config_resetstat()
    for i in range(READS):
        await client.evalsha(sha, len(keys), *keys, *route_args(f"T{i % TOPICS}"))
    stats = await client.info("commandstats")
    return int(stats["cmdstat_evalsha"]["usec"]) / READS


@contextlib.asynccontextmanager
async def populated_store(groups: int, members: int) -> AsyncIterator[RouteStore]:
    """A layout-2 store on a throwaway redis-server, every group serving every topic."""
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis(host=server.host, port=server.port, decode_responses=True)
        store = RouteStore(client, "bench")
        await client.set(store.keys.layout, scripts.LAYOUT_TOPICS)
        await store.load_scripts()
        await populate(store, groups, members)
        try:
            yield store
        finally:
            await client.aclose()


async def one_shape(groups: int, members: int, rounds: int) -> dict[str, Any]:
    async with populated_store(groups, members) as store:
        client = store.redis
        assert isinstance(client, aioredis.Redis)
        keys = [store.keys.prefix, store.keys.kv_table("ORDER_TOPIC_CONFIG")]
        shas = {name: await client.script_load(text) for name, text in VARIANTS.items()}
        route = await client.evalsha(shas["route.lua"], len(keys), *keys, *route_args("T0"))
        assert route[0] == "ok" and route[3].count("\n") + 1 == 2 * groups, "every group"
        times: dict[str, list[float]] = {name: [] for name in shas}
        for rnd in range(rounds):
            order = list(shas.items())
            for name, sha in order if rnd % 2 == 0 else order[::-1]:
                times[name].append(await usec_per_read(client, sha, keys))
    route_us, floor_us, head_us = (statistics.median(times[n])
                                   for n in ("route.lua", "floor", "head"))
    return {"groups": groups, "members_per_group": members,
            "route_us_per_read": round(route_us, 1),
            "route_us_per_group": round(route_us / groups, 2),
            "floor_us_per_read": round(floor_us, 1),
            "head_us_per_read": round(head_us, 1),
            "route_over_floor": round(route_us / floor_us, 2)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[10, 60, 300])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = new_results(args)
    results["timed_by"] = "Redis INFO commandstats (EVALSHA usec): Redis time only, no client"
    results["shapes"] = [await one_shape(g, m, args.rounds)
                         for g in args.groups for m in (1, 2)]
    write_results("route_cost", results)


if __name__ == "__main__":
    asyncio.run(main())
