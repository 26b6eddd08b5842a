"""The Redis cost of each steady-state operation, and what one Redis shard carries from them.

Measured on a throwaway redis-server through RouteStore, every operation repeated: Redis time per
call as script time (INFO commandstats) and as Redis CPU (INFO cpu, which adds reading the
arguments and writing the reply; the model uses the larger):

* heartbeat (BROKER_HEARTBEAT / QUERY_DATA_VERSION);
* unchanged re-registration (the digest probe) at each of --topics topics;
* a new DataVersion with the same table (O(1) like the unchanged one: the rows already hold it);
* changed registration (a new DataVersion and every topic's values changed) per topic;
* uncached route read of a topic served by each of --groups groups;
* sweep with none due.

Then the capacity model (docs/capacity.md): with a Redis budget of --budget
of one core, how many brokers of T topics one shard carries when every broker registers with
each of W workers every 30 s, every worker sweeps every 10 s and refreshes each cached route at
most every 60 s. Writes bench/results/capacity.json.

    .venv/bin/python bench/capacity.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from benchlib import ScriptClock, new_results, write_results
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore

REGISTER_PERIOD_S = 30.0  # a broker's registerNameServerPeriod (forceRegister: a full body)
SWEEP_INTERVAL_S = 10.0  # nsfleet's sweep_interval default
CACHE_MAX_AGE_S = 60.0  # a cached route is re-read at least this often


def broker(name: str, host: int, topics: list[str]) -> BrokerRegistration:
    return BrokerRegistration("cap", f"10.9.{host // 250}.{host % 250}:10911", name, 0,
                              heartbeat_timeout_millis=3_600_000,
                              data_version=DataVersion(1, 1),
                              topic_configs=[TopicConfig(t, 8, 8, 6) for t in topics])


async def cost(client: aioredis.Redis, calls: int,
               op: Callable[[int], Awaitable[object]]) -> dict[str, float]:
    """Redis ms per call of ``op(i)``: script time and Redis CPU."""
    clock = ScriptClock(client)
    await clock.reset()
    cpu = await client.info("cpu")
    before = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    for i in range(calls):
        await op(i)
    cpu = await client.info("cpu")
    after = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    redis = await clock.read()
    return {"calls": calls, "script_ms": round(redis["script_ms"] / calls, 4),
            "redis_cpu_ms": round((after - before) * 1000 / calls, 4),
            "longest_script_ms": redis["longest_script_ms"]}


def model(costs: dict[str, Any], budget: float, workers: int, topics: int,
          groups: int) -> dict[str, float]:
    """Brokers of ``topics`` topics (each topic on ``groups`` groups) one shard carries."""
    def ms(name: str) -> float:
        row = costs[name]
        return max(row["script_ms"], row["redis_cpu_ms"])

    unchanged = ms(f"unchanged_registration_{topics}")
    route = ms(f"route_read_{groups}_groups")
    budget_ms = budget * 1000 - workers * ms("sweep_none_due") / SWEEP_INTERVAL_S
    # Per broker and second, in Redis ms: its re-registration with every worker; and, when
    # clients read every topic on every worker, its share (topics/groups topics) of the
    # cached routes each worker re-reads once per CACHE_MAX_AGE_S.
    registering = workers * unchanged / REGISTER_PERIOD_S
    reading = workers * (topics / groups) * route / CACHE_MAX_AGE_S
    return {"workers": workers, "topics_per_broker": topics, "groups_per_topic": groups,
            "registration_ms_per_s_per_broker": round(registering, 4),
            "route_refresh_ms_per_s_per_broker": round(reading, 4),
            "max_brokers_registering": int(budget_ms / registering),
            "max_brokers_registering_and_every_topic_read": int(budget_ms / (registering
                                                                              + reading)),
            "changed_registrations_per_s_in_budget": round(
                budget * 1000 / (topics * costs["changed_registration_per_topic_ms"]), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", default="100,1000,10000", help="per broker")
    parser.add_argument("--groups", default="2,8,50", help="groups serving a read topic")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--budget", type=float, default=0.5, help="share of one Redis core")
    parser.add_argument("--quick", action="store_true", help="200 calls, 100/1000 topics")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.topics = 200, "100,1000"
    sizes = [int(t) for t in args.topics.split(",")]
    groups = [int(g) for g in args.groups.split(",")]
    results = new_results(args)
    costs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "cap")
        await store.load_scripts()
        hb = broker("hb", 1, ["HB-A", "HB-B"])
        await store.register_broker(hb)
        costs["heartbeat"] = await cost(client, args.calls,
                                        lambda _: store.heartbeat(hb.cluster, hb.addr))
        costs["sweep_none_due"] = await cost(client, args.calls, lambda _: store.sweep())
        per_topic = []
        for size in sizes:
            reg = broker(f"size{size}", 2 + len(per_topic), [f"S{size}-{k}" for k in range(size)])
            await store.register_broker(reg)
            # enough calls that Redis CPU (getrusage, coarse) is more than its resolution
            calls = max(200, args.calls * 100 // size)
            costs[f"unchanged_registration_{size}"] = await cost(
                client, calls, lambda _, reg=reg: store.register_broker(reg))
            costs[f"new_version_same_table_{size}"] = await cost(
                client, calls, lambda i, reg=reg: store.register_broker(
                    replace(reg, data_version=DataVersion(2 + i, 2 + i))))
            changed = max(3, calls // 20)
            tables = [[structs.replace(t, read_queue_nums=n) for t in reg.topic_configs]
                      for n in (4, 8)]
            row = await cost(client, changed, lambda i, reg=reg, tables=tables:
                             store.register_broker(replace(
                                 reg, data_version=DataVersion(10_000 + i, 10_000 + i),
                                 topic_configs=tables[i % 2])))
            costs[f"changed_registration_{size}"] = row
            per_topic.append(max(row["script_ms"], row["redis_cpu_ms"]) / size)
        costs["changed_registration_per_topic_ms"] = round(max(per_topic), 5)
        for g in groups:
            for k in range(g):
                await store.register_broker(broker(f"g{g}-{k}", 100 + k, [f"Read{g}", "Pad"]))
            costs[f"route_read_{g}_groups"] = await cost(
                client, args.calls, lambda _, g=g: store.pickup_route(f"Read{g}"))
        await client.aclose()
    results["costs"] = costs
    results["model"] = [model(costs, args.budget, w, t, g)
                        for w in (2, 4, 8) for t in sizes for g in groups]
    write_results("capacity", results)


if __name__ == "__main__":
    asyncio.run(main())
