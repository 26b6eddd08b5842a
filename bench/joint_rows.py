"""Redis's cost of a first registration's row, written one group a call (register_topics.lua)
against several groups' chunks a call (register_topics_joint.lua, store/joint_chunks.py): what
writing a topic's rows of several groups with one HSET saves (docs/table-shape.md, the tenth
pass).

``--groups`` groups are registered with a two-topic table each (their registration records are
what the chunks are fenced on), then each group's ``--topics`` topics are written as fresh forced
chunks of 250 rows, the same topics in the same order for every group (a cluster's brokers): with
``--joint 1`` one chunk a call, with ``k`` the same chunk of k groups a call. Redis's CPU and its
script time are read around the writes, on a throwaway redis-server emptied between runs. Rounds
alternate the values of ``--joint``; medians are kept. Writes bench/results/joint_rows.json.

    .venv/bin/python bench/joint_rows.py [--groups 300] [--topics 10000] [--joint 1 2 4 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore, scripts
from nsfleet.store.script_calls import CHUNK_ROWS, table_chunks


async def redis_cpu_s(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def script_s(client: aioredis.Redis) -> float:
    stats = await client.info("commandstats")
    usec = sum(v["usec"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
    return usec / 1e6


async def one_run(client: aioredis.Redis, groups: int, topics: int, joint: int) -> dict[str, float]:
    await client.flushall()
    store = RouteStore(client, "joint")
    await store.load_scripts()
    # Two topics: one alone is refused (the single-topic guard).
    two = [TopicConfig("Z0"), TopicConfig("Z1")]
    regs = [BrokerRegistration("bench", f"10.1.{g // 250}.{g % 250}:10911", f"g{g}", 0,
                               data_version=DataVersion(1, 1), topic_configs=two)
            for g in range(groups)]
    generations = []
    for reg in regs:
        generations.append(str((await store.register_broker(reg)).generation))
    rows = groups * topics
    chunks = table_chunks([TopicConfig(f"Topic{t:06d}", 8, 8, 6, 0) for t in range(topics)],
                          CHUNK_ROWS)
    calls = 0
    cpu0, script0 = await redis_cpu_s(client), await script_s(client)
    for g0 in range(0, groups, joint):
        members = list(range(g0, min(g0 + joint, groups)))
        for text in chunks:
            if len(members) == 1:
                g = members[0]
                await store.calls.call("register_topics", scripts.RegisterTopicsArgs(
                    "bench", regs[g].addr, regs[g].name, generations[g], "1", "0", text, "[]",
                    "[]", "1", ""))
            else:
                await store.calls.call("register_topics_joint", scripts.RegisterTopicsJointArgs(
                    [v for g in members for v in ("bench", regs[g].addr, regs[g].name,
                                                  generations[g], "0", text)]))
            calls += 1
    cpu, script = await redis_cpu_s(client) - cpu0, await script_s(client) - script0
    return {"redis_cpu_us_a_row": round(1e6 * cpu / rows, 3),
            "script_us_a_row": round(1e6 * script / rows, 3), "calls": calls,
            "script_ms_a_call": round(1000 * script / calls, 3)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--joint", type=int, nargs="+", default=[1, 2, 4, 8],
                        help="groups a call (1: register_topics.lua)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.groups < 1 or args.topics < 1 or args.rounds < 1 or min(args.joint) < 1:
        parser.error("--groups, --topics, --rounds and every --joint must be at least 1")
    runs: dict[int, list[dict[str, float]]] = {k: [] for k in args.joint}
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp), appendonly=False) as server:
        client = aioredis.Redis(host=server.host, port=server.port, decode_responses=True)
        try:
            for _ in range(args.rounds):
                for k in args.joint:
                    runs[k].append(await one_run(client, args.groups, args.topics, k))
                    print(k, runs[k][-1], flush=True)
        finally:
            await client.aclose()
    medians: dict[str, Any] = {
        str(k): {f: round(statistics.median(r[f] for r in rs), 3) for f in rs[0]}
        for k, rs in runs.items()}
    results = new_results(args)
    results["by_groups_a_call"] = medians
    if 1 in runs:
        one = medians["1"]["redis_cpu_us_a_row"]
        results["redis_cpu_over_one_group_a_call"] = {
            k: round(m["redis_cpu_us_a_row"] / one, 2) for k, m in medians.items()}
    write_results("joint_rows", results)


if __name__ == "__main__":
    asyncio.run(main())
