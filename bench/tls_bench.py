"""What TLS on the remoting port costs: route reads over long-lived connections, and new
connections (connect, one route read, close), plaintext vs TLS on one `permissive` worker, with
the same plaintext load on a `disabled` worker as the ceiling. Rounds alternate between the
variants; figures are medians, and ratios are to the ceiling measured in the same run. The load
generator shares the machine (and does the client half of every handshake).

Writes bench/results/tls_bench.json.

    PYTHONPATH=. .venv/bin/python bench/tls_bench.py [--quick] [--seconds 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis.asyncio as aioredis
from benchlib import new_results, start_worker, write_results
from route_bench import populate, remoting_load, route_request

from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from nsfleet.wire.codec import FrameDecoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.certs import Authority  # from the repository root, just added

Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def opener(port: int, ctx: ssl.SSLContext | None) -> Opener:
    def open_() -> Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        return asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                       server_hostname="127.0.0.1" if ctx else None)
    return open_


async def new_connections(open_: Opener, topics: int, seconds: float,
                          concurrency: int = 8) -> float:
    """Connections per second, each: connect (and handshake), one route read, close."""
    count = 0
    deadline = time.monotonic() + seconds

    async def one(c: int) -> None:
        nonlocal count
        opaque = c * 1_000_000
        while time.monotonic() < deadline:
            reader, writer = await open_()
            opaque += 1
            writer.write(route_request(opaque, topics))
            decoder = FrameDecoder()
            while not (answers := decoder.feed(await reader.read(1 << 16))):
                pass
            assert answers[0].code == 0, answers[0].remark
            writer.close()
            await writer.wait_closed()
            count += 1
    await asyncio.gather(*(one(c) for c in range(concurrency)))
    return count / seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 s rounds, 3 rounds")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--topics", type=int, default=500)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds = 1.0, 3
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        ca = Authority(Path(tmp), "bench")
        cert = ca.issue("server", server=True)
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        await populate(RouteStore(client, "bench"), 20, args.topics)
        await client.aclose()
        ctx = ssl.create_default_context(cafile=str(ca.cert_file))
        plain_proc, _, plain_port = start_worker(server.url, Path(tmp) / "plain.log",
                                                 NSFLEET_NAMESPACE="bench")
        tls_proc, _, tls_port = start_worker(
            server.url, Path(tmp) / "tls.log", NSFLEET_NAMESPACE="bench",
            NSFLEET_TLS_MODE="permissive", NSFLEET_TLS_CERT_FILE=str(cert.cert_file),
            NSFLEET_TLS_KEY_FILE=str(cert.key_file))
        variants = {"disabled_plaintext": (plain_port, None),
                    "permissive_plaintext": (tls_port, None),
                    "permissive_tls": (tls_port, ctx)}
        samples: dict[str, list[float]] = {}
        try:
            for _ in range(args.rounds):
                for name, (port, context) in variants.items():
                    samples.setdefault(f"steady_reads_per_s_{name}", []).append(
                        await remoting_load(port, args.topics, args.seconds, tls=context))
                    samples.setdefault(f"new_connections_per_s_{name}", []).append(
                        await new_connections(opener(port, context), args.topics,
                                              args.seconds))
        finally:
            for proc in (plain_proc, tls_proc):
                proc.terminate()
                proc.wait(20)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    results["medians"] = medians
    results["samples"] = samples
    results["ratios_to_disabled_plaintext"] = {
        k: medians[k] / medians[k.split("_permissive_")[0] + "_disabled_plaintext"]
        for k in medians if "_permissive_" in k}
    write_results("tls_bench", results)


if __name__ == "__main__":
    asyncio.run(main())
