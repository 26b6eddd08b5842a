"""What one route read costs Redis (issue 32: the reads during a registration storm): route.lua's
Redis time per read by the number of groups in the route and members per group, beside, in the
same rounds, the floor of the row layout (the route index's SMEMBERS, the groups' names for their
numbers in one HMGET, and one HMGET of a queue row per group, nothing else), timed by Redis
itself (INFO commandstats, EVALSHA usec). route.lua only reads; the worker puts the route
together (store/table_reads.py), which this leaves out.

Each group is a master, or a master and a slave, in one cluster, every group serving every
topic. Rounds alternate route.lua and the floor; medians are kept. Writes
bench/results/route_cost.json.

    .venv/bin/python bench/route_cost.py [--groups 10 60 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
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
# The floor: what any route read over this row layout needs (the groups of the topic, then each
# group's queue row), with route.lua's own includes (its text up to its first statement).
ROUTE = scripts.source("route")
FLOOR = ROUTE[:ROUTE.index("local topic = arg_topic")] + """
local names = group_names_of(rcall('SMEMBERS', k_topic(arg_topic)))
table.sort(names)
for _, name in ipairs(names) do
  rcall('HMGET', k_queue(arg_topic, name), 'readQueueNums', 'writeQueueNums', 'perm',
    'topicSysFlag')
end
return {'none'}
"""


async def populate(store: RouteStore, groups: int, members: int) -> None:
    topics = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(TOPICS)]
    for g in range(groups):
        for broker_id in range(members):
            await store.register_broker(BrokerRegistration(
                "c1", f"10.{broker_id}.{g // 250}.{g % 250}:10911", f"broker-{g}", broker_id,
                f"10.{broker_id}.{g // 250}.{g % 250}:10912", "", 3_600_000, None,
                DataVersion(1, 100, 0), topics, []))


def route_args(topic: str) -> list[Any]:
    """route.lua's ARGV for a read of ``topic`` with its orderTopicConf."""
    return scripts.argv("route", scripts.RouteArgs(topic, "1"))


async def usec_per_read(client: aioredis.Redis, sha: str, keys: list[str]) -> float:
    await client.config_resetstat()
    for i in range(READS):
        await client.evalsha(sha, len(keys), *keys, *route_args(f"T{i % TOPICS}"))
    stats = await client.info("commandstats")
    return int(stats["cmdstat_evalsha"]["usec"]) / READS


async def one_shape(groups: int, members: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis(host=server.host, port=server.port, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        await populate(store, groups, members)
        keys = [store.keys.prefix, store.keys.kv_table("ORDER_TOPIC_CONFIG")]
        shas = {"route.lua": await client.script_load(ROUTE),
                "floor": await client.script_load(FLOOR)}
        route = await client.evalsha(shas["route.lua"], len(keys), *keys, *route_args("T0"))
        assert route[0] == "ok" and len(route[3]) == groups, "every group in the route"
        times: dict[str, list[float]] = {name: [] for name in shas}
        for _ in range(rounds):
            for name, sha in shas.items():
                times[name].append(await usec_per_read(client, sha, keys))
        await client.aclose()
    route_us, floor_us = (statistics.median(times[n]) for n in ("route.lua", "floor"))
    return {"groups": groups, "members_per_group": members,
            "route_us_per_read": round(route_us, 1),
            "route_us_per_group": round(route_us / groups, 2),
            "floor_us_per_read": round(floor_us, 1),
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
