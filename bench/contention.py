"""Route reads while brokers re-register: the Java NameServer's own JMH workload
(GetRouteInfoBenchmark / RegisterBrokerBenchmark in apache/rocketmq namesrv) against a fleet.

Layout as in those benchmarks: --clusters clusters x --brokers brokers, each cluster's brokers
all serving that cluster's --topics topics (32-letter random names + index), so 40,000 topics
of 8 groups each by default. Registered once over HTTP, every broker with the same table and
DataVersion its writer later sends.

Phases, each --seconds long, alternated --rounds times, for each of --read-rates (readers as
fast as they can, as JMH measures throughput; then paced at a fixed offered load, which shows
how writers delay reads rather than how they share the CPU), with the route cache off and then
on (the workers restarted in between, Redis kept; one unmeasured baseline phase first warms the
workers and their caches as far as the readers reach: a cached route lives 60 s at most, so
with 40,000 random topics many reads stay misses, as in a real fleet of that shape):

* baseline: readers only;
* unchanged: readers, and every broker re-registering its unchanged table (the same
  DataVersion: what a real broker sends every 30 s);
* changed: the same with DataVersion.nextVersion() on every registration, as the JMH writers do.

Readers: one wrk process (C, outside the workers) per worker, --connections in all, each request
a random topic over `GET /v1/routes/{topic}`. Writers: one separate process; each broker is a
loop that sleeps random(0, --period) s and registers over HTTP with every worker at once (a broker
registers with every NameServer): every 5 s on average by default, 6x a real broker's 30 s (Java's
benchmark sleeps random(0, 0.1) s; at 10k topics a Python worker cannot parse that many bodies,
so that rate measures an overloaded worker, not contention: see registration_ms).
Figures per phase: read throughput, p50, p99 (the worse of the workers), registrations/s, the
workers' and Redis's CPU share, how busy the whole machine was (others' processes included: near
1.0 means the figures are starved, not contended), and the Redis script time (share of the
phase, longest single script); medians over rounds, then the degradation (writers vs baseline;
the done-when is <= 2x). Also, once: an unchanged registration's wall time and worker CPU on an
otherwise idle worker (unchanged_registration_over_http), and a new DataVersion's with the same
table (changed_registration_over_http).

    .venv/bin/python bench/contention.py [--quick] [--seconds 10] [--rounds 2] [--read-rates 0,600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import string
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import redis.asyncio as aioredis
from benchlib import ScriptClock, new_results, start_worker, summary, write_results

from nsfleet.redis_server import RedisServer

PHASES = ("baseline", "unchanged", "changed")

# wrk reader: a random topic per request; done() prints the figures as one JSON line.
WRK_SCRIPT = """
local topics = {}
function init(args)
  for line in io.lines(args[1]) do topics[#topics + 1] = "/v1/routes/" .. line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end
function request()
  return wrk.format("GET", topics[math.random(#topics)])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,' ..
    '"p50_us":%d,"p99_us":%d,"max_us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def reader_script(rate: int, connections: int, workers: int) -> str:
    """The wrk script; with ``rate`` > 0 every connection pauses between requests so that all
    of them together offer about ``rate`` reads/s (wrk's delay(), as think time)."""
    if not rate:
        return WRK_SCRIPT
    pause_ms = max(1, round(max(1, connections // workers) * workers * 1000 / rate))
    return WRK_SCRIPT + f"function delay() return {pause_ms} end\n"


def topic_names(clusters: int, per_cluster: int) -> list[str]:
    rng = random.Random(14)
    return ["".join(rng.choices(string.ascii_letters, k=32)) + str(i)
            for i in range(clusters * per_cluster)]


def brokers(clusters: int, per_cluster: int) -> list[dict[str, Any]]:
    return [{"clusterName": f"Default-Cluster-{c}", "brokerName": f"Default-Broker-{c}-{b}",
             "brokerAddr": f"127.0.{c}.{b + 1}:10911", "brokerId": 0,
             "heartbeatTimeoutMillis": 3_600_000, "cluster_index": c}
            for c in range(clusters) for b in range(per_cluster)]


def body_template(broker: dict[str, Any], topics: list[str]) -> tuple[bytes, bytes]:
    """A registration body split around its DataVersion: prefix + dv JSON + suffix."""
    ident = {k: v for k, v in broker.items() if k != "cluster_index"}
    table = {t: {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}
             for t in topics}
    rest = json.dumps({**ident, "topicConfigTable": table}, separators=(",", ":"))
    return b'{"dataVersion":', b"," + rest[1:].encode()


def dv_json(counter: int) -> bytes:
    return b'{"counter":%d,"timestamp":%d,"stateVersion":0}' % (counter, counter)


def run_writers(urls: list[str], clusters: int, per_cluster: int, topics_per_cluster: int,
                counters: list[int], changed: bool, period: float, seconds: float,
                out: Any) -> None:
    """The writer process: every broker re-registers until ``seconds`` pass; puts
    (registrations, failures, final counters, registration latency in ms) on ``out``."""
    names = topic_names(clusters, topics_per_cluster)
    templates = [body_template(b, names[b["cluster_index"] * topics_per_cluster:
                                        (b["cluster_index"] + 1) * topics_per_cluster])
                 for b in brokers(clusters, per_cluster)]
    counters = list(counters)
    done = [0, 0]
    latencies: list[float] = []

    async def broker_loop(session: aiohttp.ClientSession, i: int, deadline: float) -> None:
        rng = random.Random(i)
        while True:
            await asyncio.sleep(rng.uniform(0, period))
            if time.monotonic() >= deadline:
                return
            if changed:
                counters[i] += 1
            head, tail = templates[i]
            body = head + dv_json(counters[i]) + tail

            async def post(url: str, body: bytes = body) -> None:
                started = time.perf_counter()
                async with session.post(f"{url}/v1/brokers/register", data=body,
                                        headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    done[0 if resp.status == 200 else 1] += 1
                latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.gather(*(post(u) for u in urls))

    async def main() -> None:
        deadline = time.monotonic() + seconds
        timeout = aiohttp.ClientTimeout(total=seconds + 30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await asyncio.gather(*(broker_loop(session, i, deadline)
                                   for i in range(len(templates))))

    asyncio.run(main())
    out.put((done[0], done[1], counters, summary(latencies) if latencies else {}))


def run_wrk(port: int, topics_file: Path, script: Path, seconds: float,
            connections: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", str(script),
         f"http://127.0.0.1:{port}", "--", str(topics_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_result(proc: subprocess.Popen[str]) -> dict[str, float]:
    output, _ = proc.communicate(timeout=120)
    line = next((ln for ln in output.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{output[-2000:]}")
    return json.loads(line[len("RESULT "):])


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


async def redis_cpu(client: aioredis.Redis) -> float:
    """CPU seconds the Redis server has used (its main thread and the rest)."""
    cpu = await client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def phase(name: str, workers: list[tuple[int, int]], args: argparse.Namespace, tmp: Path,
                script: Path, clock: ScriptClock, counters: list[int]) -> dict[str, Any]:
    """One phase: readers for ``args.seconds``, with the writers unless ``name`` is baseline.
    ``workers``: (pid, HTTP port) of each worker."""
    ports = [port for _, port in workers]
    """One phase: readers for ``args.seconds``, with the writers unless ``name`` is baseline."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    writer = None
    if name != "baseline":
        writer = ctx.Process(target=run_writers, args=(
            [f"http://127.0.0.1:{p}" for p in ports], args.clusters, args.brokers, args.topics,
            counters, name == "changed", args.period, args.seconds + 1.0, queue))
        writer.start()
        await asyncio.sleep(1.0)  # writers under way before the readers start
    await clock.reset()
    cpu_before = cpu_seconds([pid for pid, _ in workers])
    redis_cpu_before = await redis_cpu(clock.client)
    psutil.cpu_percent()  # starts the machine-wide busy measurement
    per_worker = max(1, args.connections // len(ports))
    readers = [run_wrk(p, tmp / "topics.txt", script, args.seconds, per_worker)
               for p in ports]
    reads = [await asyncio.to_thread(wrk_result, r) for r in readers]
    worker_cpu = cpu_seconds([pid for pid, _ in workers]) - cpu_before
    machine_busy = psutil.cpu_percent() / 100
    redis_cpu_used = await redis_cpu(clock.client) - redis_cpu_before
    redis = await clock.read()
    row: dict[str, Any] = {
        "reads_per_s": round(sum(r["requests"] / (r["duration_us"] / 1e6) for r in reads)),
        "p50_ms": max(r["p50_us"] for r in reads) / 1000,
        "p99_ms": max(r["p99_us"] for r in reads) / 1000,
        "read_errors": sum(r["errors"] + r["non2xx"] for r in reads),
        "redis_script_share": round(redis["script_ms"] / (args.seconds * 1000), 3),
        "longest_script_ms": redis["longest_script_ms"],
        "worker_cpu_share": round(worker_cpu / args.seconds / len(workers), 3),
        "redis_cpu_share": round(redis_cpu_used / args.seconds, 3),
        # every process on the machine, this bench's and others': near 1.0 means starved
        "machine_busy_share": round(machine_busy, 3), "loadavg_1m": os.getloadavg()[0],
        "per_worker": reads}
    if writer is not None:
        ok, failed, final, latency = await asyncio.to_thread(queue.get, True,
                                                             args.seconds + 120)
        writer.join(30)
        counters[:] = final
        row["registrations_per_s"] = round(ok / (args.seconds + 1.0), 1)
        row["registration_failures"] = failed
        row["registration_ms"] = latency
    return row


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per phase, then each writer phase against the baseline."""
    summary = {name: medians(rows[name]) for name in PHASES}
    for name in PHASES[1:]:
        base, load = summary["baseline"], summary[name]
        summary[f"degradation_{name}"] = {
            "p50": round(load["p50_ms"] / base["p50_ms"], 2),
            "p99": round(load["p99_ms"] / base["p99_ms"], 2),
            "throughput": round(base["reads_per_s"] / load["reads_per_s"], 2)}
    return summary


def medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("reads_per_s", "p50_ms", "p99_ms", "redis_script_share", "longest_script_ms",
            "worker_cpu_share", "redis_cpu_share", "machine_busy_share", "registrations_per_s")
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys if k in rows[0]}


async def populate(port: int, args: argparse.Namespace, names: list[str]) -> float:
    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        for b in brokers(args.clusters, args.brokers):
            c = b["cluster_index"]
            head, tail = body_template(b, names[c * args.topics:(c + 1) * args.topics])
            async with session.post(f"http://127.0.0.1:{port}/v1/brokers/register",
                                    data=head + dv_json(10) + tail,
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200, await resp.text()
    return round(time.perf_counter() - started, 1)


async def registration_cost(worker: tuple[int, int], args: argparse.Namespace,
                            names: list[str], counters: list[int]) -> dict[str, Any]:
    """Every broker's registration sent once, one at a time, to an otherwise idle worker, with
    the DataVersion in ``counters`` (unchanged, or new when they were just advanced): its wall
    time and the worker's CPU per registration (what each one costs the worker's event loop,
    which its reads then wait behind)."""
    pid, port = worker
    walls = []
    cpu_before = cpu_seconds([pid])
    async with aiohttp.ClientSession() as session:
        for i, b in enumerate(brokers(args.clusters, args.brokers)):
            c = b["cluster_index"]
            head, tail = body_template(b, names[c * args.topics:(c + 1) * args.topics])
            started = time.perf_counter()
            async with session.post(f"http://127.0.0.1:{port}/v1/brokers/register",
                                    data=head + dv_json(counters[i]) + tail,
                                    headers={"Content-Type": "application/json"}) as resp:
                await resp.read()
            walls.append((time.perf_counter() - started) * 1000)
    cpu = cpu_seconds([pid]) - cpu_before
    return {"topics": args.topics, "wall_ms": summary(walls),
            "worker_cpu_ms_per_registration": round(cpu * 1000 / len(walls), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--brokers", type=int, default=8, help="brokers per cluster")
    parser.add_argument("--topics", type=int, default=10_000, help="topics per cluster")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32, help="reader connections")
    parser.add_argument("--period", type=float, default=10.0,
                        help="a broker sleeps random(0, period) s between registrations")
    parser.add_argument("--seconds", type=int, default=10, help="per phase")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--read-rates", default="0,600",
                        help="reads/s the readers offer in all, one set of phases each; 0: as "
                             "fast as they can (JMH's throughput), >0: paced (latency at a "
                             "fixed load)")
    parser.add_argument("--quick", action="store_true",
                        help="2,000 topics per cluster, 3 s phases, one round")
    args = parser.parse_args()
    if args.quick:
        args.topics, args.seconds, args.rounds = 2_000, 3, 1
    results = new_results(args)
    names = topic_names(args.clusters, args.topics)
    counters = [10] * (args.clusters * args.brokers)
    with tempfile.TemporaryDirectory() as tmpdir, \
            RedisServer(data_dir=Path(tmpdir) / "redis", appendonly=False) as server:
        tmp = Path(tmpdir)
        (tmp / "topics.txt").write_text("\n".join(names) + "\n")
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        clock = ScriptClock(client)
        for cache in (False, True):
            key = "cache_on" if cache else "cache_off"
            procs = [start_worker(server.url, tmp / f"w{w}.log", NSFLEET_NAMESPACE="bench",
                                  NSFLEET_ROUTE_CACHE=str(cache).lower())
                     for w in range(args.workers)]
            try:
                workers = [(proc.pid, http) for proc, http, _ in procs]
                if not cache:
                    results["populate_s"] = await populate(workers[0][1], args, names)
                    results["unchanged_registration_over_http"] = await registration_cost(
                        workers[0], args, names, counters)
                    counters[:] = [c + 1 for c in counters]
                    results["changed_registration_over_http"] = await registration_cost(
                        workers[0], args, names, counters)
                for rate in (int(r) for r in args.read_rates.split(",")):
                    script = tmp / f"reader-{rate}.lua"
                    script.write_text(reader_script(rate, args.connections, len(workers)))
                    await phase("baseline", workers, args, tmp, script, clock, counters)
                    rows: dict[str, list[dict[str, Any]]] = {p: [] for p in PHASES}
                    for _ in range(args.rounds):
                        for name in PHASES:
                            rows[name].append(await phase(name, workers, args, tmp, script,
                                                          clock, counters))
                    results[key + ("_paced" if rate else "")] = {
                        "read_rate": rate or "saturating", "summary": summarize(rows),
                        "rounds": rows}
            finally:
                for proc, _, _ in procs:
                    proc.terminate()
                    proc.wait(20)
        await client.aclose()
    results["degradation_target"] = 2.0
    write_results("contention", results)


if __name__ == "__main__":
    asyncio.run(main())
