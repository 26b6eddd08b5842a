"""How fast a change reaches a watching client on another worker.

Starts its own throwaway redis-server and two `nsfleet serve` processes (A and B) on loopback.
Watchers long-poll B (`POST /v1/routes/watch`); a writer changes a watched route through A. Two
figures, each as p50/p99/max over the rounds:

* write -> wake: from the write's acknowledgement by A to a watcher on B receiving the new route;
* deadline -> wake: a broker registered with a short heartbeatTimeoutMillis and never
  heartbeated; from its deadline (lastUpdateTimestamp + timeout, on the Redis clock) to the watcher
  on B receiving the route without it (no sweep involved).

Bounded: --rounds rounds of each, every wait capped. Prints the figures and writes them to
bench/results/propagation.json.

    .venv/bin/python bench/propagation.py [--rounds 200] [--watchers 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from benchlib import new_results, start_worker, write_results

from nsfleet.redis_server import RedisServer


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "max_ms": round(ordered[-1], 2)}


def broker(name: str, addr: str, topic: str, counter: int, timeout_ms: int) -> dict[str, object]:
    return {"clusterName": "bench", "brokerAddr": addr, "brokerName": name, "brokerId": 0,
            "heartbeatTimeoutMillis": timeout_ms,
            "dataVersion": {"counter": counter, "timestamp": counter},
            "topicConfigTable": {topic: {"readQueueNums": 1 + counter % 8,
                                         "writeQueueNums": 1 + counter % 8}, "Pad": {}}}


async def etag_of(session: aiohttp.ClientSession, url: str, topic: str) -> str:
    async with session.get(f"{url}/v1/routes/{topic}") as resp:
        return resp.headers.get("ETag", '"0"').strip('"') if resp.status == 200 else "0"


async def watch_once(session: aiohttp.ClientSession, url: str, topic: str,
                     etag: str) -> float:
    """The monotonic time at which a watch of ``topic`` on ``url`` returned a change."""
    async with session.post(f"{url}/v1/routes/watch?wait=10",
                            json={"topics": {topic: etag}}) as resp:
        await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"watch answered {resp.status}")
    return time.monotonic()


async def write_rounds(session: aiohttp.ClientSession, a: str, b: str, rounds: int,
                       watchers: int) -> list[float]:
    samples = []
    for i in range(rounds):
        etag = await etag_of(session, b, "Prop")
        tasks = [asyncio.create_task(watch_once(session, b, "Prop", etag))
                 for _ in range(watchers)]
        await asyncio.sleep(0.02)  # let the watches reach B
        async with session.post(f"{a}/v1/brokers/register",
                                json=broker("writer", "10.9.0.1:10911", "Prop", i + 2,
                                            120_000)) as resp:
            await resp.read()
            acked = time.monotonic()
        woken = await asyncio.wait_for(asyncio.gather(*tasks), 15)
        samples.extend((t - acked) * 1000 for t in woken)
    return samples


async def deadline_rounds(session: aiohttp.ClientSession, a: str, b: str, rounds: int,
                          timeout_ms: int) -> list[float]:
    samples = []
    for i in range(rounds):
        topic = f"Dead-{i}"
        registered = broker(f"dying-{i}", f"10.8.{i // 250}.{i % 250}:10911", topic, 1,
                            timeout_ms)
        async with session.post(f"{a}/v1/brokers/register", json=registered) as resp:
            await resp.read()
        # The deadline on the Redis clock, mapped onto this process's monotonic clock.
        async with session.get(f"{a}/v1/brokers") as resp:
            rows = (await resp.json())["brokers"]
        row = next(r for r in rows if r["brokerName"] == f"dying-{i}")
        deadline = time.monotonic() + (row["deadline"] - time.time() * 1000) / 1000
        etag = await etag_of(session, b, topic)
        woken = await asyncio.wait_for(watch_once(session, b, topic, etag), 15)
        samples.append((woken - deadline) * 1000)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--deadline-rounds", type=int, default=40)
    parser.add_argument("--timeout-ms", type=int, default=300)
    args = parser.parse_args()
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        settings = {"NSFLEET_NAMESPACE": "propagation", "NSFLEET_SWEEP_INTERVAL": "60"}
        a_proc, a_port, _ = start_worker(server.url, Path(tmp) / "a.log", **settings)
        b_proc, b_port, _ = start_worker(server.url, Path(tmp) / "b.log", **settings)
        a, b = f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"
        try:
            async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=args.watchers * 2)) as session:
                async with session.post(f"{a}/v1/brokers/register",
                                        json=broker("writer", "10.9.0.1:10911", "Prop", 1,
                                                    120_000)) as resp:
                    await resp.read()
                results["write_to_wake"] = summary(
                    await write_rounds(session, a, b, args.rounds, args.watchers))
                results["deadline_to_wake"] = summary(
                    await deadline_rounds(session, a, b, args.deadline_rounds, args.timeout_ms))
        finally:
            for proc in (a_proc, b_proc):
                proc.terminate()
                proc.wait(20)
    write_results("propagation", results)


if __name__ == "__main__":
    asyncio.run(main())
