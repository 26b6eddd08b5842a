"""What a broker's 30 s re-registration costs, by topic count: first registration, unchanged
re-registration (the same DataVersion and table: the O(1) digest path) and changed
re-registration, as wall time through RouteStore and as Redis script time (INFO commandstats).

Starts its own throwaway redis-server; bounded by --rounds per size. Prints the figures and
writes them to bench/results/reregistration.json.

    .venv/bin/python bench/reregistration.py [--sizes 1000,10000,60000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore


async def script_usec(client: aioredis.Redis) -> tuple[int, int]:
    stats = await client.info("commandstats")
    calls = usec = 0
    for name in ("cmdstat_evalsha", "cmdstat_eval"):
        if name in stats:
            calls += int(stats[name]["calls"])
            usec += int(stats[name]["usec"])
    return calls, usec


async def measure(store: RouteStore, client: aioredis.Redis, reg: BrokerRegistration,
                  rounds: int) -> dict[str, float]:
    walls = []
    await client.config_resetstat()
    for _ in range(rounds):
        started = time.perf_counter()
        await store.register_broker(reg)
        walls.append((time.perf_counter() - started) * 1000)
    calls, usec = await script_usec(client)
    return {"wall_ms_p50": round(statistics.median(walls), 2),
            "wall_ms_max": round(max(walls), 2),
            "redis_script_ms_per_registration": round(usec / 1000 / rounds, 3),
            "script_calls_per_registration": round(calls / rounds, 2)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,60000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        for size in (int(s) for s in args.sizes.split(",")):
            reg = BrokerRegistration(
                "bench", f"10.2.0.{size % 250}:10911", f"big-{size}", 0,
                data_version=DataVersion(1, 1),
                topic_configs=[TopicConfig(f"T{size}-{i}", 8, 8, 6) for i in range(size)])
            started = time.perf_counter()
            await store.register_broker(reg)
            first = (time.perf_counter() - started) * 1000
            row: dict[str, object] = {"first_registration_wall_ms": round(first, 1)}
            row["unchanged"] = await measure(store, client, reg, args.rounds)
            changed = [replace(reg, data_version=DataVersion(2 + i, 2 + i))
                       for i in range(max(2, args.rounds // 5))]
            walls, usec_total = [], 0
            for c in changed:
                await client.config_resetstat()
                t0 = time.perf_counter()
                await store.register_broker(c)
                walls.append((time.perf_counter() - t0) * 1000)
                usec_total += (await script_usec(client))[1]
            row["changed_data_version"] = {
                "wall_ms_p50": round(statistics.median(walls), 1),
                "redis_script_ms_per_registration": round(usec_total / 1000 / len(changed), 2)}
            results[str(size)] = row
            await store.unregister_broker("bench", reg.addr, reg.name)
        await client.aclose()
    write_results("reregistration", results)


if __name__ == "__main__":
    asyncio.run(main())
