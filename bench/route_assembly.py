"""What one route read missing the cache costs the worker's CPU (issue 42): route.lua's call
(redis-py sending it and reading its reply), putting the route together from the reply
(store/table_reads.py) and writing it as a 5.x client gets it (to_dict and msgspec's encoder),
by the number of groups, each a master and a slave serving every topic.

Two variants, alternating by round, medians kept:
- "shared": as a worker runs, each group entry and queue row parsed once and its BrokerData,
  QueueData and their dicts shared by every route (store/route_parts.py);
- "cold": every read with parts of its own, as before route parts (each entry parsed and each
  dict written again per read): what the first read of each group costs.

CPU is this process's (time.process_time), Redis's own time left out (bench/route_cost.py has
it). Writes bench/results/route_assembly.json.

    .venv/bin/python bench/route_assembly.py [--groups 10 60 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
from benchlib import new_results, write_results
from route_cost import TOPICS, populated_store

from nsfleet.domain.model import ORDER_TOPIC_CONFIG, TopicRouteData
from nsfleet.remoting.handlers import _standard_route
from nsfleet.store import RouteStore, scripts
from nsfleet.store.route_parts import RouteParts

READS = 300  # per round and variant
MEMBERS = 2


def unshared(route: TopicRouteData) -> TopicRouteData:
    """``route`` with parts of its own, as a read made them before route parts."""
    return TopicRouteData([msgspec.structs.replace(q) for q in route.queue_datas],
                          [msgspec.structs.replace(b) for b in route.broker_datas])


async def cpu_ms_per_read(store: RouteStore, variant: str) -> dict[str, float]:
    reads = store.reads
    keys = [store.keys.kv_table(ORDER_TOPIC_CONFIG)]
    call = cpu = encode = 0.0
    for i in range(READS):
        topic = f"T{i % TOPICS}"
        if variant == "cold":
            reads._parts = RouteParts()
        t0 = time.process_time()
        await reads._calls.call("route", scripts.RouteArgs(topic, "0"), keys)
        t1 = time.process_time()
        read = await store.pickup_route(topic)
        t2 = time.process_time()
        assert read is not None
        route = unshared(read.route) if variant == "cold" else read.route
        t3 = time.process_time()
        _standard_route(route)
        t4 = time.process_time()
        call, cpu, encode = call + t1 - t0, cpu + t2 - t1, encode + t4 - t3
    return {"call": call * 1000 / READS, "read": cpu * 1000 / READS,
            "encode": encode * 1000 / READS}


async def one_shape(groups: int, rounds: int) -> dict[str, Any]:
    async with populated_store(groups, MEMBERS) as store:
        samples: dict[str, list[dict[str, float]]] = {"shared": [], "cold": []}
        for rnd in range(rounds):
            for variant in ("shared", "cold") if rnd % 2 == 0 else ("cold", "shared"):
                samples[variant].append(await cpu_ms_per_read(store, variant))
    out: dict[str, Any] = {"groups": groups, "members_per_group": MEMBERS}
    for variant, runs in samples.items():
        med = {part: statistics.median(r[part] for r in runs) for part in runs[0]}
        # The read includes its call; the assembly is what it adds.
        out[variant] = {"call_ms": round(med["call"], 3),
                        "assembly_ms": round(med["read"] - med["call"], 3),
                        "encode_ms": round(med["encode"], 3),
                        "miss_ms": round(med["read"] + med["encode"], 3)}
    out["cold_over_shared"] = round(out["cold"]["miss_ms"] / out["shared"]["miss_ms"], 2)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[10, 60, 300])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = new_results(args)
    results["timed_by"] = "time.process_time of the reading process: worker CPU, not Redis's"
    results["shapes"] = [await one_shape(g, args.rounds) for g in args.groups]
    write_results("route_assembly", results)


if __name__ == "__main__":
    asyncio.run(main())
