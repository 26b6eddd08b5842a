"""Cached route reads against their ceilings, side by side in one run (issue 14).

HTTP: `GET /v1/routes/{topic}` of one `nsfleet serve` worker (route cache on) against a bare
aiohttp handler returning the same bytes (bench/ceiling_servers.py), both on uvloop, one process
each, loaded by wrk. Remoting: GET_ROUTEINFO_BY_TOPIC (105) against a minimal framed-TCP server
that parses each JSON header and answers the same body with the request's opaque, loaded by
bench/remoting_load.c (compiled here with gcc; pipelined, so the generator is not the limit).
The topic is served by --groups broker groups (50: a ~10 KB route). Rounds alternate which
server goes first; the figures are medians, and the ratio is nsfleet / ceiling.

Starts its own redis-server and processes, bounded by --rounds x --seconds. Writes
bench/results/hotpath.json.

    .venv/bin/python bench/hotpath.py [--rounds 5] [--seconds 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

import redis.asyncio as aioredis
from benchlib import new_results, start_worker, write_results

from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.store import RouteStore
from tests.support.remoting_client import RemotingClient

HERE = Path(__file__).resolve().parent
TOPIC = "HotTopic"
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


async def populate(url: str, groups: int) -> None:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    store = RouteStore(client, "bench")
    await store.load_scripts()
    for i in range(groups):
        await store.register_broker(BrokerRegistration(
            "bench", f"10.4.{i // 200}.{i % 200}:10911", f"hot-broker-{i}", 0,
            heartbeat_timeout_millis=3_600_000, data_version=DataVersion(1, 1),
            topic_configs=[TopicConfig(TOPIC, 8, 8, 6), TopicConfig(f"Own-{i}", 8, 8, 6)]))
    await client.aclose()


async def remoting_body(port: int) -> bytes:
    client = await RemotingClient.connect(port)
    try:
        answer = await client.request(105, {"topic": TOPIC})
        assert answer.code == 0 and answer.body, answer.remark
        return answer.body
    finally:
        await client.close()


def wrk(url: str, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(out)

    def latency(pct: str) -> float:
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert m, out
        return float(m.group(1)) * _UNITS[m.group(2)]
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert rps, out
    return {"requests_per_s": float(rps.group(1)), "p50_ms": latency("50"),
            "p99_ms": latency("99")}


def remoting_load(binary: Path, port: int, seconds: int, connections: int,
                  window: int) -> dict[str, float]:
    out = subprocess.run([str(binary), "127.0.0.1", str(port), TOPIC, str(connections),
                          str(window), str(seconds)], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    return {k: result[k] for k in ("requests_per_s", "p50_ms", "p99_ms")}


def compare(rounds: int, subject: Callable[[], dict[str, float]],
            ceiling: Callable[[], dict[str, float]]) -> dict[str, Any]:
    """Alternate the two loads for ``rounds`` rounds; medians of each figure, and the ratio."""
    runs: dict[str, list[dict[str, float]]] = {"nsfleet": [], "ceiling": []}
    for r in range(rounds):
        order = [("nsfleet", subject), ("ceiling", ceiling)]
        for name, load in order if r % 2 == 0 else order[::-1]:
            runs[name].append(load())
    out: dict[str, Any] = {name: {key: round(statistics.median(run[key] for run in results), 3)
                                  for key in results[0]}
                           for name, results in runs.items()}
    out["ratio"] = round(out["nsfleet"]["requests_per_s"] / out["ceiling"]["requests_per_s"], 3)
    out["ratio_per_round"] = [round(a["requests_per_s"] / b["requests_per_s"], 3)
                              for a, b in zip(runs["nsfleet"], runs["ceiling"], strict=True)]
    return out


def start_ceiling(kind: str, body: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "ceiling_servers.py"), kind, str(port),
                             str(body)], stdout=log.open("ab"), stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/routes/x", timeout=1) \
                    if kind == "http" else _tcp(port):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(log.read_text()[-2000:])


def _tcp(port: int) -> Any:
    import socket
    return socket.create_connection(("127.0.0.1", port), timeout=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--http-connections", type=int, default=32)
    parser.add_argument("--remoting-connections", type=int, default=8)
    parser.add_argument("--window", type=int, default=16, help="pipelined requests per connection")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 s")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 2, 2
    if shutil.which("wrk") is None or shutil.which("gcc") is None:
        raise SystemExit("needs wrk and gcc (Debian: apt-get install wrk gcc)")
    results = new_results(args)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp_name, \
            RedisServer(data_dir=Path(tmp_name) / "redis", appendonly=False) as server:
        tmp = Path(tmp_name)
        load_bin = tmp / "remoting_load"
        subprocess.run(["gcc", "-O2", "-o", str(load_bin), str(HERE / "remoting_load.c")],
                       check=True)
        asyncio.run(populate(server.url, args.groups))
        try:
            proc, http_port, remoting_port = start_worker(server.url, tmp / "w.log",
                                                          NSFLEET_NAMESPACE="bench")
            procs.append(proc)
            route_url = f"http://127.0.0.1:{http_port}/v1/routes/{TOPIC}"
            with urllib.request.urlopen(route_url) as resp:
                (tmp / "http.json").write_bytes(resp.read())
            (tmp / "remoting.json").write_bytes(asyncio.run(remoting_body(remoting_port)))
            results["route_bytes"] = {"http": (tmp / "http.json").stat().st_size,
                                      "remoting": (tmp / "remoting.json").stat().st_size}
            bare, bare_port = start_ceiling("http", tmp / "http.json", tmp / "c.log")
            procs.append(bare)
            framed, framed_port = start_ceiling("remoting", tmp / "remoting.json", tmp / "c.log")
            procs.append(framed)
            c, s = args.http_connections, args.seconds
            wrk(route_url, 1, c)  # warm-up: the cache fill, JIT-free but first-touch costs
            results["http"] = compare(
                args.rounds, lambda: wrk(route_url, s, c),
                lambda: wrk(f"http://127.0.0.1:{bare_port}/v1/routes/{TOPIC}", s, c))
            n, w = args.remoting_connections, args.window
            remoting_load(load_bin, remoting_port, 1, n, w)
            results["remoting"] = compare(
                args.rounds, lambda: remoting_load(load_bin, remoting_port, s, n, w),
                lambda: remoting_load(load_bin, framed_port, s, n, w))
        finally:
            for p in procs:
                p.terminate()
                p.wait(20)
    write_results("hotpath", results)


if __name__ == "__main__":
    main()
