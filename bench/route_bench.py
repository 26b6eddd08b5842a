"""Benchmark one nsfleet worker on this machine: route reads (HTTP and remoting, with and without
the route cache), registration and heartbeat latency, and Redis memory per queue entry.

Starts its own throwaway redis-server and `nsfleet serve` processes on loopback, loads them for a
bounded time, prints the figures and writes them to bench/results/route_bench.json.

    .venv/bin/python bench/route_bench.py [--seconds 5] [--brokers 50] [--topics 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
from benchlib import new_results, start_worker, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from nsfleet.wire.codec import FrameDecoder, RemotingCommand, encode_frame


def registration(i: int, topics: list[str]) -> BrokerRegistration:
    return BrokerRegistration("bench", f"10.1.{i // 250}.{i % 250}:10911", f"broker-{i}", 0,
                              data_version=DataVersion(1, int(time.time() * 1000)),
                              topic_configs=[TopicConfig(t, 8, 8, 6) for t in topics])


async def populate(store: RouteStore, brokers: int, topics: int) -> dict[str, float]:
    names = [f"Topic-{t}" for t in range(topics)]
    per_broker = max(1, topics * 3 // brokers)  # each topic on ~3 broker groups
    before = (await store.redis.info("memory"))["used_memory"]
    started = time.perf_counter()
    for i in range(brokers):
        chosen = [names[(i * per_broker + k) % topics] for k in range(per_broker)]
        await store.register_broker(registration(i, chosen))
    elapsed = time.perf_counter() - started
    after = (await store.redis.info("memory"))["used_memory"]
    entries = 0
    for t in names:
        entries += await store.redis.hlen(store.keys.topic_routes(t))
    return {"queue_entries": entries, "redis_bytes_per_queue_entry": (after - before) / entries,
            "full_registration_ms_mean": elapsed / brokers * 1000,
            "topics_per_registration": per_broker}


async def latencies(store: RouteStore, n: int = 300) -> dict[str, float]:
    big = [f"Topic-{t}" for t in range(1000)]
    reg = registration(9999, big)
    await store.register_broker(reg)
    samples: dict[str, list[float]] = {"heartbeat": [], "reregister_1000_unchanged": [],
                                       "route_lua": []}
    for _ in range(n):
        t = time.perf_counter()
        await store.heartbeat(reg.cluster, reg.addr)
        samples["heartbeat"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await store.pickup_route("Topic-1")
        samples["route_lua"].append(time.perf_counter() - t)
    for _ in range(30):
        t = time.perf_counter()
        await store.register_broker(reg)
        samples["reregister_1000_unchanged"].append(time.perf_counter() - t)
    await store.unregister_broker(reg.cluster, reg.addr, reg.name)
    return {f"{k}_p50_ms": statistics.median(v) * 1000 for k, v in samples.items()} | {
        f"{k}_p99_ms": sorted(v)[int(len(v) * 0.99) - 1] * 1000 for k, v in samples.items()}


async def http_load(url: str, topics: int, seconds: float, concurrency: int = 32) -> float:
    count = 0
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:
        async def one(w: int) -> None:
            nonlocal count
            i = w
            while time.monotonic() < deadline:
                async with session.get(f"{url}/v1/routes/Topic-{i % topics}") as resp:
                    await resp.read()
                    assert resp.status == 200, resp.status
                count += 1
                i += concurrency
        await asyncio.gather(*(one(w) for w in range(concurrency)))
    return count / seconds


def route_request(opaque: int, topics: int) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC for one of ``Topic-0`` .. ``Topic-<topics - 1>``."""
    return encode_frame(RemotingCommand(code=105, version=479, opaque=opaque,
                                        ext_fields={"topic": f"Topic-{opaque % topics}"}))


async def remoting_load(port: int, topics: int, seconds: float, conns: int = 8,
                        window: int = 16, tls: ssl.SSLContext | None = None) -> float:
    """Route reads per second over ``conns`` long-lived connections, ``window`` requests in
    flight on each (``tls``: over TLS)."""
    count = 0
    deadline = time.monotonic() + seconds

    async def one(c: int) -> None:
        nonlocal count
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1" if tls else None)
        decoder, opaque, outstanding = FrameDecoder(), c * 1_000_000, 0
        while time.monotonic() < deadline or outstanding:
            while outstanding < window and time.monotonic() < deadline:
                opaque += 1
                writer.write(route_request(opaque, topics))
                outstanding += 1
            await writer.drain()
            for resp in decoder.feed(await reader.read(1 << 16)):
                assert resp.code == 0, resp.remark
                outstanding -= 1
                count += 1
        writer.close()
    await asyncio.gather(*(one(c) for c in range(conns)))
    return count / seconds



async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--brokers", type=int, default=50)
    parser.add_argument("--topics", type=int, default=2000)
    args = parser.parse_args()
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        results["populate"] = await populate(store, args.brokers, args.topics)
        results["store_latency"] = await latencies(store)
        for cache in (True, False):
            proc, http_port, remoting_port = start_worker(
                server.url, Path(tmp) / "w.log", NSFLEET_NAMESPACE="bench",
                NSFLEET_ROUTE_CACHE="true" if cache else "false")
            try:
                key = "cache_on" if cache else "cache_off"
                results[f"http_routes_per_s_{key}"] = await http_load(
                    f"http://127.0.0.1:{http_port}", args.topics, args.seconds)
                results[f"remoting_routes_per_s_{key}"] = await remoting_load(
                    remoting_port, args.topics, args.seconds)
            finally:
                proc.terminate()
                proc.wait(20)
        await client.aclose()
    write_results("route_bench", results)


if __name__ == "__main__":
    asyncio.run(main())
