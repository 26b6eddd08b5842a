"""Redis away, routes still answered: what an outage costs readers, and what --min-replica-acks
costs writers.

1. Outages of 5, 30 and 150 s (``--outages``): two workers on one Redis (AOF), brokers
   registering with both every 0.4 s (heartbeat timeout 2 s, so every outage outlasts it),
   readers reading every broker's topic from both workers over HTTP and remoting
   (tests/support/outage_load.py). Redis is SIGKILLed, then restarted from its AOF. Reported per
   outage: the share of reads answered during it (cached routes, served from the stale view),
   the share answered after the return, brokers missing from a route after the return, and the
   time from Redis answering again until every worker serves a current (unmarked) answer.
   A Java NameServer answers 100 % (its tables are in its memory); nsfleet before this change
   answered 0 %.
2. Replica acks: registrations that change the table, one at a time, through a worker with
   ``--min-replica-acks 1`` against one without, on a master with one replica; alternate rounds,
   medians; the ratio is the cost of waiting for the replica.

  python bench/outage.py [--outages 5,30,150] [--acks-rounds 6] [--quick]   # --quick: 5 s only
Results: bench/results/outage.json.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import new_results, start_worker, summary, write_results
from nsfleet.redis_server import RedisServer
from tests.support.outage_load import (
    OutageLoad,
    missing_brokers,
    served_fraction,
)


def _current(url: str) -> bool:
    """A worker answers a route read unmarked (its view is coherent again)."""
    try:
        with urllib.request.urlopen(f"{url}/v1/routes/T0", timeout=2) as resp:
            return resp.status == 200 and "X-Nsfleet-Stale" not in resp.headers
    except (urllib.error.URLError, OSError):
        return False


async def one_outage(seconds: float, base: Path) -> dict[str, object]:
    server = RedisServer(base / f"redis-{seconds:g}", appendonly=True,
                         extra_args=["--appendfsync", "always"]).start()
    procs, urls, ports = [], [], []
    for i in range(2):
        proc, http_port, remoting_port = start_worker(
            server.url, base / f"w{i}-{seconds:g}.log", NSFLEET_NAMESPACE="bench-outage",
            NSFLEET_SWEEP_INTERVAL="1")
        procs.append(proc)
        urls.append(f"http://127.0.0.1:{http_port}")
        ports.append(remoting_port)
    try:
        load = OutageLoad(urls, ports, brokers=8)
        async with aiohttp.ClientSession() as session:
            await load.register_all(session)
        running = asyncio.create_task(load.run())
        await asyncio.sleep(2.0)
        load.phase = "outage"
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(server.process.wait, 10)
        await asyncio.sleep(seconds)
        await asyncio.to_thread(server.start)
        back = time.monotonic()
        load.phase = "after"
        pending = set(urls)
        while pending and time.monotonic() - back < 30:
            pending = {u for u in pending if not await asyncio.to_thread(_current, u)}
            await asyncio.sleep(0.01)
        coherent_after = time.monotonic() - back
        await asyncio.sleep(5.0)
        load.stop()
        await running
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        server.stop()
    during = [r for r in load.reads if r.phase == "outage"]
    return {
        "outage_s": seconds,
        "reads_during": len(during),
        "served_during": round(served_fraction(load.reads, "outage"), 5),
        "marked_stale_during_http": round(
            sum(r.stale for r in during if r.protocol == "http")
            / max(1, sum(r.protocol == "http" for r in during)), 4),
        "served_after": round(served_fraction(load.reads, "after"), 5),
        "missing_brokers_after": len(missing_brokers(load.reads, "after")),
        "coherent_after_return_s": round(coherent_after, 3),
        "registrations_refused_during": sum(s != 200 for s in
                                            load.registrations.get("outage", [])),
    }


async def _register_latency(url: str, broker: int, start: int, n: int) -> list[float]:
    out = []
    async with aiohttp.ClientSession() as session:
        for k in range(start, start + n):
            body = {"clusterName": "c1", "brokerAddr": f"10.0.9.{broker}:10911",
                    "brokerName": f"w{broker}", "brokerId": 0,
                    "dataVersion": {"counter": k, "timestamp": k},
                    "topicConfigTable": {f"W{broker}": {"readQueueNums": k % 16 + 1},
                                         "Shared": {}}}
            t = time.perf_counter()
            async with session.post(f"{url}/v1/brokers/register", json=body) as resp:
                assert resp.status == 200, await resp.text()
            out.append((time.perf_counter() - t) * 1000)
    return out


async def _replica_online(url: str, within_s: float = 30.0) -> None:
    """Wait until the master lists its replica online: until the first sync is done, WAIT
    counts no replica and every acknowledged write is refused."""
    client = aioredis.from_url(url)
    try:
        deadline = time.monotonic() + within_s
        while (await client.info("replication")).get("slave0", {}).get("state") != "online":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica of {url} never came online")
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()


async def replica_acks(rounds: int, per_round: int, base: Path) -> dict[str, object]:
    master = RedisServer(base / "master").start()
    replica = RedisServer(base / "replica",
                          extra_args=["--replicaof", "127.0.0.1", str(master.port)]).start()
    await _replica_online(master.url)
    plain, pp, _ = start_worker(master.url, base / "plain.log", NSFLEET_NAMESPACE="acks")
    acked, ap, _ = start_worker(master.url, base / "acked.log", NSFLEET_NAMESPACE="acks",
                                NSFLEET_MIN_REPLICA_ACKS="1")
    try:
        samples: dict[str, list[float]] = {"without": [], "with_acks_1": []}
        medians: dict[str, list[float]] = {"without": [], "with_acks_1": []}
        for r in range(rounds):
            for name, port, broker in (("without", pp, 1), ("with_acks_1", ap, 2)):
                got = await _register_latency(f"http://127.0.0.1:{port}", broker,
                                              2 + r * per_round, per_round)
                samples[name] += got
                medians[name].append(statistics.median(got))
    finally:
        for proc in (plain, acked):
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        replica.stop()
        master.stop()
    p50 = {k: statistics.median(v) for k, v in medians.items()}
    return {"registration_ms": {k: summary(v) for k, v in samples.items()},
            "p50_ratio_with_over_without": round(p50["with_acks_1"] / p50["without"], 3),
            "note": "changed registrations over HTTP, one at a time, replica on loopback"}


async def main(args: argparse.Namespace) -> None:
    results = new_results(args)
    outages = [float(s) for s in args.outages.split(",")] if not args.quick else [5.0]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        results["outages"] = [await one_outage(s, base) for s in outages]
        results["replica_acks"] = await replica_acks(args.acks_rounds, 50, base)
    write_results("outage", results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outages", default="5,30,150")
    parser.add_argument("--acks-rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args()))
