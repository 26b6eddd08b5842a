"""How long ``nsfleet admin diff`` takes to compare two name services of 10,000 topics.

Starts two throwaway redis-servers and one `nsfleet serve` process on each (two independent
fleets), registers the same brokers with both (4 broker groups, --topics topics each on 2 of
them, so every route lists 2 groups), then times a whole diff (cluster info, topic list, every
route, KV, config; no differences, so no --settle re-read) over remoting on both sides, HTTP on
both, and one of each. The very first round is cold: the workers fill their route caches from
Redis while answering it. For scale, the same route reads one request per connection and round
trip (what mqadmin's client and ``nsfleet admin -n`` do), on a sample, extrapolated.

    .venv/bin/python bench/diff_bench.py [--topics 10000] [--rounds 3]
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

from nsfleet.admin.diff import run_diff
from nsfleet.client.connection import ConnectOptions
from nsfleet.client.name_service import open_name_service
from nsfleet.client.remoting import NamesrvClient
from nsfleet.redis_server import RedisServer
from nsfleet.wire.codec import RequestCode

SEQUENTIAL_SAMPLE = 300  # routes read one connection each, to extrapolate


def registrations(topics: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for g in range(4):
        table = {f"Topic-{t}": {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6}
                 for t in range(topics) if t % 2 == g % 2}
        out.append({"clusterName": "bench", "brokerName": f"broker-{g}", "brokerId": 0,
                    "brokerAddr": f"10.0.0.{g + 1}:10911",
                    "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table})
    return out


async def register(session: aiohttp.ClientSession, url: str,
                   bodies: list[dict[str, object]]) -> None:
    for body in bodies:
        async with session.post(f"{url}/v1/brokers/register", json=body) as resp:
            assert resp.status == 200, await resp.text()


async def timed_diff(a: str, b: str) -> tuple[float, int, int]:
    left = open_name_service(a, ConnectOptions(timeout=30), bulk=True)
    right = open_name_service(b, ConnectOptions(timeout=30), bulk=True)
    try:
        started = time.perf_counter()
        result = await run_diff(left, right, settle=0)
        return time.perf_counter() - started, result.compared["topics"], len(result.differences)
    finally:
        await left.close()
        await right.close()


async def sequential_rate(addr: str) -> float:
    """Routes per second, one connection and request at a time."""
    client = NamesrvClient(addr, timeout=10)
    started = time.perf_counter()
    for t in range(SEQUENTIAL_SAMPLE):
        await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"Topic-{t}"})
    return SEQUENTIAL_SAMPLE / (time.perf_counter() - started)


async def run(args: argparse.Namespace) -> dict[str, object]:
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp:
        servers = [RedisServer(data_dir=Path(tmp) / f"redis{i}", appendonly=False)
                   for i in range(2)]
        workers = []
        try:
            for i, server in enumerate(servers):
                server.start()
                workers.append(start_worker(server.url, Path(tmp) / f"worker{i}.log"))
            http = [f"http://127.0.0.1:{w[1]}" for w in workers]
            remoting = [f"127.0.0.1:{w[2]}" for w in workers]
            bodies = registrations(args.topics)
            async with aiohttp.ClientSession() as session:
                for url in http:
                    await register(session, url, bodies)
            figures: dict[str, object] = {}
            for name, a, b in (("remoting_vs_remoting", remoting[0], remoting[1]),
                               ("http_vs_http", http[0], http[1]),
                               ("remoting_vs_http", remoting[0], http[1])):
                walls = []
                for _ in range(args.rounds):
                    wall, topics, diffs = await timed_diff(a, b)
                    assert diffs == 0 and topics == args.topics, (topics, diffs)
                    walls.append(wall)
                figures[name] = {"wall_s_median": round(statistics.median(walls), 2),
                                 "wall_s": [round(w, 2) for w in walls],
                                 "routes_per_s": round(2 * args.topics / statistics.median(walls))}
            rate = await sequential_rate(remoting[0])
            figures["one_request_per_connection"] = {
                "routes_per_s": round(rate),
                "extrapolated_wall_s": round(2 * args.topics / rate, 1)}
            results["topics"] = args.topics
            results["figures"] = figures
        finally:
            for proc, _, _ in workers:
                proc.terminate()
                proc.wait(10)
            for server in servers:
                server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000 topics, one round")
    args = parser.parse_args()
    if args.quick:
        args.topics, args.rounds = 1_000, 1
    write_results("diff_bench", asyncio.run(run(args)))


if __name__ == "__main__":
    main()
