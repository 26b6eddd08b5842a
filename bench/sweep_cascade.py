"""What expiry and unregistration cost in Redis as the fleet grows.

* sweep, none due: one sweep call (sweep.lua, as the Sweeper runs it) at several live broker
  counts up to --brokers, none of them past its deadline: Redis script time per call and wall.
* sweep, --due due: --due more brokers registered with a short heartbeat timeout and left to
  expire among --brokers live ones; then the Sweeper's loop (batches of --batch) until none is
  left: script time per call, longest single script, total and wall.
* cascade: unregistering a broker of --cascade-topics topics (its own) while the namespace holds
  each total of --totals topics: Redis script time (total and longest call) and wall, medians
  of --rounds; the done-when is largest total / smallest total <= 3x.

Starts its own throwaway redis-server and drives RouteStore in-process (the Redis cost is what is
measured; the worker adds nothing to it). Bounded by the sizes and --rounds. Writes
bench/results/sweep_cascade.json.

    .venv/bin/python bench/sweep_cascade.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis
from benchlib import ScriptClock, new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore

LONG_TIMEOUT_MS = 3_600_000
SHORT_TIMEOUT_MS = 2_000


def small_broker(i: int, timeout_ms: int, prefix: str = "b") -> BrokerRegistration:
    """A broker of its own group serving two topics that 100 groups share (a typical fleet)."""
    return BrokerRegistration(
        "bench", f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:10911", f"{prefix}-{i}", 0,
        heartbeat_timeout_millis=timeout_ms, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig(f"Shared-{i % 100}", 8, 8, 6),
                       TopicConfig(f"Shared-{(i + 50) % 100}", 8, 8, 6)])


def big_broker(name: str, host: int, first: int, topics: int) -> BrokerRegistration:
    return BrokerRegistration(
        "bench", f"10.200.{host}.1:10911", name, 0,
        heartbeat_timeout_millis=LONG_TIMEOUT_MS, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig(f"{name}-T{first + k}", 8, 8, 6) for k in range(topics)])


async def register_all(store: RouteStore, regs: list[BrokerRegistration],
                       concurrency: int = 64) -> None:
    for i in range(0, len(regs), concurrency):
        await asyncio.gather(*(store.register_broker(r) for r in regs[i:i + concurrency]))


async def sweep_none_due(store: RouteStore, clock: ScriptClock, calls: int) -> dict[str, float]:
    walls = []
    await clock.reset()
    for _ in range(calls):
        started = time.perf_counter()
        result = await store.sweep()
        walls.append((time.perf_counter() - started) * 1000)
        assert not result.removed, "a broker expired during the none-due phase"
    redis = await clock.read()
    return {"script_ms_per_sweep": round(redis["script_ms"] / calls, 4),
            "longest_script_ms": redis["longest_script_ms"],
            "wall_ms_p50": round(statistics.median(walls), 3)}


async def sweep_due(store: RouteStore, clock: ScriptClock, due: int,
                    batch: int) -> dict[str, float]:
    regs = [small_broker(i, SHORT_TIMEOUT_MS, "due") for i in range(due)]
    await register_all(store, regs)
    await asyncio.sleep(SHORT_TIMEOUT_MS / 1000 + 0.5)
    await clock.reset()
    started = time.perf_counter()
    removed = calls = 0
    while True:
        result = await store.sweep(batch=batch)
        calls += 1
        removed += len(result.removed)
        if len(result.removed) < batch:
            break
    wall = (time.perf_counter() - started) * 1000
    redis = await clock.read()
    return {"removed": removed, "sweep_calls": calls, "batch": batch,
            "script_ms_total": redis["script_ms"],
            "script_ms_per_call": round(redis["script_ms"] / calls, 3),
            "script_ms_per_broker": round(redis["script_ms"] / max(1, removed), 4),
            "longest_script_ms": redis["longest_script_ms"], "wall_ms_total": round(wall, 1)}


async def cascade(store: RouteStore, clock: ScriptClock, total: int, topics: int,
                  rounds: int) -> dict[str, float]:
    """Unregister a ``topics``-topic broker while ``total`` topics exist in the namespace."""
    await store.redis.flushdb()
    others = total - topics
    sizes = [topics] * (others // topics) + ([others % topics] if others % topics else [])
    fillers = [big_broker(f"filler{f}", f, 0, n) for f, n in enumerate(sizes)]
    await register_all(store, fillers, concurrency=1)
    scripts, longest, walls = [], [], []
    for r in range(rounds):
        reg = big_broker("victim", 249, r * topics, topics)
        await store.register_broker(reg)
        await clock.reset()
        started = time.perf_counter()
        await store.unregister_broker(reg.cluster, reg.addr, reg.name)
        walls.append((time.perf_counter() - started) * 1000)
        redis = await clock.read()
        scripts.append(redis["script_ms"])
        longest.append(redis["longest_script_ms"])
    assert len(await store.all_topics()) == total - topics, "the cascade left topics behind"
    return {"topics_in_namespace": total, "broker_topics": topics,
            "script_ms_p50": round(statistics.median(scripts), 2),
            "longest_script_ms_max": round(max(longest), 2),
            "wall_ms_p50": round(statistics.median(walls), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=100, help="the Sweeper's batch")
    parser.add_argument("--cascade-topics", type=int, default=10_000)
    parser.add_argument("--totals", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="a few seconds: 2,000 brokers, 200 due, 2k-topic cascade")
    args = parser.parse_args()
    if args.quick:
        args.brokers, args.due, args.cascade_topics, args.rounds = 2_000, 200, 2_000, 3
        args.totals = "2000,20000"
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        clock = ScriptClock(client)
        checkpoints = sorted({c for c in (args.brokers // 10, args.brokers // 3, args.brokers)
                              if c > 0})
        none_due: dict[str, object] = {}
        registered = 0
        for live in checkpoints:
            await register_all(store, [small_broker(i, LONG_TIMEOUT_MS)
                                       for i in range(registered, live)])
            registered = live
            none_due[str(live)] = await sweep_none_due(store, clock, 50)
        results["sweep_none_due_by_live_brokers"] = none_due
        results["sweep_due"] = {"live_brokers": args.brokers,
                                **await sweep_due(store, clock, args.due, args.batch)}
        by_total = {}
        for total in (int(t) for t in args.totals.split(",")):
            by_total[str(total)] = await cascade(store, clock, total, args.cascade_topics,
                                                 args.rounds)
        results["cascade_by_total_topics"] = by_total
        sizes = sorted(by_total, key=int)
        small, large = by_total[sizes[0]], by_total[sizes[-1]]
        results["cascade_ratio_script"] = round(large["script_ms_p50"] / small["script_ms_p50"], 2)
        results["cascade_ratio_wall"] = round(large["wall_ms_p50"] / small["wall_ms_p50"], 2)
        results["cascade_ratio_target"] = 3.0
        await client.aclose()
    write_results("sweep_cascade", results)


if __name__ == "__main__":
    asyncio.run(main())
