"""What one broker's first registration costs in CPU, nsfleet against the Java NameServer: the
floor under a registration storm on this machine (issue 42, docs/table-shape.md, the ninth pass).

A storm's wall time on two shared cores moves ±15 % from run to run (bench/scale.py); the CPU
each table costs when the tables come one after another does not, and it bounds the storm: no
schedule on C cores finishes B tables in less than B x (CPU a table) / C. So each side registers
``--brokers`` tables of their own (the same topics, queue counts of each broker's own, as
``bench/scale.py --distinct-tables``), one at a time over remoting, and the CPU of every process
is read per band of brokers (the topic hashes' size grows with the groups: a listpack up to 128,
a hash table past them):

* nsfleet: a throwaway redis-server and two `nsfleet serve` workers, the brokers alternating
  between them: Redis's CPU and script time, the workers' CPU (both: each follows every change);
* java: the Java NameServer 4.9.8 on a fresh JVM, the same frames: its CPU (every thread).

Rounds alternate the two sides (``--rounds``); medians are kept. The figures: CPU a table and a
row on each side, the ratio, and each side's two-core bound (CPU / 2) beside its sequential wall
time. Java's registrations take its RouteInfoManager's write lock one at a time, so its storm is
about as long as its sequential run (bench/scale.py: 6.5-8.5 s at 300 x 10k); nsfleet's spreads
over both cores, and is bound by its CPU over two. Writes bench/results/table_cost.json.

    .venv/bin/python bench/table_cost.py [--brokers 300] [--topics 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from typing import Any

from benchlib import new_results, write_results
from scale import (
    Conn,
    cpu_seconds,
    fleet,
    java_namesrv,
    register_frame,
    script_usec,
    whole_tables,
)

# Bands of brokers, as fractions of --brokers: at 300 the first is the topic hashes' listpacks
# up to 60 groups, the second up to 150 (past 128 they become hash tables), the third the rest.
BANDS = (0.0, 0.2, 0.5, 1.0)


def bands(brokers: int) -> list[tuple[int, int]]:
    marks = sorted({round(f * brokers) for f in BANDS})
    return list(itertools.pairwise(marks))


def per_table(cpu: dict[str, float], wall: float, tables: int, topics: int) -> dict[str, Any]:
    total = sum(cpu.values())
    return {"tables": tables, "wall_s": round(wall, 2),
            **{f"{name}_cpu_s": round(s, 2) for name, s in cpu.items()},
            "cpu_ms_a_table": round(1000 * total / tables, 1),
            "cpu_us_a_row": round(1e6 * total / (tables * topics), 2)}


async def nsfleet_side(wholes: list[bytes], topics: int) -> dict[str, Any]:
    async with fleet() as f:
        pids = {"redis": await f.redis_pid(),
                **{f"worker{i + 1}": proc.pid for i, (proc, _, _) in enumerate(f.workers)}}
        conns = [await Conn.open(f.ports[b % len(f.ports)]) for b in range(len(wholes))]
        out: dict[str, Any] = {}
        try:
            for lo, hi in bands(len(wholes)):
                before = {name: cpu_seconds(pid) for name, pid in pids.items()}
                script_before = await script_usec(f.client)
                started = time.perf_counter()
                for b in range(lo, hi):
                    await conns[b].call(register_frame(b, wholes[b], 1))
                wall = time.perf_counter() - started
                cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
                script_s = (await script_usec(f.client) - script_before) / 1e6
                band = per_table(cpu, wall, hi - lo, topics)
                band["redis_us_a_row"] = round(1e6 * cpu["redis"] / ((hi - lo) * topics), 2)
                band["script_us_a_row"] = round(1e6 * script_s / ((hi - lo) * topics), 2)
                band["workers_ms_a_table"] = round(
                    1000 * (cpu["worker1"] + cpu["worker2"]) / (hi - lo), 1)
                out[f"groups_{lo + 1}_{hi}"] = band
        finally:
            for conn in conns:
                conn.close()
    return out


async def java_side(args: argparse.Namespace, wholes: list[bytes]) -> dict[str, Any]:
    async with java_namesrv(args) as (port, pid):
        conns = [await Conn.open(port) for _ in wholes]
        out: dict[str, Any] = {}
        try:
            for lo, hi in bands(len(wholes)):
                before = cpu_seconds(pid)
                started = time.perf_counter()
                for b in range(lo, hi):
                    await conns[b].call(register_frame(b, wholes[b], 1))
                wall = time.perf_counter() - started
                out[f"groups_{lo + 1}_{hi}"] = per_table(
                    {"java": cpu_seconds(pid) - before}, wall, hi - lo, args.topics)
        finally:
            for conn in conns:
                conn.close()
    return out


def whole_run(side: dict[str, Any]) -> dict[str, float]:
    """A side's bands added up: wall time and CPU (every process)."""
    wall = sum(band["wall_s"] for band in side.values())
    cpu = sum(v for band in side.values() for k, v in band.items() if k.endswith("_cpu_s"))
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each band's figures, the median over the rounds."""
    return {band: {k: round(statistics.median(r[band][k] for r in runs), 2)
                   for k in runs[0][band]} for band in runs[0]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two sides")
    parser.add_argument("--java-heap", default="2g")
    args = parser.parse_args()
    if args.brokers < 2 or args.topics < 1 or args.rounds < 1:
        parser.error("--brokers must be at least 2, --topics and --rounds at least 1")
    args.distinct_tables = True
    wholes = whole_tables(args)
    ours: list[dict[str, Any]] = []
    java: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        ours.append(await nsfleet_side(wholes, args.topics))
        java.append(await java_side(args, wholes))
    ours_m, java_m = medians(ours), medians(java)
    ours_all = [whole_run(r) for r in ours]
    java_all = [whole_run(r) for r in java]
    ours_cpu = statistics.median(r["cpu_s"] for r in ours_all)
    java_cpu = statistics.median(r["cpu_s"] for r in java_all)
    java_wall = statistics.median(r["wall_s"] for r in java_all)
    results = new_results(args)
    results.update({
        "nsfleet": {"bands": ours_m, "runs": ours_all},
        "java": {"bands": java_m, "runs": java_all},
        "cpu_nsfleet_over_java": round(ours_cpu / java_cpu, 2),
        # The shortest storm each side's CPU allows on two cores, beside Java's sequential wall
        # time (its registrations take one lock in turn: its storm is about as long).
        "two_core_bound_s": {"nsfleet": round(ours_cpu / 2, 2), "java": round(java_cpu / 2, 2)},
        "java_sequential_wall_s": java_wall,
        "nsfleet_bound_over_java_sequential_wall": round(ours_cpu / 2 / java_wall, 2),
    })
    write_results("table_cost", results)


if __name__ == "__main__":
    asyncio.run(main())
