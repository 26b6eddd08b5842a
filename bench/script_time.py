"""Bounded script time: the longest single script call, and the worst stall another Redis client
sees meanwhile, for every write whose work grows with the topic or broker count.

At each size (topics of one broker group; for delete_topic, groups serving the topic) it runs,
through RouteStore: first registration, unchanged re-registration, changed registration (a new
DataVersion and new queue numbers), delete_absent (deleteTopicWithBrokerRegistration with half
the table), unregister cascade, expiry cascade (sweep) and delete_topic. For each it reports the
wall time, the number of script calls and their total Redis time (INFO commandstats), the longest
single call (SLOWLOG; calls under 0.2 ms are not logged, so the pinger's PINGs do not crowd the
log), and the longest PING round trip of a client in another process PINGing in a loop
meanwhile, next to its median. On a loaded machine that stall includes the pinger's own
scheduling delays: compare it with the same figure for the unchanged (O(1)) registration.
For the first registration it also reports a ceiling measured in the same run: the same rows
written in layout 2's shape by bare pipelined commands (no script: HSET + SADD a row, a list
HSET a chunk), as a ratio.

Starts its own throwaway redis-server; every step is bounded by the sizes. Writes
bench/results/script_time.json.

    .venv/bin/python bench/script_time.py [--sizes 1000,10000,60000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from benchlib import new_results, write_results
from msgspec import structs

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore


def pinger(port: int, stop: Any, out: Connection) -> None:
    """PING over a raw socket until ``stop`` is set; send back every round trip in ms."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        sock.sendall(b"PING\r\n")
        sock.recv(64)
        times.append((time.perf_counter() - started) * 1000)
    sock.close()
    out.send(times)


async def script_stats(client: aioredis.Redis) -> tuple[int, int]:
    """(calls, usec) of EVALSHA since the last CONFIG RESETSTAT."""
    stats = (await client.info("commandstats")).get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


async def measure(client: aioredis.Redis, port: int,
                  op: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    await client.config_set("slowlog-log-slower-than", 200)
    await client.config_set("slowlog-max-len", 100_000)
    await client.slowlog_reset()
    await client.config_resetstat()
    stop = multiprocessing.Event()
    recv, send = multiprocessing.Pipe(duplex=False)
    proc = multiprocessing.Process(target=pinger, args=(port, stop, send))
    proc.start()
    await asyncio.sleep(0.2)  # the pinger is connected and looping
    started = time.perf_counter()
    await op()
    wall = (time.perf_counter() - started) * 1000
    await asyncio.sleep(0.05)
    stop.set()
    pings: list[float] = recv.recv()
    proc.join()
    calls, usec = await script_stats(client)
    log = await client.slowlog_get(100_000)
    scripts = [e["duration"] for e in log if bytes(e["command"]).upper().startswith(b"EVAL")]
    await client.config_set("slowlog-log-slower-than", 10_000)
    return {"wall_ms": round(wall, 1), "script_calls": calls,
            "longest_script_ms": round(max(scripts, default=0) / 1000, 2),
            "script_ms_total": round(usec / 1000, 1),
            "ping_ms_max": round(max(pings), 2), "ping_ms_p50": round(statistics.median(pings), 3)}


async def populate_topic_over_groups(client: aioredis.Redis, store: RouteStore, topic: str,
                                     groups: int) -> None:
    """``groups`` small groups each serving ``topic``, written straight in the key schema of
    layout 2, the store's (registering them one by one would take minutes at 60k): one master
    each, its queue row in the topic's hash and the topic as its one list."""
    k = store.keys
    if await client.get(k.layout) != "2":
        raise RuntimeError("the store is not in layout 2 (docs/table-shape.md)")
    pipe = client.pipeline(transaction=False)
    for i in range(groups):
        name = f"dt-{i}"
        pipe.hset(k.group(name), mapping={"cluster": "dt", "brokerName": name,
                                          "enableActingMaster": "false", "zoneName": ""})
        pipe.hset(k.members(name), "0", f"10.9.{i // 250}.{i % 250}:1")
        pipe.sadd(k.cluster("dt"), name)
        pipe.hset(k.topic_routes(topic), name, "8\t8\t6\t0")
        pipe.hset(k.group_topics(name), mapping={"#": 1, "1": topic})
        if len(pipe) > 5000:
            await pipe.execute()
    pipe.sadd(k.topics, topic)
    pipe.sadd(k.clusters, "dt")
    await pipe.execute()


async def bare_writes_ms(client: aioredis.Redis, size: int, chunk_rows: int) -> float:
    """Redis time of the rows of a first registration written by bare pipelined commands in
    layout 2's shape: a field of the topic's hash and the topic list's entry per row, a list of
    the group's topics per chunk."""
    await client.config_resetstat()
    for start in range(0, size, 5000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + 5000, size)):
            t = f"bare-{size}-{i}"
            pipe.hset(f"bare:topic:{t}", "g", "8\t8\t6\t0")
            pipe.sadd("bare:idx:topics", t)
        for first in range(start, min(start + 5000, size), chunk_rows):
            last = min(first + chunk_rows, start + 5000, size)
            pipe.hset("bare:idx:group-topics:g", str(first),
                      "\n".join(f"bare-{size}-{i}" for i in range(first, last)))
        await pipe.execute()
    stats = await client.info("commandstats")
    usec = sum(int(v["usec"]) for k, v in stats.items() if k != "cmdstat_info")
    return usec / 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,60000")
    parser.add_argument("--quick", action="store_true", help="sizes 1000,10000 only")
    args = parser.parse_args()
    if args.quick:
        args.sizes = "1000,10000"
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        results["chunk_rows"] = store.chunk_rows
        for size in (int(s) for s in args.sizes.split(",")):
            topics = [TopicConfig(f"T{size}-{i}", 8, 8, 6) for i in range(size)]
            reg = BrokerRegistration("bench", "10.2.0.1:10911", f"big-{size}", 0,
                                     data_version=DataVersion(1, 1), topic_configs=topics)
            changed = replace(reg, data_version=DataVersion(2, 2),
                              topic_configs=[structs.replace(t, read_queue_nums=4) for t in topics])
            half = replace(reg, data_version=DataVersion(3, 3), topic_configs=topics[: size // 2])
            row: dict[str, Any] = {}
            row["first_registration"] = await measure(client, port,
                                                      lambda r=reg: store.register_broker(r))
            bare = await bare_writes_ms(client, size, store.chunk_rows)
            row["first_registration"]["bare_pipelined_writes_ms"] = round(bare, 1)
            row["first_registration"]["script_ms_over_bare"] = round(
                row["first_registration"]["script_ms_total"] / bare, 2)
            row["unchanged_registration"] = await measure(client, port,
                                                          lambda r=reg: store.register_broker(r))
            row["changed_registration"] = await measure(
                client, port, lambda r=changed: store.register_broker(r))
            row["delete_absent"] = await measure(
                client, port, lambda r=half: store.register_broker(r, delete_absent_topics=True))
            row["unregister_cascade"] = await measure(
                client, port, lambda r=reg: store.unregister_broker(r.cluster, r.addr, r.name))
            await store.register_broker(replace(reg, heartbeat_timeout_millis=1))
            await asyncio.sleep(0.01)
            row["expiry_cascade"] = await measure(client, port, store.sweep)
            shared = f"shared-{size}"
            await populate_topic_over_groups(client, store, shared, size)
            row["delete_topic_over_groups"] = await measure(
                client, port, lambda t=shared: store.delete_topic(t))
            await client.flushall()
            # An empty store has no layout: decided again, or the scripts of the next size would
            # find none and run in layout 1 (as this bench did before the eighth pass).
            await store.load_scripts()
            results[str(size)] = row
            print(size, row, flush=True)
        await client.aclose()
    write_results("script_time", results)


if __name__ == "__main__":
    asyncio.run(main())
