"""Redis memory per broker row and per (topic, broker) row, and a worker's RSS.

Registers --brokers brokers (each its own group) of --topics topics each; topics come in sets of
--topics shared by --share groups, so the namespace holds brokers x topics (topic, broker) rows over
brokers x topics / share topics. Then:

* MEMORY USAGE of every key, summed per key type (broker row, group, queue row, each index);
* bytes per broker = the broker-scoped keys (row, group, registration record, members, its
  deadline entry) / brokers; bytes per (topic, broker) row = queue rows + the topic and
  broker-topics index entries / rows; bytes per topic = the per-topic keys / topics;
* INFO used_memory before and after, per (topic, broker) row all-in;
* the RSS of one `nsfleet serve` worker when idle and after reading every route once over HTTP
  (route cache on, so every route is then held in the worker).

Starts its own throwaway redis-server and worker. Writes bench/results/memory.json.

    .venv/bin/python bench/memory.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections import defaultdict
from pathlib import Path

import aiohttp
import psutil
import redis.asyncio as aioredis
from benchlib import new_results, start_worker, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore

# Key types (the first component after the namespace prefix, two for indexes) by what
# they scale with; docs/key-schema.md lists them all.
PER_BROKER = ("broker", "group", "idx:reg", "idx:members", "idx:member-clusters", "idx:conns",
              "idx:filters", "idx:cluster", "idx:deadlines")
PER_ROW = ("topic", "idx:group-topics", "queue", "idx:topic", "idx:broker-topics")  # 2, then 1
PER_TOPIC = ("idx:topics", "idx:mappings")


def key_type(rest: str) -> str:
    parts = rest.split(":")
    return ":".join(parts[:2]) if parts[0] == "idx" and len(parts) > 1 else parts[0]


def registration(i: int, topics: int, share: int) -> BrokerRegistration:
    first = (i // share) * topics
    return BrokerRegistration(
        "bench", f"10.3.{i // 250}.{i % 250}:10911", f"broker-{i}", 0,
        heartbeat_timeout_millis=3_600_000, data_version=DataVersion(1, 1),
        topic_configs=[TopicConfig(f"Topic-{first + k}", 8, 8, 6) for k in range(topics)])


async def key_usage(client: aioredis.Redis, prefix: str) -> dict[str, dict[str, int]]:
    by_type: dict[str, dict[str, int]] = defaultdict(lambda: {"keys": 0, "bytes": 0})
    batch: list[str] = []

    async def flush() -> None:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        for key, used in zip(batch, await pipe.execute(), strict=True):
            row = by_type[key_type(key[len(prefix) + 1:])]
            row["keys"] += 1
            row["bytes"] += int(used or 0)
        batch.clear()

    async for key in client.scan_iter(match=f"{prefix}:*", count=2000):
        batch.append(key)
        if len(batch) >= 2000:
            await flush()
    await flush()
    return dict(by_type)


async def worker_rss(redis_url: str, log: Path, topics: list[str]) -> dict[str, float]:
    proc, http_port, _ = start_worker(redis_url, log, NSFLEET_NAMESPACE="bench",
                                      NSFLEET_ROUTE_CACHE="true")
    try:
        mib = 1 << 20
        idle = psutil.Process(proc.pid).memory_info().rss / mib
        async with aiohttp.ClientSession() as session:
            async def read(part: list[str]) -> None:
                for topic in part:
                    async with session.get(
                            f"http://127.0.0.1:{http_port}/v1/routes/{topic}") as resp:
                        await resp.read()
                        assert resp.status == 200, resp.status
            await asyncio.gather(*(read(topics[w::16]) for w in range(16)))
        cached = psutil.Process(proc.pid).memory_info().rss / mib
        return {"worker_rss_mib_idle": round(idle, 1),
                "worker_rss_mib_every_route_cached": round(cached, 1),
                "routes_read": len(topics)}
    finally:
        proc.terminate()
        proc.wait(20)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=1_000)
    parser.add_argument("--topics", type=int, default=200, help="topics per broker")
    parser.add_argument("--share", type=int, default=20, help="groups serving each topic")
    parser.add_argument("--quick", action="store_true", help="200 brokers x 200 topics")
    args = parser.parse_args()
    if args.quick:
        args.brokers = 200
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        before = (await client.info("memory"))["used_memory"]
        regs = [registration(i, args.topics, args.share) for i in range(args.brokers)]
        for i in range(0, len(regs), 16):
            await asyncio.gather(*(store.register_broker(r) for r in regs[i:i + 16]))
        after = (await client.info("memory"))["used_memory"]
        usage = await key_usage(client, store.keys.prefix)
        rows = args.brokers * args.topics
        topics = await store.all_topics()

        def total(kinds: tuple[str, ...]) -> int:
            return sum(usage[k]["bytes"] for k in kinds if k in usage)

        others = sorted(set(usage) - set(PER_BROKER) - set(PER_ROW) - set(PER_TOPIC))
        results["layout"] = {"brokers": args.brokers, "topic_broker_rows": rows,
                             "topics": len(topics)}
        results["by_key_type"] = {k: {**v, "bytes_per_key": round(v["bytes"] / v["keys"], 1)}
                                  for k, v in sorted(usage.items())}
        results["bytes_per_broker"] = round(total(PER_BROKER) / args.brokers, 1)
        results["bytes_per_topic_broker_row"] = round(total(PER_ROW) / rows, 1)
        results["bytes_per_topic"] = round(total(PER_TOPIC) / len(topics), 1)
        results["bytes_other_keys"] = {k: usage[k]["bytes"] for k in others}
        results["used_memory_delta_bytes"] = after - before
        results["used_memory_per_topic_broker_row_all_in"] = round((after - before) / rows, 1)
        results["worker"] = await worker_rss(server.url, Path(tmp) / "w.log", topics)
        await client.aclose()
    write_results("memory", results)


if __name__ == "__main__":
    asyncio.run(main())
