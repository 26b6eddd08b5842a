"""nsfleet against the real Apache RocketMQ 4.9.8 Java NameServer, same machine, same load
generators, in one run (issue 30).

Both name servers get the same registrations, sent as a 4.9.8 broker sends them
(REGISTER_BROKER with a JSON RegisterBrokerBody, tests/support/remoting_client.py), and then:

- cached route reads: GET_ROUTEINFO_BY_TOPIC of a topic served by --groups broker groups, loaded by
  bench/remoting_load.c (C, one thread, epoll, pipelined; compiled here with gcc) for --seconds;
  throughput, p50/p99, the server's CPU seconds per 100k reads (nsfleet: the worker plus its
  redis-server; Java: the JVM), RSS after the run, and the generator's own CPU share (1.0 = it
  was the limit, and the figure is a floor);
- a re-registration round: every group re-registers its --topics topics at once, unchanged
  (same DataVersion, the steady state every 30 s) and with a new DataVersion;
- a registration storm: --storm-brokers brokers of --storm-topics topics each (the same topic
  names, as a cluster's brokers share topics) register for the first time at once over their
  own connections; wall time until every one is answered, and per-call p50/p99.

Rounds alternate which name server goes first; figures are medians of --rounds rounds, and each
ratio is nsfleet / Java. One nsfleet worker (one process) against one JVM: the JVM may use every
core, the worker one; a fleet adds workers. Starts its own redis-server, worker and Java
NameServer on loopback (needs shared/java-rocketmq, Java 17 and gcc). Writes
bench/results/java_side_by_side.json.

    .venv/bin/python bench/java_side_by_side.py [--rounds 5] [--seconds 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

import psutil
from benchlib import new_results, start_worker, write_results

from nsfleet.redis_server import RedisServer
from tests.support import java_rocketmq
from tests.support.remoting_client import Broker, Command, RemotingClient, TopicConf

HERE = Path(__file__).parent
TOPIC = "BenchRoute"


@dataclass
class Side:
    name: str
    port: int
    procs: list[psutil.Process]  # whose CPU and RSS count

    def cpu(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.procs)

    def rss_mib(self) -> float:
        return round(sum(p.memory_info().rss for p in self.procs) / 2**20, 1)


def groups(count: int, topics: int) -> list[Broker]:
    names = [TOPIC, *(f"BenchT{i:05d}" for i in range(topics - 1))]
    conf = [TopicConf(t, 8, 8) for t in names]
    return [Broker("BenchCluster", f"10.1.{i // 200}.{i % 200}:10911", f"bench-{i:03d}", 0,
                   topics=conf) for i in range(count)]


async def register_all(port: int, brokers: list[Broker]) -> list[RemotingClient]:
    """Each broker registers over a connection of its own, kept open (closing it would
    unregister the broker on both name servers)."""
    clients = []
    for b in brokers:
        c = await RemotingClient.connect(port)
        resp = await c.call(b.register_49())
        assert resp.code == 0, resp.remark
        clients.append(c)
    return clients


async def timed_round(clients: list[RemotingClient], cmds: list[Command]) -> dict[str, float]:
    """Every client sends its command at once: wall time until all are answered, per call
    latency."""
    latencies: list[float] = []

    async def one(c: RemotingClient, cmd: Command) -> None:
        t = time.perf_counter()
        resp = await c.call(replace(cmd, opaque=0), wait=120)
        latencies.append(time.perf_counter() - t)
        assert resp.code == 0, resp.remark

    t0 = time.perf_counter()
    await asyncio.gather(*(one(c, cmd) for c, cmd in zip(clients, cmds, strict=True)))
    wall = time.perf_counter() - t0
    latencies.sort()
    return {"wall_ms": round(wall * 1e3, 2),
            "p50_ms": round(latencies[len(latencies) // 2] * 1e3, 2),
            "p99_ms": round(latencies[min(len(latencies) - 1,
                                          int(len(latencies) * 0.99))] * 1e3, 2)}


def route_reads(binary: Path, side: Side, seconds: int, connections: int,
                window: int) -> dict[str, float]:
    before_cpu = side.cpu()
    before_gen = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([str(binary), "127.0.0.1", str(side.port), TOPIC, str(connections),
                          str(window), str(seconds)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after_gen = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = side.cpu() - before_cpu
    gen_cpu = (after_gen.ru_utime - before_gen.ru_utime) + (after_gen.ru_stime
                                                              - before_gen.ru_stime)
    result = json.loads(out.stdout)
    requests = result["requests_per_s"] * seconds
    return {"requests_per_s": result["requests_per_s"], "p50_ms": result["p50_ms"],
            "p99_ms": result["p99_ms"],
            "server_cpu_s_per_100k": round(server_cpu / requests * 1e5, 4),
            "server_cores_busy": round(server_cpu / wall, 2),
            "generator_cpu_share": round(gen_cpu / wall, 2),
            "rss_mib": side.rss_mib()}


def alternate(rounds: int, sides: list[Side],
              measure: Callable[[Side], dict[str, float]]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {s.name: [] for s in sides}
    for r in range(rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            runs[side.name].append(measure(side))
    out: dict[str, Any] = {name: {k: round(statistics.median(run[k] for run in results), 4)
                                  for k in results[0]}
                           for name, results in runs.items()}
    out["rounds"] = runs
    return out


def ratio(figures: dict[str, Any], key: str) -> float:
    return round(figures["nsfleet"][key] / figures["java"][key], 3)


async def reregistration(sides: list[Side], brokers: list[Broker],
                         rounds: int) -> dict[str, Any]:
    clients = {s.name: await register_all(s.port, brokers) for s in sides}
    unchanged = [b.register_49() for b in brokers]
    out: dict[str, Any] = {}
    try:
        for label, counter_step in (("unchanged", 0), ("new_data_version", 1)):
            runs: dict[str, list[dict[str, float]]] = {s.name: [] for s in sides}
            for r in range(rounds):
                for b in brokers:
                    b.counter += counter_step
                cmds = unchanged if counter_step == 0 else [b.register_49() for b in brokers]
                for side in sides if r % 2 == 0 else sides[::-1]:
                    runs[side.name].append(await timed_round(clients[side.name], cmds))
            out[label] = {name: {k: round(statistics.median(x[k] for x in rs), 2)
                                 for k in rs[0]} for name, rs in runs.items()}
            out[label]["ratio_wall"] = round(out[label]["nsfleet"]["wall_ms"]
                                             / out[label]["java"]["wall_ms"], 3)
    finally:
        for cs in clients.values():
            for c in cs:
                await c.close()
    return out


async def storm(sides: list[Side], count: int, topics: int, rounds: int) -> dict[str, Any]:
    conf = [TopicConf(f"StormT{i:05d}", 8, 8) for i in range(topics)]
    runs: dict[str, list[dict[str, float]]] = {s.name: [] for s in sides}
    for r in range(rounds):
        brokers = [Broker("StormCluster", f"10.2.{r}.{i}:10911", f"storm-{r}-{i:03d}", 0,
                          topics=conf) for i in range(count)]
        cmds = [b.register_49() for b in brokers]
        for side in sides if r % 2 == 0 else sides[::-1]:
            clients = [await RemotingClient.connect(side.port) for _ in brokers]
            try:
                runs[side.name].append(await timed_round(clients, cmds))
            finally:
                for c in clients:  # the brokers leave: their connections close
                    await c.close()
            await asyncio.sleep(1.0)  # both unregister on close; let that finish
    out: dict[str, Any] = {name: {k: round(statistics.median(x[k] for x in rs), 2)
                                  for k in rs[0]} for name, rs in runs.items()}
    out["ratio_wall"] = round(out["nsfleet"]["wall_ms"] / out["java"]["wall_ms"], 3)
    out["rounds"] = runs
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--groups", type=int, default=10, help="broker groups serving the route")
    parser.add_argument("--topics", type=int, default=2000, help="topics of each group")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--window", type=int, default=16, help="pipelined requests per connection")
    parser.add_argument("--storm-brokers", type=int, default=20)
    parser.add_argument("--storm-topics", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 s")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 2, 2
    if reason := java_rocketmq.unavailable():
        raise SystemExit(reason)
    if shutil.which("gcc") is None:
        raise SystemExit("needs gcc (Debian: apt-get install gcc)")
    results = new_results(args)
    results["load"] = psutil.getloadavg()
    with tempfile.TemporaryDirectory() as tmp_name, \
            RedisServer(data_dir=Path(tmp_name) / "redis", appendonly=False) as server, \
            java_rocketmq.namesrv(Path(tmp_name) / "java") as java_ns:
        tmp = Path(tmp_name)
        load_bin = tmp / "remoting_load"
        subprocess.run(["gcc", "-O2", "-o", str(load_bin), str(HERE / "remoting_load.c")],
                       check=True)
        worker, _, remoting_port = start_worker(server.url, tmp / "w.log",
                                                NSFLEET_NAMESPACE="java-side-by-side")
        try:
            assert server.process is not None
            redis_proc = psutil.Process(server.process.pid)
            sides = [Side("nsfleet", remoting_port, [psutil.Process(worker.pid), redis_proc]),
                     Side("java", java_ns.port, [psutil.Process(java_ns.pid)])]
            results.update(asyncio.run(run_all(args, sides, load_bin)))
        finally:
            worker.terminate()
            worker.wait(20)
    write_results("java_side_by_side", results)


async def run_all(args: argparse.Namespace, sides: list[Side], load_bin: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    brokers = groups(args.groups, args.topics)
    held = {s.name: await register_all(s.port, brokers) for s in sides}
    try:
        for s in sides:  # the same route bytes' size, a warm-up for both
            route_reads(load_bin, s, 1, args.connections, args.window)
        reads = await asyncio.to_thread(
            alternate, args.rounds, sides,
            lambda s: route_reads(load_bin, s, args.seconds, args.connections, args.window))
        reads["ratio_requests_per_s"] = ratio(reads, "requests_per_s")
        reads["ratio_cpu_per_100k"] = ratio(reads, "server_cpu_s_per_100k")
        reads["ratio_rss"] = ratio(reads, "rss_mib")
        out["route_reads"] = reads
    finally:
        for cs in held.values():
            for c in cs:
                await c.close()
    await asyncio.sleep(1.0)
    out["reregistration"] = await reregistration(sides, groups(args.groups, args.topics),
                                                 args.rounds)
    await asyncio.sleep(1.0)
    out["storm"] = await storm(sides, args.storm_brokers, args.storm_topics,
                               max(3, args.rounds // 2 + 1))
    return out


if __name__ == "__main__":
    main()
